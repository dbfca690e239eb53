"""The latest passes of the conversation rules (`conversation.analyse`), for the requests that
replay their items: bounded by passes, by items and by the bytes the items they hold retain."""

from __future__ import annotations

import operator
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ptc_emulator.emulator.wire.items import CallItem, Item, ProgramCaller

__all__ = ["Fold", "Folds", "file_program_call", "identical_prefix", "retained"]

_OBJECT = 64
"""Bytes an object, a field or a list slot costs beyond its text, roughly (for the bound)."""


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


def identical_prefix(kept: Sequence[Any], current: Sequence[Any], *more: tuple[Sequence[Any], Sequence[Any]]) -> int:
    """How many leading elements `current` shares with `kept`, the very objects (and so for each
    further pair at the same positions). A replay hands back the objects a request read before,
    except at its end, where items come back from the store again: so the mismatch is looked for
    from the end, one by one, and the prefix before it is checked at C speed."""
    end = min(len(kept), len(current), *(min(len(a), len(b)) for a, b in more))
    while end > 0 and not (kept[end - 1] is current[end - 1] and all(a[end - 1] is b[end - 1] for a, b in more)):
        end -= 1
    if end and all(map(operator.is_, kept[:end], current[:end])):
        if all(all(map(operator.is_, a[:end], b[:end])) for a, b in more):
            return end
    # An earlier object differs too (an edited or re-parsed item): find the first that does.
    same = 0
    while same < end and kept[same] is current[same] and all(a[same] is b[same] for a, b in more):
        same += 1
    return same


def file_program_call(by_program: dict[str, list[CallItem]], call: CallItem) -> None:
    """Add `call` to its program's calls, if a program made it."""
    caller = getattr(call, "caller", None)
    if isinstance(caller, ProgramCaller):
        by_program.setdefault(caller.caller_id, []).append(call)


def _copy_calls(by_program: dict[str, list[CallItem]]) -> dict[str, list[CallItem]]:
    return {caller: list(calls) for caller, calls in by_program.items()}


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
)
"""The dicts `analyse`'s pass fills, item by item (with the anchor, each program's calls and
where each program item stands)."""


@dataclass
class Fold:
    """`analyse`'s pass (over a `Conversation`: its module imports this one) stopped after the last
    of `items` (the very objects), before the checks that need the whole conversation: where a
    request that replays those items starts."""

    items: list[Item]
    anchor: int
    state: dict[str, dict[str, Any]]
    by_program: dict[str, list[CallItem]]
    program_at: dict[str, int]
    bytes: int = 0
    """What `items` retain (`retained`), summed as the passes read them."""
    derived: dict[Any, Any] = field(default_factory=dict)
    """What later steps of the request that kept this pass worked out over these items (or more:
    each checks, by identity, how much of it still holds), for the next request that finds it
    (`Conversation.derived`, `Conversation.remember`): so a walk of the script, the program
    call positions and the journal are read on from where it stopped. Gone with the pass."""

    @classmethod
    def of(
        cls, conv: Any, by_program: dict[str, list[CallItem]], program_at: dict[str, int], size: int, end: int = -1
    ) -> Fold:
        """The pass as it stands, over `conv.items` (or its first `end`, all the pass has read)."""
        return cls(
            list(conv.items) if end < 0 else conv.items[:end],
            conv.anchor,
            {name: dict(getattr(conv, name)) for name in _STATE},
            _copy_calls(by_program),
            dict(program_at),
            size,
        )

    def restore(self, conv: Any) -> tuple[dict[str, list[CallItem]], dict[str, int]]:
        conv.anchor = self.anchor
        for name in _STATE:
            setattr(conv, name, dict(self.state[name]))
        return _copy_calls(self.by_program), dict(self.program_at)


class Folds:
    """The latest passes of `analyse`, for the requests that replay their items.

    A `store: false` client resends every item on every request: the next request of a loop is
    the last one's items plus a few new ones. The replayed-body cache hands it the very item
    objects it validated before (see `replayed`), so a pass over those is found by identity,
    never by equality, and only the new items are read. The result is the same as a whole pass:
    the pass reads each item once, in order, and the checks that need the whole conversation run
    every time. A loop needs only the pass of its previous request, so few are kept; each holds
    its items alive, so they are bounded by the items they hold and by the bytes those retain
    (`retained`, counted for each pass in full although the passes of one conversation share
    their items), the least recent leaving first. `POST /_emulator/reset` empties it. Thread-safe.

    Why it stays a cache of its own, beside the replayed-body cache that recognises the same
    conversation by its text: what it saves is the rules' pass, whose state (the calls by program,
    where each program stands) is per item object; keyed on identity it needs no text and no
    hashing, and it can only hit on items that cache (or the stored-history cache) handed back, so
    it never answers for items it has not read."""

    def __init__(self, limit: int = 128, max_items: int = 50_000, max_bytes: int = 64 * 2**20) -> None:
        self.limit = limit
        """Passes kept (0: none, every request reads all its items)."""
        self.max_items = max_items
        """Items the kept passes may hold in all (a pass over more is not kept)."""
        self.max_bytes = max_bytes
        """Bytes the kept passes' items may retain in all (a pass over more is not kept)."""
        self.items = 0
        self.bytes = 0
        self._by_last: OrderedDict[int, Fold] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.read = 0
        """Items read by `analyse` in all (those of a found pass are not read again)."""

    def __len__(self) -> int:
        return len(self._by_last)

    def find(self, items: list[Item]) -> Fold | None:
        """The longest kept pass over a prefix of `items` (the same objects, in order)."""
        with self._lock:
            for end in range(len(items), 0, -1):
                fold = self._by_last.get(id(items[end - 1]))
                if fold is not None and len(fold.items) == end and all(map(operator.is_, fold.items, items)):
                    self._by_last.move_to_end(id(items[end - 1]))
                    self.hits += 1
                    return fold
        return None

    def keep(self, fold: Fold) -> None:
        if not fold.items or self.limit <= 0 or len(fold.items) > self.max_items or fold.bytes > self.max_bytes:
            return
        with self._lock:  # the fold holds its items, so no other object can take the last one's id
            replaced = self._by_last.pop(id(fold.items[-1]), None)
            if replaced is not None:
                self._drop(replaced)
            self._by_last[id(fold.items[-1])] = fold
            self.items += len(fold.items)
            self.bytes += fold.bytes
            while len(self._by_last) > self.limit or self.items > self.max_items or self.bytes > self.max_bytes:
                self._drop(self._by_last.popitem(last=False)[1])

    def _drop(self, fold: Fold) -> None:
        self.items -= len(fold.items)
        self.bytes -= fold.bytes

    def clear(self) -> None:
        """Forget every pass (and the items they hold)."""
        with self._lock:
            self._by_last.clear()
            self.items = self.bytes = 0
