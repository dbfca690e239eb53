"""The garbage collector's full passes held off while a large request is worked on (issue 38).

A large request (a 16 MiB body: 200,000 input items, a 14 MB tool output) is parsed, validated
and finished in worker threads, so the event loop gets the interpreter back every switch interval
(5 ms). But while a worker builds its millions of objects, CPython's allocation count starts
collections, and every so often a full one (generation 2), which walks every tracked object of
the process, all of the request's own included, holding the interpreter the whole time: 0.2-0.75 s
in which no other client is answered, and which frees nothing (the objects are alive).

`held_off()` is held around such a request (`LARGE_BYTES` or more of body, counted as it arrives,
and a large WebSocket create). While one or more are held, generation 2's threshold is raised
out of reach: the young generations are still collected (each pass walks at most some thousand
objects, well under a millisecond), so a cycle made and dropped meanwhile is still freed, and
objects that survive are left in generation 2, unexamined, until the last holder lets go and the
threshold comes back. The next full pass then walks a heap from which the request's objects are
gone. Nothing is lost: a cycle the young passes could not see is freed by that next full pass.

Bounds: the hold is process-wide and counted (`_Hold`), so overlapping requests share one; it ends
at the last release whatever ended the request (an answer, a 400, a disconnect, a cancellation),
since it is a context manager. One long request, or requests that overlap without end, would keep
full passes away for good, so one hold lasts at most `MAX_HELD_S` (checked as young passes start):
after that the threshold is restored even with holders left, and a new hold starts only once they
are all gone. The memory a hold can keep is
bounded by what the requests themselves may hold (`--max-body-bytes` each).

The server's own long-lived objects (modules, models, schemas) are out of the full passes' sight
for good: `serve` freezes them once started (`api.cli.settle_heap`).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import threading
import time
from collections.abc import Iterator

__all__ = ["LARGE_BYTES", "MAX_HELD_S", "held", "held_off", "hold_for_request", "request"]

LARGE_BYTES = 256 * 2**10
"""A request whose body is this long or longer holds full collections off. A smaller one makes
at most some 50,000 objects, which a full pass walks in a few milliseconds."""

MAX_HELD_S = 30.0
"""The longest one hold keeps full collections away, however many requests overlap."""

_OUT_OF_REACH = 2**30
"""Generation 2's threshold while held: the young passes never reach it."""


class _Hold:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.saved: int | None = None
        """Generation 2's threshold before the hold (None: not raised now)."""
        self.since = 0.0
        self.expired = False

    def enter(self) -> None:
        with self.lock:
            self.holders += 1
            if self.holders == 1:
                self.since = time.monotonic()
                self.expired = False
                self._raise()

    def leave(self) -> None:
        with self.lock:
            self.holders -= 1
            if self.holders == 0:
                self._restore()
                with contextlib.suppress(ValueError):  # (not from `_watch`: CPython walks the list by index)
                    gc.callbacks.remove(self._watch)

    def _raise(self) -> None:
        first, second, third = gc.get_threshold()
        self.saved = third
        gc.set_threshold(first, second, _OUT_OF_REACH)
        gc.callbacks.append(self._watch)

    def _watch(self, phase: str, info: dict[str, int]) -> None:
        """A young pass's start: a hold older than `MAX_HELD_S` ends here, even with holders
        left (one long request, or requests that overlap without end)."""
        if phase != "start" or time.monotonic() - self.since <= MAX_HELD_S:
            return
        if self.lock.acquire(blocking=False):  # (this thread may be inside `enter`: never wait)
            try:
                if self.saved is not None and not self.expired:
                    self._expire()
            finally:
                self.lock.release()

    def _expire(self) -> None:
        self.expired = True
        self._restore()

    def _restore(self) -> None:
        if self.saved is not None:
            first, second, _ = gc.get_threshold()
            gc.set_threshold(first, second, self.saved)
            self.saved = None

    def held(self) -> bool:
        with self.lock:
            return self.saved is not None


_hold = _Hold()


@contextlib.contextmanager
def held_off() -> Iterator[None]:
    """Full collections held off while this is held (see the module)."""
    _hold.enter()
    try:
        yield
    finally:
        _hold.leave()


def held() -> bool:
    """Whether full collections are held off now."""
    return _hold.held()


class _Request:
    """One request's claim on the hold: taken at most once, by whatever thread finds the request
    large (`hold_for_request`), and given back when the request ends, never after."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = True
        self.holding = False

    def hold(self) -> None:
        with self.lock:
            if self.open and not self.holding:
                self.holding = True
                _hold.enter()

    def close(self) -> None:
        with self.lock:
            self.open = False
            if self.holding:
                self.holding = False
                _hold.leave()


_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("collector_request", default=None)


@contextlib.contextmanager
def request() -> Iterator[None]:
    """Around one HTTP request: once something in it finds it large (`hold_for_request`: a body of
    `LARGE_BYTES`, a long stored record read back), full collections are held off until it has
    been answered, however it ends. Worker threads it starts with `asyncio.to_thread` see it (they
    run in a copy of its context); a task it leaves behind (a background response) finds it closed."""
    claim = _Request()
    token = _request.set(claim)
    try:
        yield
    finally:
        _request.reset(token)
        claim.close()


def hold_for_request() -> None:
    """Full collections held off for the rest of the current request (`request`), if there is one:
    it reads or makes as many objects as a large body (a stored response of 200,000 items read
    back started five to ten full passes of 0.1-1.5 s each, on every read)."""
    claim = _request.get()
    if claim is not None:
        claim.hold()
