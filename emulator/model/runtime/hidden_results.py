"""The hidden call results kept in the process: what a retried request finds instead of calling again.

A program's hidden calls (an MCP server's tools, a hosted code interpreter or shell) are answered
by the emulator; their results travel in the sealed results of the response that paused
after them. A request retried before its response reached the client has no such results: within
one process this cache, keyed by the program and the call, keeps it from calling the server twice.

It is bounded by entries and by bytes (the results' arguments and output as UTF-8), and shared
fairly by scope (the request's client): past a bound the oldest entry of the scope holding the
most goes first, so one scope's many or large results evict its own, never the entries of a scope
holding less; and `POST /_emulator/reset` empties it (docs/limits.md, "MCP").

The same continuation sent several times at once (a client retrying before its first answer, or
racing requests of which all but one end as 400s) finds no result kept yet: `once` has them share
the one call in flight for a key (single flight), whose result is kept before any of them reads it.
A waiter that leaves (its request cancelled, its client gone, its program out of time) does not
end the call, even the last one: a call that may have reached the server is never made twice, so
it runs to its end, bounded by its own deadline (the MCP call's), and its result is kept for the
retry, which joins the flight or finds the result. In flight are at most as many calls as the memo keeps
entries (past that, each request makes its own). Other processes' (replicas') requests are not
seen: each may make the call once (docs/tools-hosted.md).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ptc_emulator.emulator.caches import Cache
from ptc_emulator.sandbox import ToolResult

__all__ = ["HiddenResults"]

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    task: asyncio.Task[T]
    waiters: int = 0


def _size(result: ToolResult) -> int:
    return len(result.output.encode()) + len(result.arguments.encode()) + len(result.name.encode())


class HiddenResults(Cache):
    """Hidden call results by key, bounded by `entries` and `max_bytes`, shared fairly by scope."""

    def __init__(self, entries: int = 10_000, max_bytes: int = 64 * 2**20) -> None:
        self._results: dict[str, tuple[ToolResult, int, str]] = {}
        """By key: the result, its size, and the scope that keeps it."""
        self._scopes: dict[str, OrderedDict[str, int]] = {}
        """By scope: its keys, oldest first, each with its size."""
        self._scope_bytes: dict[str, int] = {}
        self._entries = entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight[Any]] = {}
        """The calls in flight by key, each shared by the requests waiting on it (`once`)."""

    @property
    def size(self) -> tuple[int, int]:
        """(entries, bytes) held."""
        return len(self._results), self._bytes

    def get(self, key: str) -> ToolResult | None:
        found = self._results.get(key)
        return found[0] if found is not None else None

    def put(self, key: str, result: ToolResult, scope: str = "") -> None:
        """Keep `result` under `key` for `scope` (the request's). Past a bound, the oldest entry of
        the scope holding the most (bytes, when the bytes are past theirs; else entries) goes first:
        one scope's many or large results evict its own before any of another scope that holds
        less, so a scope holding no more than its share of the room is not evicted by another's."""
        size = _size(result)
        with self._lock:
            self._drop(key)
            if size > self._max_bytes or self._entries <= 0:
                return  # larger than the whole cache: a retry calls again
            self._results[key] = (result, size, scope)
            self._scopes.setdefault(scope, OrderedDict())[key] = size
            self._scope_bytes[scope] = self._scope_bytes.get(scope, 0) + size
            self._bytes += size
            while self._bytes > self._max_bytes:
                self._evict(max(self._scope_bytes, key=self._scope_bytes.__getitem__))
            while len(self._results) > self._entries:
                self._evict(max(self._scopes, key=lambda name: len(self._scopes[name])))

    def _evict(self, scope: str) -> None:
        oldest = next(iter(self._scopes[scope]))
        self._drop(oldest)

    def _drop(self, key: str) -> None:
        found = self._results.pop(key, None)
        if found is None:
            return
        _, size, scope = found
        self._bytes -= size
        keys = self._scopes[scope]
        del keys[key]
        self._scope_bytes[scope] -= size
        if not keys:
            del self._scopes[scope], self._scope_bytes[scope]

    @property
    def in_flight(self) -> int:
        """Calls in flight that `once` shares."""
        return len(self._flights)

    async def once(
        self, key: str, make: Callable[[], Awaitable[T]], keep: Callable[[T], ToolResult | None], scope: str = ""
    ) -> T:
        """`make()`'s answer, made once for all the requests of this process that ask for `key` while
        it is in flight; `keep(answer)` (when not None) is kept under `key` as soon as it is made.
        A waiter cancelled leaves the call to the others; when none is left the call still runs to
        its end (bounded by its own deadline, `make`'s) and its result is kept for a retry."""
        loop = asyncio.get_running_loop()
        flight = self._flights.get(key)
        if flight is not None and flight.task.get_loop() is not loop:
            return await make()  # another event loop's (a test's second server): not shared
        if flight is None:
            if len(self._flights) >= max(self._entries, 1):
                return await make()  # as many in flight as the memo holds: not shared

            async def run() -> T:
                try:
                    answer = await make()
                    kept = keep(answer)
                    if kept is not None:
                        self.put(key, kept, scope)
                    return answer
                finally:
                    if self._flights.get(key) is flight:
                        del self._flights[key]

            flight = _Flight(loop.create_task(run()))
            flight.task.add_done_callback(_retrieved)
            self._flights[key] = flight
        flight.waiters += 1
        try:
            answer: T = await asyncio.shield(flight.task)
            return answer
        finally:
            # The last waiter leaving does not end the call either: it may have reached the
            # server, and a client that gave up retries; the call ends by its own deadline and
            # its result is kept for that retry.
            flight.waiters -= 1

    def clear(self) -> None:
        """Forget everything kept (not the calls in flight, which end by themselves)."""
        with self._lock:
            self._results.clear()
            self._scopes.clear()
            self._scope_bytes.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._results)


def _retrieved(task: asyncio.Task[object]) -> None:
    """Read a flight's failure, so one nobody waited for any more is not reported as unread."""
    if not task.cancelled():
        task.exception()
