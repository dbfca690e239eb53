"""The worker threads that read and check what a client adds: a scenario (`POST
/_emulator/scenarios`, `--watch`'s files), a hosted script (`PUT /_emulator/hosted`).

Reading one is Python that holds the interpreter for up to its own bounds (the templates'
constant expressions are folded for up to 0.5 s, YAML read, patterns compiled), so a worker
thread does not free the event loop of it: it only takes turns with it. Run on the shared worker
threads, 12 or 24 adds sent at once, each folding up to its bound, filled them all (every other
client's work waited behind them: `/_emulator/health` held 0.85 s, a small request 1.3 s). On
these `CHECK_THREADS` threads of their own, adds queue behind each other, and the shared worker
threads stay free for the requests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["CHECK_THREADS", "checked"]

CHECK_THREADS = 2
"""Threads reading and checking what clients add, together: the adds past them wait their turn."""

P = ParamSpec("P")
T = TypeVar("T")

_threads: concurrent.futures.ThreadPoolExecutor | None = None
_made = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _threads
    with _made:
        if _threads is None:
            _threads = concurrent.futures.ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="ptc-emulator-checks")
        return _threads


async def checked(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)` on the checking threads (in the caller's context, as
    `asyncio.to_thread` runs it), awaited."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)
