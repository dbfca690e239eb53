"""`analyse` read on from a conversation cursor (history/cursor.py) decides exactly as a pass over
every item: the same conversation, or the same 400 with the same message and param, whatever the
items' order, repeats and omissions, wherever the earlier request's cursor ended, and whatever
cursor a source offers (one that is not the very objects the conversation begins with is not read
on from). And `Extension.read_on`, the one way a cursor's fields are extended, reads each
element once."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.history.cursor import POSITIONS, Cursor, Extension, Positions
from ptc_emulator.emulator.rules.conversation import Conversation, analyse
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


def _decide(items: list[Item], new_from: int, cursor: Extension | None) -> Any:
    try:
        conv = analyse(items, new_from, SIGNER, cursor)
    except InvalidRequest as e:
        return ("error", e.message, e.param)
    return ("ok", _state(conv))


def _left(items: list[Item], new_from: int = 0, base: Cursor | None = None, mark: int | None = None) -> Cursor:
    """The cursor a request over `items` leaves for the next (over its first `mark` items: all of
    them, as the body reader's, or a history's, as a chain's), read on from `base`."""
    cursor = Cursor(tuple(items[: len(items) if mark is None else mark]))
    _decide(items, new_from, Extension(base, cursor))
    return cursor


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
def test_a_pass_read_on_from_a_cursor_decides_as_a_whole_pass(
    order: list[int], other: list[int], cut: int, new_from: int
) -> None:
    # The same objects, in order or edited: what a replay looks like to the engine once the body
    # reader has handed back the known items. Two earlier requests: this one's prefix, and
    # another replay of the same conversation (which may end on the same object at the same
    # place after other items): offered as the cursor to read on from, it must not be used.
    items = [POOL[i] for i in order]
    prefix = _left(items[: min(cut, len(items))])
    elsewhere = _left([POOL[i] for i in other])
    whole = _decide(items, new_from, None)
    assert _decide(items, new_from, Extension(prefix)) == whole
    assert _decide(items, new_from, Extension(elsewhere)) == whole
    assert _decide(items, new_from, Extension(prefix, Cursor(tuple(items)))) == whole


def test_the_pass_reads_only_the_new_items() -> None:
    base = POOL[:7]
    cursor = _left(base)
    longer = [*base, *POOL[7:12]]
    conv = analyse(longer, 0, SIGNER, Extension(cursor))
    assert conv.read_from == 7
    assert _decide(longer, 0, Extension(cursor)) == _decide(longer, 0, None)
    # Equal items that are other objects are read again: identity, never equality.
    copies = [item.model_copy() for item in longer]
    assert analyse(copies, 0, SIGNER, Extension(cursor)).read_from == 0
    assert _decide(copies, 0, Extension(cursor))[0] == "ok"


def test_a_cursor_is_left_as_the_pass_stood_at_its_mark() -> None:
    later = _left(POOL, mark=9)  # a history's cursor: the request read on past it
    assert later.rules is not None
    fresh = Cursor(tuple(POOL[:9]))
    _decide(POOL[:9], 0, Extension(None, fresh))
    assert fresh.rules is not None
    assert later.rules.anchor == fresh.rules.anchor
    assert later.rules.state == fresh.rules.state
    assert later.rules.by_program == fresh.rules.by_program and later.rules.program_at == fresh.rules.program_at


@settings(max_examples=300, deadline=None)
@given(order=replays(), cut=st.integers(0, len(POOL) + 2), first_from=st.integers(0, 12), new_from=st.integers(0, 12))
def test_a_cursor_left_where_a_history_ends_decides_as_a_whole_pass(
    order: list[int], cut: int, first_from: int, new_from: int
) -> None:
    # The earlier request continued a history (`previous_response_id`): its cursor is the
    # history's, and a later request over the same objects reads on from there.
    items = [POOL[i] for i in order]
    first = items[: min(cut, len(items))]
    cursor = _left(first, first_from, mark=min(first_from, len(first)))
    assert _decide(items, new_from, Extension(cursor)) == _decide(items, new_from, None)


def test_a_continuation_reads_only_what_follows_its_history() -> None:
    history, mine = POOL[:7], [item.model_copy() for item in POOL[7:9]]
    first = [*history, *mine]
    cursor = _left(first, len(history), mark=len(history))
    assert _decide(first, len(history), Extension(None, Cursor(tuple(history)))) == _decide(first, len(history), None)
    # The next request: the same history objects, the last request's items as the store gives
    # them back (validated again: other objects), then its own new items.
    again = [*history, *(item.model_copy() for item in mine), *POOL[9:12]]
    assert _decide(again, 9, Extension(cursor)) == _decide(again, 9, None)
    assert analyse(again, 9, SIGNER, Extension(cursor)).read_from == len(history)


def test_a_field_is_read_on_once_left_at_the_mark_and_kept_for_the_request() -> None:
    read: list[tuple[int, int]] = []

    def positions(kept: Positions | None, end: int) -> Positions:
        found = kept.found if kept is not None else ()
        read.append((len(found), end))
        return Positions((*found, *range(len(found), end)))

    base, mine = Cursor(tuple(POOL[:4])), Cursor(tuple(POOL[:6]))
    base.positions["p"] = Positions((0, 1))
    ext = Extension(base, mine)
    assert ext.read_on(POSITIONS, "p", 5, 3, positions).found == (0, 1, 2, 3, 4)
    assert read == [(2, 3), (3, 5)]  # from the base's two to the mark, then on to all five
    assert mine.positions["p"].found == (0, 1, 2)
    assert ext.read_on(POSITIONS, "p", 5, 3, positions).found == (0, 1, 2, 3, 4)
    assert len(read) == 2  # kept for the rest of the request
    # A state that does not hold for this conversation is not read on from.
    read.clear()
    assert Extension(base).read_on(POSITIONS, "p", 5, None, positions, holds=lambda _: False).covers == 5
    assert read == [(0, 5)]
