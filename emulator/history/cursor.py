"""The conversation cursor: everything derived from a recognised conversation prefix, in one place.

A client continues a conversation in one of three ways, and each has a source that recognises the
conversation again: a `store: false` body that extends one read before (the body reader,
`replayed.PrefixCache`), a `previous_response_id` chain of the server's stored responses, and one
of a WebSocket's own responses (both `stored.History`, its `Chains`). A source hands a request an
`Extension`: the `Cursor` it recognised (`base`) and a new one over what the request brings
(`cursor`: the body's input items, or the history the request continues), which the source keeps
for the next request. A cursor holds the conversation's first items and what the steps of a
request derived over them, each in a typed field:

    rules       the conversation rules' pass (`rules/conversation.analyse`), stopped before the
                checks that need the whole conversation
    walks       where the conversation stands in a script (`model/scripted/walk.py`), by the
                script's shape
    positions   each program's call positions in its issue order (`rules/checks.call_indexes`)
    entries     each program's journal entries (`Runtime.answers`: the pool is handed the very
                same `ToolResult`s again, and sends a live worker only the new ones)
    model_read  the items the model reads (`responses/usage.model_read`)

The invariant, stated here once: a cursor's items are the very objects the source handed the
request that made it, and a request reads on from a cursor only if its conversation begins with
exactly those objects (identity, never equality: `Extension.fit`, once per request, at C speed).
So an edited, re-parsed or reordered item is another object and is read afresh, and each field,
derived over those objects alone, holds for the request as it held for the one that made it.

Each request extends once, by one rule: a field is read on from the base cursor's state over the
elements the request adds, left in the request's cursor at its mark (where the cursor's items
end), and kept for the rest of the request, so a step that asks again gets the same state.
`Extension.read_on` is that rule for every field derived after the rules; the rules' pass, being
the very loop that holds the conversation to the rules, is read on from the base's and left at
the mark by `analyse` itself (`Extension.start`, `Extension.mark`). A field's state covers a prefix
of its own sequence (the items after the latest user message, a program's calls, ...), counted
by `covers`. Nothing else in the engine keeps conversation state between requests; a cursor
goes when its source lets it go.
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel

from ptc_emulator.emulator.wire.items import CallItem, Item
from ptc_emulator.sandbox import ToolResult

__all__ = [
    "ENTRIES",
    "MODEL_READ",
    "POSITIONS",
    "WALKS",
    "Cursor",
    "Entries",
    "Extension",
    "ModelRead",
    "Positions",
    "RulesPass",
    "Walk",
    "WalkKey",
    "retained",
]

_OBJECT = 64
"""Bytes an object, a field or a list slot costs beyond its text, roughly (for the bounds)."""
DERIVED = 256
"""Bytes a cursor's fields keep per item, roughly (its share of the rules' dicts, the walk, the
positions and entries): what its owner counts besides the items themselves."""


def retained(value: Any) -> int:
    """An estimate of the bytes `value` (an item, or any of its fields) keeps alive: its strings
    and bytes as CPython holds them (`sys.getsizeof`), and `_OBJECT` per model, field, container
    and slot. Every large value a client can send is a string, a list or a dict, so none is missed."""
    if isinstance(value, str | bytes):
        return sys.getsizeof(value)
    if isinstance(value, BaseModel):
        fields = value.__dict__
        extra = value.__pydantic_extra__
        total = _OBJECT * (1 + len(fields)) + sum(retained(v) for v in fields.values())
        if extra:
            total += sum(_OBJECT + retained(v) for v in extra.values())
        return total
    if isinstance(value, dict):
        return _OBJECT + sum(_OBJECT + retained(k) + retained(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return _OBJECT + sum(_OBJECT + retained(v) for v in value)
    return _OBJECT


_STATE = (
    "calls",
    "outputs",
    "programs",
    "seals",
    "program_outputs",
    "approval_requests",
    "approval_responses",
    "search_calls",
    "search_outputs",
    "ids",
    "reasoning",
    "bare_reasoning",
)
"""The dicts `analyse`'s pass fills, item by item (with the anchor, each program's calls and
where each program item stands)."""


def _copy_calls(by_program: dict[str, list[CallItem]]) -> dict[str, list[CallItem]]:
    return {caller: list(calls) for caller, calls in by_program.items()}


@dataclass
class RulesPass:
    """`analyse`'s pass (over a `Conversation`: its module imports this one) stopped after a
    cursor's items, before the checks that need the whole conversation."""

    anchor: int
    state: dict[str, dict[str, Any]]
    by_program: dict[str, list[CallItem]]
    program_at: dict[str, int]

    @classmethod
    def of(cls, conv: Any, by_program: dict[str, list[CallItem]], program_at: dict[str, int]) -> RulesPass:
        """The pass as it stands (copies: the request reads on)."""
        state = {name: dict(getattr(conv, name)) for name in _STATE}
        return cls(conv.anchor, state, _copy_calls(by_program), dict(program_at))

    def restore(self, conv: Any) -> tuple[dict[str, list[CallItem]], dict[str, int]]:
        """Put the pass back into `conv` (copies: the cursor stays as it is); returns each program's
        calls and where each program item stands."""
        conv.anchor = self.anchor
        for name in _STATE:
            setattr(conv, name, dict(self.state[name]))
        return _copy_calls(self.by_program), dict(self.program_at)


