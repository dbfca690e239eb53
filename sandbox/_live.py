"""The warm cache of suspended programs in a worker (`_worker.LiveCache`), and what it charges.

A request whose journal extends a cached program's journal by exactly its pending calls resumes
it live instead of replaying it. The outcome is the same either way (a miss simply replays), so
correctness never depends on a hit. A tail-only request names the prefix it continues by its
length and digest (`_wire.digest_and_size`); the cache checks both before it hands the program out.
The digest is a chain over the entries, so a resume extends the held digest (and the journal text
charged) by its new results alone; only a program put after a full run has its journal digested
whole.

What keeping a program costs is its isolate's heap and its journal's text. Measuring the heap
costs about 0.5 ms (mini-racer makes a V8 context to report it), so it is not measured at every
suspension: a program is due a measure at its first suspension, at each one while it holds more
than `_SMALL_HEAP`, and at every `_MEASURE_EVERY`th below; a due measure is taken when the worker
is idle (`measure_one`), or at once when the programs waiting for one could, at their heap limits,
take the cache past its bound. So the cache's bytes may be under-counted only within that bound.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import _v8
from ._wire import digest_and_size, extend_digest
from .outcome import Suspended

__all__ = ["LiveCache", "Taken"]

_SMALL_HEAP = 4 * 2**20
"""A suspended program's heap at or under which it is measured only every `_MEASURE_EVERY`th
suspension (a fresh context holds about 0.75 MB, a small program about 1 MB)."""
_MEASURE_EVERY = 4


@dataclass
class _Live:
    execution: _v8.Execution
    journal: list[Any]
    """The journal (wire form) the execution has consumed."""
    digest: str
    """`digest_and_size(journal)`'s digest: what a tail-only request must name."""
    used: float
    heap: int
    """The isolate's heap as last measured (0: never)."""
    text: int
    """The journal's text, in characters (`digest_and_size(journal)`'s size)."""
    due: bool
    """Its heap is due a measure: `heap` may be stale."""

    @property
    def bytes(self) -> int:
        return self.heap + self.text

    @property
    def headroom(self) -> int:
        """What its heap could hold beyond what it is charged, at its limit."""
        return max(0, self.execution.context.heap_bytes - self.heap) if self.due else 0


class Taken(NamedTuple):
    """A cached execution handed out for a resume."""

    execution: _v8.Execution
    more: list[Any]
    """The results it has not consumed yet (wire form): what the resume hands it."""
    journal: list[Any]
    """Its whole journal once it has consumed `more` (wire form)."""
    known: tuple[int, str, int]
    """How many entries of `journal` it had consumed, with their digest and text size: what
    `LiveCache.put` extends instead of digesting the whole journal again."""


