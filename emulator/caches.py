"""Every cache of the process and of an app, for one `clear()`: `POST /_emulator/reset`.

A cache only saves work (or, the prompt cache, emulates the hosted one's bookkeeping): clearing it
changes no answer, the next request that needs an entry does the work again. Each has one owner
(the module or object that makes and uses it), one bound (set where it is made; the table is
docs/limits.md's "Memory") and one `clear()`. Owners register what they hold:

    PROCESS          the caches a module keeps for the whole process (token counts, compiled
                     patterns, templates and grammars, schema verdicts, the programs' keys), each
                     added when its module is imported
    Caches()         an app's: made with the app, it holds `PROCESS` and every cache of the app's
                     parts (the engine's, the signer's, the sandbox's live programs)

so reset is `await caches.clear()`, one call. `tests/usage/test_reset_frees_caches.py` fails if a
cache is held that no registry names, or if one holds anything after a reset.

A class whose instances are caches derives from `Cache` (so the test can find every instance
alive); a function memoised with `functools.lru_cache` is registered as a `Memo`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from ptc_emulator.sandbox import MEMOS as SANDBOX_MEMOS

__all__ = ["PROCESS", "Cache", "Caches", "Memo", "Weighed"]


class Cache(ABC):
    """A bounded store of work saved, with one owner and one `clear()`."""

    @abstractmethod
    def clear(self) -> None:
        """Forget every entry."""

    @abstractmethod
    def __len__(self) -> int:
        """Entries held."""


class Memo(Cache):
    """A function memoised with `functools.lru_cache` (its `maxsize` is its bound)."""

    def __init__(self, function: Any) -> None:
        self.function = function
        assert function.cache_info().maxsize is not None, "a memo is bounded"

    def clear(self) -> None:
        self.function.cache_clear()

    def __len__(self) -> int:
        return int(self.function.cache_info().currsize)


class Weighed(Cache):
    """A least-recently-used cache bounded by the total weight of what it holds (an estimate of
    each entry's memory, given when it is put), not by a count: entries of very different sizes
    (compiled templates: a few KB to megabytes) share one bound. An entry heavier than the whole
    bound is not kept."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.weight = 0
        """The total weight held."""
        self._entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: Any, value: Any, weight: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            if weight > self.bound:
                return
            self._entries[key] = (value, weight)
            self.weight += weight
            while self.weight > self.bound:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.weight -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.weight = 0

    def __len__(self) -> int:
        return len(self._entries)


class _Async(Cache):
    """A cache cleared by awaiting (the sandbox's live programs: their workers are told)."""

    def __init__(self, clear: Callable[[], Awaitable[object]], size: Callable[[], int]) -> None:
        self.aclear = clear
        self._size = size

    def clear(self) -> None:
        raise TypeError("cleared by awaiting `Caches.clear()`")

    def __len__(self) -> int:
        return self._size()


C = TypeVar("C", bound=Cache)


class Caches:
    """A registry of caches by name (and the registries it holds, cleared with it)."""

    def __init__(self, *within: Caches) -> None:
        self._within = within
        self._caches: dict[str, Cache] = {}
        self._lock = threading.Lock()

    def add(self, name: str, cache: C) -> C:
        """Register `cache` under `name` (unique in this registry); returns it."""
        with self._lock:
            assert self._caches.get(name, cache) is cache, f"two caches named {name!r}"
            self._caches[name] = cache
        return cache

    def add_async(self, name: str, clear: Callable[[], Awaitable[object]], size: Callable[[], int]) -> None:
        """Register a cache cleared by awaiting `clear()`, holding `size()` entries."""
        self.add(name, _Async(clear, size))

    def __iter__(self) -> Iterator[tuple[str, Cache]]:
        for registry in self._within:
            yield from registry
        with self._lock:
            mine = list(self._caches.items())
        yield from mine

    def __contains__(self, cache: object) -> bool:
        return any(found is cache for _, found in self)

    async def clear(self) -> None:
        """Clear every cache this registry names (and those it holds)."""
        for _, cache in self:
            if isinstance(cache, _Async):
                await cache.aclear()
            else:
                cache.clear()

    def sizes(self) -> dict[str, int]:
        """Entries each cache holds, by name."""
        return {name: len(cache) for name, cache in self}


PROCESS = Caches()
"""The caches modules keep for the whole process, each added by its module when imported."""
for _name, _memo in SANDBOX_MEMOS.items():  # the sandbox imports nothing of the engine: its memos are named here
    PROCESS.add(_name, Memo(_memo))
