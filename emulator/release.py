"""A large request's items freed in a worker thread, a slice at a time (issue 38).

When a 200,000-item create has been answered, its validated items (200,000 models and their
200,000 field sets) are freed by the last reference to go, on the event loop, as the handler's
frames end: one C call chain of 40-150 ms in which no other client is answered. `release(items)`
takes a list copy of them before that: the loop's references then go in a few milliseconds (each
item only loses a reference), and a worker thread, once its copy is all that holds them, drops
them `SLICE` at a time, letting the other threads run between two slices.

Nothing depends on when an item is freed: the copy holds the items a little longer, no more than
`WAIT_S` past the request's end, then lets go of what others still hold (the replayed bodies'
cache keeps the items of a body it can hold, a stream's generator its request's: their last
holder frees them, as before). One thread does it for every request.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import weakref
from typing import Any

from pydantic import BaseModel

__all__ = ["LARGE", "SLICE", "WAIT_S", "dismantle", "release"]

LARGE = 10_000
"""A list of fewer items is left to its last holder (a few milliseconds at most)."""
SLICE = 1_000
"""Items dropped in one go: well under a millisecond."""
WAIT_S = 5.0
"""How long the thread waits for the request's other holders to let go of the items."""
_POLL_S = 0.005

_pending: queue.SimpleQueue[list[Any]] = queue.SimpleQueue()
_WHOLE = object()
"""First in a kept list that `dismantle` made: the one value after it is taken apart, not sliced."""
_started = threading.Lock()
_thread: threading.Thread | None = None


def release(items: Any) -> None:
    """Have `items` (a long list or tuple) freed off the event loop once the request lets go."""
    if not isinstance(items, list | tuple) or len(items) < LARGE:
        return
    _queue(list(items))


def dismantle(value: Any) -> None:
    """Have `value` (a large request's body: a model, a dict, a list) freed off the event loop once
    the request lets go, a container at a time: what nothing else holds is taken apart from the
    top, each array and object emptied after its values are taken (`_take_apart`), so no free is
    one long C call. A body holding millions of small nested arrays (a tool schema's `default` of
    7,600,000 empty lists, refused later for its size) was freed in one call chain of some 0.3 s as
    the request's frames ended on the event loop. What others still hold is only let go of."""
    _queue([_WHOLE, value])


def _queue(kept: list[Any]) -> None:
    global _thread
    _pending.put(kept)
    with _started:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_drain, name="ptc-emulator-release", daemon=True)
            _thread.start()


def _alone(kept: list[Any]) -> bool:
    """Whether the copy seems to hold the items alone: a few of them, spread over the list, have
    no other reference (the list's, and `getrefcount`'s argument)."""
    step = max(1, len(kept) // 8)
    return all(sys.getrefcount(kept[i]) <= 2 for i in range(0, len(kept), step))


def _drain() -> None:
    waiting: list[tuple[float, list[Any]]] = []
    while True:
        try:
            kept = _pending.get(timeout=_POLL_S) if waiting else _pending.get()
            waiting.append((time.monotonic() + WAIT_S, kept))
            del kept
        except queue.Empty:
            pass
        now = time.monotonic()
        still: list[tuple[float, list[Any]]] = []
        for deadline, kept in waiting:
            if kept and kept[0] is _WHOLE:
                if sys.getrefcount(kept[1]) <= 2:  # the list's, and `getrefcount`'s argument
                    _take_apart(kept)
                elif now < deadline:
                    still.append((deadline, kept))
            elif _alone(kept):
                while kept:
                    del kept[-SLICE:]
                    time.sleep(0)  # the other threads run (the event loop among them)
            elif now < deadline:
                still.append((deadline, kept))
            # else: others hold the items still (a cache, a stream): let go, they free them later
        waiting = still
        del kept


def _take_apart(kept: list[Any]) -> None:
    """Free `kept[1]` (held by `kept` alone) a container at a time: an array, an object or a model
    that nothing else holds has its values taken onto a stack, then is emptied (freeing it alone);
    one that others hold too is only let go of, and so is anything else (a string, a number, a
    tuple). `SLICE` containers between two pauses."""
    stack: list[Any] = [kept.pop()]
    kept.clear()
    done = 0
    while stack:
        node = stack.pop()
        if sys.getrefcount(node) <= 2:  # `node`, and `getrefcount`'s argument: no one else's
            if type(node) is list:
                stack.extend(node)
                node.clear()
            elif type(node) is dict:
                stack.extend(node.values())
                node.clear()
            elif isinstance(node, BaseModel) and not weakref.getweakrefcount(node):
                stack.extend(node.__dict__.values())
                stack.append(getattr(node, "__pydantic_extra__", None))
                node.__dict__.clear()
        del node
        done += 1
        if done % SLICE == 0:
            time.sleep(0)  # the other threads run (the event loop among them)
