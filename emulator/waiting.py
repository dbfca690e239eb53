"""A worker thread about to wait on something other requests do not need (its part's turn of the
database's connections, `pgpool.Lane`) says so (`waiting()`), and the pool of threads it belongs
to (`api.workers.Workers`, the event loop's default executor) starts a spare thread meanwhile, so
the others' work never queues behind threads that wait: more requests waiting on one locked table
than the server has worker threads took every thread, and requests on the other parts waited for
one until the lock went. A thread of no such pool waits as it is. A pool that has lent every spare
it may (`api.workers.SPARE`) refuses the wait (`NoSpare`): the waiter gives up at once rather than
hold one of the threads the others' work runs in."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["NoSpare", "belong", "waiting"]

_here = threading.local()


class NoSpare(Exception):
    """Raised by `waiting()` in a thread whose pool has every spare it may lend lent already: a
    wait here would hold one of the pool's own threads, so the caller does not wait."""


def belong(lend: Callable[[], AbstractContextManager[None]]) -> None:
    """Run by each thread of a pool as it starts: how it tells that pool it waits."""
    _here.lend = lend


def waiting() -> AbstractContextManager[None]:
    """Around a wait of this thread: its pool lends a spare thread for that long (`NoSpare` as it
    is entered when the pool has none left to lend)."""
    lend: Callable[[], AbstractContextManager[None]] | None = getattr(_here, "lend", None)
    return lend() if lend is not None else contextlib.nullcontext()
