"""A long message's JSON text for the pipe to a worker, made a piece at a time (issue 38).

`json.dumps` is one C call that holds the interpreter for the whole text, in whatever thread it
runs: a 14 MB tool output held the event loop 30-60 ms from the worker thread that encoded it.
`dumps(value)` makes exactly `json.dumps(value, separators=(",", ":"))` (ASCII, NaN allowed),
but a piece of about `PIECE_CHARS` characters at a time, letting the other threads run between two
pieces: an object a member at a time, an array a value at a time (a long one a run of values at a
time), a long string a slice at a time (JSON escapes each code point on its own, so the slices'
texts joined are the string's), down to `DEPTH` levels. Anything else is one `json.dumps` call.

The sandbox imports nothing of the emulator, so this is its own small encoder.
"""

from __future__ import annotations

import json
import time
from typing import Any

__all__ = ["DEPTH", "PIECE_CHARS", "RUN", "dumps"]

PIECE_CHARS = 256 * 1024
"""About the most text one call makes (a millisecond of encoding or so)."""
RUN = 64
"""Values of a long array encoded in one call."""
DEPTH = 6
"""Levels cut by hand; below them a value is one call."""


def between() -> None:
    """Between two pieces: let the other threads run (the event loop among them)."""
    time.sleep(0)


def dumps(value: Any) -> str:
    """`json.dumps(value, separators=(",", ":"))`, made a piece at a time (see the module)."""
    writer = _Writer()
    writer.put(value, 0)
    return "".join(writer.parts)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= PIECE_CHARS:
            self.size = 0
            between()

    def put(self, value: Any, depth: int) -> None:
        kind = type(value)
        if depth >= DEPTH:
            self.add(_dumps(value))
        elif kind is str:
            if len(value) <= PIECE_CHARS:
                self.add(_dumps(value))
                return
            self.add('"')
            for start in range(0, len(value), PIECE_CHARS):
                self.add(_dumps(value[start : start + PIECE_CHARS])[1:-1])
            self.add('"')
        elif kind is dict and value and all(type(key) is str for key in value):
            mark = "{"
            for key, item in value.items():
                self.add(mark + _dumps(key) + ":")
                self.put(item, depth + 1)
                mark = ","
            self.add("}")
        elif (kind is list or kind is tuple) and value:
            if len(value) <= RUN:
                mark = "["
                for item in value:
                    self.add(mark)
                    self.put(item, depth + 1)
                    mark = ","
                self.add("]")
                return
            self.add("[")
            for start in range(0, len(value), RUN):
                self.add(("," if start else "") + _dumps(value[start : start + RUN])[1:-1])
            self.add("]")
        else:
            self.add(_dumps(value))
