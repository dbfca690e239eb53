"""Where a conversation stands in a script: each model item after the latest user message, with
its turn and its place in that turn (`position`, `turn_items`).

A walk is one of the conversation cursor's fields (`history/cursor.py`, `WALKS`): read on from the
walk the recognised cursor holds, if it began after the same latest user message, and left
in the request's cursor where its items end, so a step of a long conversation reads only its new
items. A script is known by its shape (each turn's kind and number of calls: all a walk reads of
it), since an inline program's script is made again per request.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.history.cursor import WALKS, Walk, WalkKey
from ptc_emulator.emulator.model.runtime import hosted_shell_call
from ptc_emulator.emulator.model.scripted.scenario import Turn
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    CodeInterpreterCall,
    Item,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    Message,
    ProgramCaller,
    ProgramItem,
    ShellCall,
    ToolSearchCallItem,
)

if TYPE_CHECKING:
    from ptc_emulator.emulator.model.scripted.script import Script

__all__ = ["position", "turn_items", "turn_request"]


def turn_kind(item: Item) -> str | None:
    kind = _kind_of_type(type(item))
    if kind == "call":
        if isinstance(getattr(item, "caller", None), ProgramCaller):
            return None
        return "shell" if isinstance(item, ShellCall) and hosted_shell_call(item) else "call"
    if kind == "message":
        return "message" if item.role == "assistant" else None  # type: ignore[union-attr]
    if kind in ("mcp", "code_interpreter"):
        return kind if item.caller is None else None  # type: ignore[union-attr]
    return kind


@functools.cache
def _kind_of_type(cls: type) -> str | None:
    """`turn_kind`'s type tests, once per item class (the per-item tests are in `turn_kind`)."""
    if issubclass(cls, ProgramItem):
        return "program"
    if issubclass(cls, ToolSearchCallItem):
        return "search"
    if issubclass(cls, CALL_TYPES):
        return "call"
    if issubclass(cls, Message):
        return "message"
    if issubclass(cls, (McpCall, McpApprovalRequest)):
        return "mcp"
    if issubclass(cls, CodeInterpreterCall):
        return "code_interpreter"
    return None


def _key(script: Script) -> WalkKey:
    return tuple((_shape(turn), len(turn.calls)) for turn in script.turns)


def _shape(turn: Turn) -> str:
    """A turn's kind, and whether it says a preamble (a walk reads a message before its call then)."""
    return turn.kind if turn.preamble is None else turn.kind + "+preamble"


PREAMBLE = -1
"""A walked item's place in its turn when it is the turn's preamble (the message said before the
turn's first call or its program): not one of the turn's calls, nor its first item."""


def _walk(conv: Conversation, script: Script) -> Walk:
    """The walk of the items after the latest user message: once per request and script shape
    (neither changes while a request is answered), read on through the conversation's cursor. A
    walk that fails is not kept (it fails again, the same way)."""
    after, anchor, ext = conv.after_anchor(), conv.anchor, conv.cursor
    mark = ext.mark - anchor - 1 if ext.mark is not None and ext.mark > anchor else None

    def read(walk: Walk | None, end: int) -> Walk:
        return _read(script, after, anchor, walk, end)

    return ext.read_on(WALKS, _key(script), len(after), mark, read, holds=lambda walk: walk.anchor == anchor)


def _read(script: Script, after: list[Item], anchor: int, walk: Walk | None, end: int) -> Walk:
    """`walk` (None: the start) read on to the first `end` items after the latest user message."""
    start, turn, emitted = (walk.covers, walk.turn, walk.emitted) if walk is not None else (0, 0, 0)
    asked = set(walk.asked) if walk is not None else set()
    walked = list(walk.walked) if walk is not None else []
    for i in range(start, end):
        item = after[i]
        if isinstance(item, McpApprovalResponse) and item.approval_request_id in asked and not item.approve:
            turn += 1  # a denied direct MCP call: the model goes on without it
            continue
        kind = turn_kind(item)
        if kind is None:
            continue
        expected = script.turns[turn].kind if turn < len(script.turns) else "nothing"
        if kind == "message" and _preamble_due(script, turn, emitted, walked):
            walked.append((item, turn, PREAMBLE))  # the turn's own message, before its call(s)
            continue
        if kind != expected and not (kind == "message" and expected == "refusal"):
            raise messages.scenario_mismatch(script.name, turn, expected, item.type)
        walked.append((item, turn, emitted))
        if isinstance(item, McpApprovalRequest):
            asked.add(item.id)
            continue  # the turn plays again once the request is answered
        if kind == "call":
            emitted += 1
            if emitted < len(script.turns[turn].calls):
                continue
            emitted = 0
        turn += 1
    return Walk(anchor, end, turn, emitted, frozenset(asked), tuple(walked))


def _preamble_due(script: Script, turn: int, emitted: int, walked: list[tuple[Item, int, int]]) -> bool:
    """Whether turn `turn` says a preamble and has walked no item yet (its preamble among them)."""
    if turn >= len(script.turns) or script.turns[turn].preamble is None or emitted:
        return False
    return not walked or walked[-1][1] != turn


def position(conv: Conversation, script: Script) -> tuple[int, int]:
    """Where the conversation stands in the script: (next turn, direct calls of it already emitted)."""
    walked = _walk(conv, script).walked
    if not walked:
        return 0, 0
    item, turn, emitted = walked[-1]
    if emitted == PREAMBLE:  # the preamble came back without its call: the turn plays again
        return turn, 0
    if isinstance(item, CALL_TYPES) and emitted + 1 < len(script.turns[turn].calls):
        return turn, emitted + 1
    if isinstance(item, McpApprovalRequest):
        return turn, 0
    return turn + 1, 0


def turn_items(conv: Conversation, script: Script) -> list[tuple[Item, Turn]]:
    """The first item of each turn after the latest user message, with its turn (a turn's
    reasoning item precedes its first item)."""
    firsts: dict[int, tuple[Item, Turn]] = {}
    for item, turn, emitted in _walk(conv, script).walked:
        if emitted == 0 and turn not in firsts:
            firsts[turn] = (item, script.turns[turn])
    return list(firsts.values())


def turn_request(conv: Conversation, script: Script, turn: int) -> McpApprovalRequest | None:
    """The approval request turn `turn` (a direct MCP call) asked after the latest user message,
    if it asked one: an earlier turn's request, answered or not, is never this turn's."""
    found = None
    for item, at, _ in _walk(conv, script).walked:
        if at == turn and isinstance(item, McpApprovalRequest):
            found = item
    return found