class LiveCache:
    """Suspended executions by program key, bounded by count, by total bytes (heap and journal)
    and by idle time. Evicting only means the next resume replays, which is always correct."""

    def __init__(self, size: int, idle_s: float, max_bytes: int = 256 * 2**20) -> None:
        self.size = size
        self.idle_s = idle_s
        self.max_bytes = max_bytes
        self.bytes = 0
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._seen: weakref.WeakKeyDictionary[_v8.Execution, tuple[int, int, bool]] = weakref.WeakKeyDictionary()
        """Per execution: (suspensions since its heap was measured, the bytes measured, whether a
        measure is due): kept across the takes and puts of its resumes."""
        self.hits = 0
        self.misses = 0
        self.measures = 0
        """Heap measures taken (each one mini-racer's `heap_stats()`)."""

    def take(self, key: str, journal: list[Any]) -> Taken | None:
        """The cached execution if `journal` is its journal plus answers to all its pending calls."""
        live = self._pop(key)
        if live is None:
            self.misses += 1
            return None
        consumed = len(live.journal)
        if not self._resumable(live, len(journal)) or journal[:consumed] != live.journal:
            live.execution.close()  # another state of the same program: replay decides
            self.misses += 1
            return None
        self.hits += 1
        return Taken(live.execution, journal[consumed:], journal, (consumed, live.digest, live.text))

    def take_tail(self, key: str, prefix: int, digest: str, tail: list[Any]) -> Taken | None:
        """The cached execution, with its journal extended by `tail`, if the execution has
        consumed exactly `prefix` entries whose digest is `digest` and `tail` answers all its
        pending calls. Otherwise None, and the cache is left as it was (the full request decides)."""
        live = self._live.get(key)
        if live is None or len(live.journal) != prefix or live.digest != digest:
            return None
        if not self._resumable(live, prefix + len(tail)):
            return None
        self._pop(key)
        self.hits += 1
        live.journal.extend(tail)  # no longer cached: its list is the resumed journal
        return Taken(live.execution, tail, live.journal, (prefix, live.digest, live.text))

    @staticmethod
    def _resumable(live: _Live, entries: int) -> bool:
        outcome = live.execution.outcome
        return isinstance(outcome, Suspended) and entries == outcome.calls

    def _pop(self, key: str) -> _Live | None:
        live = self._live.pop(key, None)
        if live is not None:
            self.bytes -= live.bytes
        return live

    def put(
        self, key: str, execution: _v8.Execution, journal: list[Any], known: tuple[int, str, int] | None = None
    ) -> list[_v8.Execution]:
        """Keep a suspended execution; returns the executions evicted to make room. With `known`
        (a prefix of `journal`: its length, digest and size, as `Taken.known` gives them) only
        the entries past it are digested; without it, the whole journal is."""
        if self.size <= 0:
            return [execution]
        evicted = []
        old = self._pop(key)
        if old is not None:
            evicted.append(old.execution)
        if known is None:
            digest, text = digest_and_size(journal)
        else:
            consumed, digest, text = known
            digest, text = extend_digest(digest, text, journal[consumed:])
        count, heap, waiting = self._seen.get(execution, (-1, 0, False))
        due = waiting or count < 0 or heap > _SMALL_HEAP or count + 1 >= _MEASURE_EVERY
        self._seen[execution] = (count + 1, heap, due)
        live = _Live(execution, journal, digest, time.monotonic(), heap, text, due)
        self._live[key] = live
        self.bytes += live.bytes
        if sum(v.headroom for v in self._live.values()) + self.bytes > self.max_bytes:
            for pending in [v for v in self._live.values() if v.due]:
                self._measure(pending)
        return evicted + self._evict()

    @property
    def due(self) -> bool:
        """Whether a program waits for its heap to be measured."""
        return any(v.due for v in self._live.values())

    def measure_one(self) -> list[_v8.Execution]:
        """Measure the heap of the oldest program that waits for it (the worker is idle); returns
        the executions evicted if the cache is then past its bound."""
        for live in self._live.values():
            if live.due:
                self._measure(live)
                return self._evict()
        return []

    def _measure(self, live: _Live) -> None:
        self.bytes -= live.bytes
        live.heap = live.execution.context.heap_in_use()
        live.due = False
        self.bytes += live.bytes
        self._seen[live.execution] = (0, live.heap, False)
        self.measures += 1

    def _evict(self) -> list[_v8.Execution]:
        evicted = []
        while self._live and (len(self._live) > self.size or self.bytes > self.max_bytes):
            gone = self._live.popitem(last=False)[1]
            self.bytes -= gone.bytes
            evicted.append(gone.execution)
        return evicted

    def expired(self) -> list[_v8.Execution]:
        limit = time.monotonic() - self.idle_s
        gone = [self._live.pop(k) for k, v in list(self._live.items()) if v.used < limit]
        self.bytes -= sum(live.bytes for live in gone)
        return [live.execution for live in gone]

    def __len__(self) -> int:
        return len(self._live)

    def drain(self) -> list[_v8.Execution]:
        """Every live execution, forgotten (their next resumes replay)."""
        gone = [live.execution for live in self._live.values()]
        self._live.clear()
        self.bytes = 0
        return gone