WalkKey = tuple[tuple[str, int], ...]
"""A script's shape: each turn's kind and number of calls, all a walk reads of it (an inline
program's script is made again per request, so a script is known by its shape)."""


@dataclass(frozen=True, slots=True)
class Walk:
    """Where a conversation stands in a script, over the items after its latest user message."""

    anchor: int
    """Where the latest user message the walk began after stands."""
    covers: int
    """Items after it read."""
    turn: int
    emitted: int
    asked: frozenset[str]
    walked: tuple[tuple[Item, int, int], ...]
    """Each model item read, with its turn and its place in that turn."""


@dataclass(frozen=True, slots=True)
class Positions:
    """A program's first calls' positions in its issue order."""

    found: tuple[int, ...]

    @property
    def covers(self) -> int:
        return len(self.found)


@dataclass(frozen=True, slots=True)
class Entries:
    """A program's journal: its first calls, each answered, as the pool is handed them."""

    results: tuple[ToolResult, ...]

    @property
    def covers(self) -> int:
        return len(self.results)


@dataclass(frozen=True, slots=True)
class ModelRead:
    """The items the model reads among the conversation's first `covers`."""

    read: tuple[Item, ...]
    covers: int


@dataclass(eq=False)
class Cursor:
    """A recognised conversation prefix: its items (the very objects) and what was derived over them."""

    items: tuple[Item, ...]
    size: int = 0
    """What it keeps alive, roughly, in bytes (its owner's bound counts it)."""
    rules: RulesPass | None = None
    walks: dict[WalkKey, Walk] = field(default_factory=dict)
    positions: dict[str, Positions] = field(default_factory=dict)
    entries: dict[str, Entries] = field(default_factory=dict)
    model_read: ModelRead | None = None


class _Derived(Protocol):
    @property
    def covers(self) -> int: ...


K = TypeVar("K")
D = TypeVar("D", bound=_Derived)


@dataclass(frozen=True, eq=False)
class Field(Generic[K, D]):
    """Where a kind of derived state sits in a cursor, by key."""

    name: str
    get: Callable[[Cursor, K], D | None]
    put: Callable[[Cursor, K, D], None]


def _set_model_read(cursor: Cursor, _: None, read: ModelRead) -> None:
    cursor.model_read = read


