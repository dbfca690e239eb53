"""What the pool knows of its workers' live programs: which worker holds each one, and the journal
that worker's copy consumed (`HeldJournal`), so that a resume there is sent its new results only.

Kept per worker in the order of last use, and bounded as the worker's own cache is: by idle time,
and by twice its count (the worker also evicts by bytes, which the pool does not see, so the
pool may believe a copy is held that is not: a tail it sends for it is answered `miss`, and the
whole program follows). Each entry holds on to the program's journal (its `ToolResult`s), so the
bound is what keeps the pool from retaining the journals of programs abandoned mid-way.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from ._wire import digest_and_size, extend_digest, journal_to_json
from .outcome import ToolResult

__all__ = ["HeldJournal", "Holders"]

W = TypeVar("W")


@dataclasses.dataclass(frozen=True, slots=True)
class HeldJournal:
    """The journal a worker's live copy of a program has consumed, as the pool last sent it."""

    entries: tuple[ToolResult, ...]
    """The program's journal it corresponds to: a later journal extends it if its first
    `len(entries)` entries are equal (a tuple comparison, at once for the very same objects)."""
    digest: str
    """Its digest (`digest_and_size`): what a tail-only request names."""
    size: int = 0
    """The length of its JSON text (`digest_and_size`): what `Holders` counts against its bytes."""

    @classmethod
    def whole(cls, journal: tuple[ToolResult, ...], sent: list[Any]) -> HeldJournal:
        """After `journal` was sent whole, as `sent` (its wire form): its digest from scratch."""
        return cls(journal, *digest_and_size(sent))

    def tail_of(self, journal: tuple[ToolResult, ...]) -> list[Any] | None:
        """What `journal` adds to these entries (wire form), if it extends them by at least one."""
        held = len(self.entries)
        if len(journal) <= held or journal[:held] != self.entries:
            return None
        return journal_to_json(journal[held:])

    def extended(self, journal: tuple[ToolResult, ...], tail: list[Any]) -> HeldJournal:
        """After `journal`, these entries and then `tail` (its wire form), was resumed live: the
        digest extended by the tail alone."""
        return HeldJournal(journal, *extend_digest(self.digest, self.size, tail))


class Holders(Generic[W]):
    """The held programs by key: their holder (a worker) and its `HeldJournal`."""

    def __init__(self, per_worker: int, idle_s: float, bytes_per_worker: float = float("inf")) -> None:
        self.per_worker = per_worker
        """The most programs kept for one worker: the oldest beyond it are forgotten."""
        self.bytes_per_worker = bytes_per_worker
        """The most journal text kept for one worker's programs: the oldest beyond it are
        forgotten (the newest is kept whatever its size). Without it, 256 conversations each
        resumed once with a 12 MB tool output kept 3 GB of journals in the server, though each
        worker's own cache had evicted most of them by bytes long before."""
        self._bytes: dict[W, int] = {}
        self.idle_s = idle_s
        """A program unused this long is forgotten (its worker closes its copy too)."""
        self._by_key: dict[str, tuple[W, HeldJournal]] = {}
        self._order: dict[W, OrderedDict[str, float]] = {}
        """Per worker, its programs' keys by last use, with when."""

    def holder(self, key: str) -> W | None:
        entry = self._by_key.get(key)
        return entry[0] if entry is not None else None

    def held(self, key: str, worker: W) -> HeldJournal | None:
        """What `worker`'s copy of the program consumed, if `worker` holds it."""
        entry = self._by_key.get(key)
        return entry[1] if entry is not None and entry[0] is worker else None

    def keep(self, key: str, worker: W, journal: HeldJournal, now: float | None = None) -> None:
        """`worker` holds the program now, having consumed `journal`; forgets, for that worker,
        the programs unused past `idle_s` and the oldest beyond `per_worker`."""
        now = time.monotonic() if now is None else now
        self.drop(key, self.holder(key))
        self._by_key[key] = (worker, journal)
        self._bytes[worker] = self._bytes.get(worker, 0) + journal.size
        order = self._order.setdefault(worker, OrderedDict())
        order[key] = now
        order.move_to_end(key)
        while len(order) > 1 and (
            len(order) > self.per_worker
            or next(iter(order.values())) < now - self.idle_s
            or self._bytes[worker] > self.bytes_per_worker
        ):
            self.drop(next(iter(order)), worker)

    def drop(self, key: str, worker: W | None) -> None:
        """`worker` no longer holds the program (if it did)."""
        if worker is not None and self.holder(key) is worker:
            _, journal = self._by_key.pop(key)
            self._order[worker].pop(key, None)
            self._bytes[worker] -= journal.size

    def drop_worker(self, worker: W) -> None:
        """`worker` is gone, and its programs with it."""
        for key in self._order.pop(worker, {}):
            del self._by_key[key]
        self._bytes.pop(worker, None)

    def clear(self) -> None:
        self._by_key.clear()
        self._order.clear()
        self._bytes.clear()

    def __len__(self) -> int:
        return len(self._by_key)
