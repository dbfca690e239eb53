"""Where a conversation stands in a script: each model item after the latest user message, with
its turn and its place in that turn (`position`, `turn_items`).

A replayed conversation is mostly the last request's items again (the very objects, see
`history.folds`), so a walk is left with the rules' kept passes (`Conversation.remember`) where the
last request's items ended and where its history ended (a `previous_response_id` continuation
reads its history back as the same objects, its own items as new ones); a walk whose items begin
with those very objects, after the very same latest user message, resumes there, and a step
reads only its new items. Items are matched by identity, never by equality; a script by its
shape (each turn's kind and number of calls: all a walk reads of it), since an inline program's
script is made again per request."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ptc_emulator.emulator import messages
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

__all__ = ["position", "turn_items"]

Walked = list[tuple[Item, int, int]]


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


@dataclass
class _Point:
    """A walk stopped after `items` (the very objects after the anchor): its state there."""

    items: list[Item]
    turn: int
    emitted: int
    asked: frozenset[str]
    walked: int
    """How many of the walk's entries come from `items`."""


@dataclass
class _Kept:
    anchor: Item | None
    """The latest user message the walk began after."""
    points: list[_Point]
    """The longest first."""
    walked: Walked


def _key(script: Script) -> tuple[str, tuple[tuple[str, int], ...]]:
    return "walk", tuple((turn.kind, len(turn.calls)) for turn in script.turns)


def _resumed(conv: Conversation, script: Script, after: list[Item]) -> tuple[_Point, Walked] | None:
    """Where a walk of the kept pass this conversation was read on from stopped, if its items
    are this one's first (the very objects, after the very same latest user message)."""
    kept = conv.derived.get(_key(script))
    anchor = conv.items[conv.anchor] if conv.anchor >= 0 else None
    if not isinstance(kept, _Kept) or kept.anchor is not anchor:
        return None
    for point in kept.points:
        if len(point.items) <= len(after) and all(map(operator.is_, point.items, after)):
            return point, kept.walked[: point.walked]
    return None


def _walk(conv: Conversation, script: Script) -> Walked:
    """Each model item after the latest user message, with its turn and its place in that turn.

    Walked once per script (by identity) and conversation: neither changes while a request is
    answered. A walk that fails is not kept (it fails again, the same way)."""
    for walked_script, walked in conv.walks:
        if walked_script is script:
            return list(walked)
    walked = _walk_once(conv, script)
    conv.walks.append((script, walked))
    return list(walked)


def _walk_once(conv: Conversation, script: Script) -> Walked:
    after = conv.after_anchor()
    walked: Walked = []
    start = turn = emitted = 0
    asked: set[str] = set()
    found = _resumed(conv, script, after)
    if found is not None:
        point, walked = found
        start, turn, emitted, asked = len(point.items), point.turn, point.emitted, set(point.asked)
    boundary = conv.new_from - conv.anchor - 1  # where this request's own items begin
    points: list[_Point] = []
    for i in range(start, len(after)):
        if i == boundary and i > 0:
            points.append(_Point(after[:i], turn, emitted, frozenset(asked), len(walked)))
        item = after[i]
        if isinstance(item, McpApprovalResponse) and item.approval_request_id in asked and not item.approve:
            turn += 1  # a denied direct MCP call: the model goes on without it
            continue
        kind = turn_kind(item)
        if kind is None:
            continue
        expected = script.turns[turn].kind if turn < len(script.turns) else "nothing"
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
    points.insert(0, _Point(after, turn, emitted, frozenset(asked), len(walked)))
    conv.remember(_key(script), _Kept(conv.items[conv.anchor] if conv.anchor >= 0 else None, points, walked))
    return walked


def position(conv: Conversation, script: Script) -> tuple[int, int]:
    """Where the conversation stands in the script: (next turn, direct calls of it already emitted)."""
    walked = _walk(conv, script)
    if not walked:
        return 0, 0
    item, turn, emitted = walked[-1]
    if isinstance(item, CALL_TYPES) and emitted + 1 < len(script.turns[turn].calls):
        return turn, emitted + 1
    if isinstance(item, McpApprovalRequest):
        return turn, 0
    return turn + 1, 0


def turn_items(conv: Conversation, script: Script) -> list[tuple[Item, Turn]]:
    """The first item of each turn after the latest user message, with its turn (a turn's
    reasoning item precedes its first item)."""
    firsts: dict[int, tuple[Item, Turn]] = {}
    for item, turn, emitted in _walk(conv, script):
        if emitted == 0 and turn not in firsts:
            firsts[turn] = (item, script.turns[turn])
    return list(firsts.values())
