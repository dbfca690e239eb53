"""`analyse` resumed from an earlier pass (rules/conversation.py's `Folds`) decides exactly as a pass
over every item: the same conversation, or the same 400 with the same message and param, whatever
the items' order, repeats and omissions, and wherever the earlier pass stopped."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.rules.conversation import Conversation, Folds, analyse
from ptc_emulator.emulator.signing import ProgramSeal, Signer, code_digest
from ptc_emulator.emulator.wire.items import (
    FunctionCall,
    FunctionCallOutput,
    Item,
    Message,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
)

SIGNER = Signer(b"folds-test-secret")


def _program(call_id: str) -> ProgramItem:
    code = f"text('{call_id}')"
    seal = ProgramSeal(call_id=call_id, code_sha256=code_digest(code), seed=1, clock_ms=0, tools=("add",))
    return ProgramItem(id=f"prog_{call_id}", call_id=call_id, code=code, fingerprint=SIGNER.fingerprint(seal))


def _pool() -> list[Item]:
    """Items of a conversation with direct calls, two programs (one finished) and their calls."""
    items: list[Item] = [Message(role="user", content="go")]
    for n in range(3):  # direct calls and their outputs
        items.append(FunctionCall(call_id=f"d{n}", name="add", arguments="{}"))
        items.append(FunctionCallOutput(call_id=f"d{n}", output=str(n)))
    for p in ("p0", "p1"):
        items.append(_program(p))
        caller = ProgramCaller(caller_id=p)
        for n in range(2):
            items.append(FunctionCall(call_id=f"{p}c{n}", name="add", arguments="{}", caller=caller))
            items.append(FunctionCallOutput(call_id=f"{p}c{n}", output=str(n), caller=caller))
    output_id = SIGNER.program_output_id("p0", "completed", "ok")
    items.append(ProgramOutputItem(id=output_id, call_id="p0", result="ok", status="completed"))
    items.append(Message(role="assistant", content="so far"))
    items.append(Message(role="user", content="more"))
    return items


POOL = _pool()


def _decide(items: list[Item], new_from: int, folds: Folds | None) -> Any:
    try:
        conv = analyse(items, new_from, SIGNER, folds)
    except InvalidRequest as e:
        return ("error", e.message, e.param)
    return ("ok", _state(conv))


def _state(conv: Conversation) -> Any:
    return (
        conv.anchor,
        [(k, id(v)) for k, v in conv.calls.items()],
        [(k, id(v)) for k, v in conv.outputs.items()],
        [(k, id(v)) for k, v in conv.programs.items()],
        list(conv.seals.items()),
        [(k, id(v)) for k, v in conv.program_outputs.items()],
        None if conv.open_program is None else id(conv.open_program),
        conv.open_index,
        {p: [id(c) for c in conv.program_calls(p)] for p in conv.programs},
    )


@st.composite
def replays(draw: st.DrawFn) -> list[int]:
    """A conversation's items as a client replays them: the whole or a prefix, then a few edits
    (an item left out, repeated, moved) that mostly land late, where a resumed pass reads them."""
    order = list(range(draw(st.integers(1, len(POOL)))))
    for _ in range(draw(st.integers(0, 2))):
        edit = draw(st.sampled_from(["drop", "repeat", "swap"]))
        at = draw(st.integers(0, len(order) - 1)) if order else 0
        if edit == "drop" and order:
            del order[at]
        elif edit == "repeat" and order:
            order.insert(draw(st.integers(at, len(order))), order[at])
        elif edit == "swap" and len(order) > 1:
            at = min(at, len(order) - 2)
            order[at], order[at + 1] = order[at + 1], order[at]
    return order


@settings(max_examples=400, deadline=None)
@given(order=replays(), other=replays(), cut=st.integers(0, len(POOL) + 2), new_from=st.integers(0, 5))
def test_a_pass_resumed_from_a_prefix_decides_as_a_whole_pass(
    order: list[int], other: list[int], cut: int, new_from: int
) -> None:
    # The same objects, in order or edited: what a replay looks like to the engine once the
    # replayed-body cache has handed back the known items. Two earlier requests: this one's
    # prefix, and another replay of the same conversation (which may end on the same object at
    # the same place after other items: it must not be taken for a prefix).
    items = [POOL[i] for i in order]
    folds = Folds()
    _decide([POOL[i] for i in other], 0, folds)
    _decide(items[: min(cut, len(items))], 0, folds)
    resumed = _decide(items, new_from, folds)
    whole = _decide(items, new_from, None)
    assert resumed == whole


def test_the_pass_reads_only_the_new_items_and_keeps_its_bounds() -> None:
    folds = Folds(limit=2)
    base = POOL[:7]
    assert _decide(base, 0, folds)[0] == "ok"
    assert folds.read == 7
    longer = [*base, *POOL[7:12]]
    assert _decide(longer, 0, folds) == _decide(longer, 0, None)
    assert folds.read == 7 + 5 and folds.hits == 1
    # Equal items that are other objects are read again: identity, never equality.
    copies = [item.model_copy() for item in longer]
    before = folds.read
    assert _decide(copies, 0, folds)[0] == "ok"
    assert folds.read - before == len(copies)
    assert len(folds._by_last) <= 2


def test_the_kept_passes_hold_at_most_their_items_bound() -> None:
    folds = Folds(max_items=12)
    for n in range(1, len(POOL) + 1):
        _decide(POOL[:n], 0, folds)
        assert folds.items <= 12
        assert folds.items == sum(len(fold.items) for fold in folds._by_last.values())
    assert folds._by_last  # the latest passes that fit are kept; one over the bound alone is not
    assert max(len(fold.items) for fold in folds._by_last.values()) <= 12
    assert _decide(POOL, 0, folds)[0] == "ok"


@settings(max_examples=300, deadline=None)
@given(order=replays(), cut=st.integers(0, len(POOL) + 2), first_from=st.integers(0, 12), new_from=st.integers(0, 12))
def test_a_pass_kept_where_a_history_ends_decides_as_a_whole_pass(
    order: list[int], cut: int, first_from: int, new_from: int
) -> None:
    # The earlier request continued a history (`previous_response_id`): its pass is also kept
    # where that history ended, and a later request over the same objects resumes from there.
    items = [POOL[i] for i in order]
    folds = Folds()
    _decide(items[: min(cut, len(items))], first_from, folds)
    assert _decide(items, new_from, folds) == _decide(items, new_from, None)


def test_a_continuation_reads_only_what_follows_its_history() -> None:
    folds = Folds()
    history, mine = POOL[:7], [item.model_copy() for item in POOL[7:9]]
    first = [*history, *mine]
    assert _decide(first, len(history), folds) == _decide(first, len(history), None)
    read = folds.read
    # The next request: the same history objects, the last request's items as the store gives
    # them back (validated again: other objects), then its own new items.
    again = [*history, *(item.model_copy() for item in mine), *POOL[9:12]]
    assert _decide(again, 9, folds) == _decide(again, 9, None)
    assert folds.read - read == len(again) - len(history)
