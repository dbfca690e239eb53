"""The server's worker threads (`Workers`): the event loop's default executor, which lends a
spare thread for as long as one of its threads waits for its part's turn of the database's
connections (`emulator.waiting`), so waiting holds none of the `size` threads the other requests'
hops run in."""

from __future__ import annotations

import concurrent.futures
import functools
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from ptc_emulator.emulator import waiting

__all__ = ["SPARE", "Workers"]

SPARE = 256
"""At most this many spare threads at once (a thread each, for the requests waiting for a turn,
each for at most the pool's wait). Past it, a request that would wait for its turn does not wait
(`waiting.NoSpare`: the 503 `database_busy` at once), so the `size` threads stay free for the
other parts' requests. A spare, once started, stays (idle) for the process's life: the cap bounds
the threads and memory they keep (docs/scale-out.md)."""


@contextmanager
def _lend_of(ref: weakref.ReferenceType[Workers]) -> Iterator[None]:
    pool = ref()
    if pool is None:
        yield
        return
    with pool.lent():
        yield


class Workers(concurrent.futures.ThreadPoolExecutor):
    """A thread pool of `size` threads running work, plus one spare for each of its threads that
    waits (`lent`), up to `spare` (`SPARE`) at once; past that a wait is refused (`NoSpare`).
    (Built on `ThreadPoolExecutor`, which asyncio's default executor must be: the spares are its
    `_max_workers` raised and a thread started for work already queued.)"""

    def __init__(self, size: int, thread_name_prefix: str = "ptc-emulator-worker", spare: int | None = None) -> None:
        ref = weakref.ref(self)
        super().__init__(
            max_workers=size,
            thread_name_prefix=thread_name_prefix,
            initializer=waiting.belong,
            initargs=(functools.partial(_lend_of, ref),),
        )
        self.spare = SPARE if spare is None else spare
        self.lending = 0
        """How many of its threads wait now, each with a spare lent."""

    @contextmanager
    def lent(self) -> Iterator[None]:
        """A spare lent for the wait around which it is entered; `waiting.NoSpare` when every
        spare is lent already (the wait would hold one of the `size` threads). A pool shutting
        down lends none and lets the thread wait."""
        with self._shutdown_lock:
            if self._shutdown:
                lend = False
            elif self.lending >= self.spare:
                raise waiting.NoSpare(f"all {self.spare} spare threads lent")
            else:
                lend = True
            if lend:
                self.lending += 1
                self._max_workers += 1
                if not self._work_queue.empty():
                    self._adjust_thread_count()  # a thread for the work queued behind this one
        try:
            yield
        finally:
            if lend:
                with self._shutdown_lock:
                    self.lending -= 1
                    self._max_workers -= 1