WALKS: Field[WalkKey, Walk] = Field("walks", lambda c, k: c.walks.get(k), lambda c, k, v: c.walks.__setitem__(k, v))
POSITIONS: Field[str, Positions] = Field(
    "positions", lambda c, k: c.positions.get(k), lambda c, k, v: c.positions.__setitem__(k, v)
)
ENTRIES: Field[str, Entries] = Field(
    "entries", lambda c, k: c.entries.get(k), lambda c, k, v: c.entries.__setitem__(k, v)
)
MODEL_READ: Field[None, ModelRead] = Field("model_read", lambda c, _: c.model_read, _set_model_read)


def _begins(items: Sequence[Item], prefix: Sequence[Item]) -> bool:
    """Whether `items` begins with the very objects of `prefix`."""
    return len(prefix) <= len(items) and all(map(operator.is_, prefix, items))


class Extension:
    """One request's reading of its conversation: the cursor its source recognised (`base`, read
    on from) and the one it extends for the next request (`cursor`, over the request's first
    items up to its `mark`). Either may be None: a request that nothing recognised reads all its
    items, one whose source keeps nothing leaves nothing."""

    def __init__(self, base: Cursor | None = None, cursor: Cursor | None = None) -> None:
        self.base = base
        self.cursor = cursor
        self._now: dict[tuple[str, Any], Any] = {}
        """Each field's state over the whole conversation, once read (a step may ask again)."""

    def fit(self, items: Sequence[Item]) -> Extension:
        """This extension for a conversation of `items`: a cursor whose items are not the very
        objects `items` begins with is left out (the invariant, in the module's docstring)."""
        base = self.base if self.base is not None and _begins(items, self.base.items) else None
        cursor = self.cursor if self.cursor is not None and _begins(items, self.cursor.items) else None
        return Extension(base, cursor)

    @property
    def start(self) -> int:
        """How many leading items the base cursor's rules pass has read."""
        return len(self.base.items) if self.base is not None and self.base.rules is not None else 0

    @property
    def mark(self) -> int | None:
        """Where the request's cursor ends (None: it leaves none)."""
        return len(self.cursor.items) if self.cursor is not None else None

    def calls_at_mark(self, program: str) -> int | None:
        """How many of the program's calls the request's cursor holds."""
        rules = self.cursor.rules if self.cursor is not None else None
        return len(rules.by_program.get(program, ())) if rules is not None else None

    def answered_at_mark(self, program: str) -> int | None:
        """How many of the program's first calls the request's cursor holds with their outputs
        (looked for after those the base cursor's entries hold, at C speed)."""
        rules = self.cursor.rules if self.cursor is not None else None
        if rules is None:
            return None
        calls = rules.by_program.get(program, [])
        kept = self.base.entries.get(program) if self.base is not None else None
        start = kept.covers if kept is not None and kept.covers <= len(calls) else 0
        ids = map(operator.attrgetter("call_id"), itertools.islice(calls, start, None))
        return start + len(list(itertools.takewhile(rules.state["outputs"].__contains__, ids)))

    def read_on(
        self,
        field: Field[K, D],
        key: K,
        total: int,
        mark: int | None,
        read: Callable[[D | None, int], D],
        holds: Callable[[D], bool] | None = None,
    ) -> D:
        """A field's state over the first `total` elements of its sequence, for this request.

        `read(state, end)` reads on from `state` (None: from the start) to the first `end`
        elements and returns a new state (it never changes the one it is given). The base
        cursor's state is read on from if it `holds` for this conversation; the state at `mark`
        elements (None: none) is left in the request's cursor; the state over all is kept for
        the rest of the request."""
        now = self._now.get((field.name, key))
        if now is not None and now.covers == total:
            return cast(D, now)
        kept = field.get(self.base, key) if self.base is not None else None
        if kept is not None and ((holds is not None and not holds(kept)) or kept.covers > total):
            kept = None
        covered = kept.covers if kept is not None else 0
        if self.cursor is not None and mark is not None and covered <= mark <= total:
            if kept is None or covered < mark:
                kept = read(kept, mark)
            field.put(self.cursor, key, kept)
        state = kept if kept is not None and kept.covers == total else read(kept, total)
        self._now[(field.name, key)] = state
        return state
