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

SPARE = 1024
"""At most this many spare threads at once (a thread each, for the requests waiting for a turn,
each for at most the pool's wait); past it, a waiting thread is one of the `size` again."""


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
    waits (`lent`). (Built on `ThreadPoolExecutor`, which asyncio's default executor must be: the
    spares are its `_max_workers` raised and a thread started for work already queued.)"""

    def __init__(self, size: int, thread_name_prefix: str = "ptc-emulator-worker", spare: int = SPARE) -> None:
        ref = weakref.ref(self)
        super().__init__(
            max_workers=size,
            thread_name_prefix=thread_name_prefix,
            initializer=waiting.belong,
            initargs=(functools.partial(_lend_of, ref),),
        )
        self.spare = spare
        self.lending = 0
        """How many of its threads wait now, each with a spare lent."""

    @contextmanager
    def lent(self) -> Iterator[None]:
        with self._shutdown_lock:
            lend = self.lending < self.spare and not self._shutdown
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
