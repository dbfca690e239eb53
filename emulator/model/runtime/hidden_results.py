"""The hidden call results kept in the process: what a retried request finds instead of calling again.

A program's hidden calls (an MCP server's tools, a hosted code interpreter or shell) are answered
by the emulator; their results travel in the sealed results of the response that paused
after them. A request retried before its response reached the client has no such results: within
one process this cache, keyed by the program and the call, keeps it from calling the server twice.

It is bounded by entries and by bytes (the results' arguments and output as UTF-8), the oldest
going first, and `POST /_emulator/reset` empties it (docs/limits.md, "MCP").
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ptc_emulator.emulator.caches import Cache
from ptc_emulator.sandbox import ToolResult

__all__ = ["HiddenResults"]


def _size(result: ToolResult) -> int:
    return len(result.output.encode()) + len(result.arguments.encode()) + len(result.name.encode())


class HiddenResults(Cache):
    """Hidden call results by key, bounded by `entries` and `max_bytes`."""

    def __init__(self, entries: int = 10_000, max_bytes: int = 64 * 2**20) -> None:
        self._results: OrderedDict[str, tuple[ToolResult, int]] = OrderedDict()
        self._entries = entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> tuple[int, int]:
        """(entries, bytes) held."""
        return len(self._results), self._bytes

    def get(self, key: str) -> ToolResult | None:
        found = self._results.get(key)
        return found[0] if found is not None else None

    def put(self, key: str, result: ToolResult) -> None:
        size = _size(result)
        with self._lock:
            old = self._results.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self._max_bytes or self._entries <= 0:
                return  # larger than the whole cache: a retry calls again
            self._results[key] = (result, size)
            self._bytes += size
            while len(self._results) > self._entries or self._bytes > self._max_bytes:
                _, (_, dropped) = self._results.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._results.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._results)
