"""A reply's JSON bytes, a long one made a piece at a time in a worker thread (issue 38).

`JSONResponse` encodes its content on the event loop in one C call, holding every other client
for as long as it lasts: a 7 MB reply (a hosted `mcp` tool's listing of 1,550 tools) 20-40 ms.
`render(value)` makes exactly `JSONResponse`'s bytes (`json.dumps` with `ensure_ascii=False`,
`allow_nan=False`, compact separators, UTF-8), but a piece at a time, letting the other threads
run between two pieces (`jsonpieces.between`), so that made in a worker thread it never holds
the loop long. `long(value)` tells, at a bounded cost, whether a value is worth that hop.

How it is cut, so that each piece is one C call of about `PIECE_CHARS` characters at most:

* an object (its keys all strings) is written a member at a time, its values cut the same way;
* a short array (`SHORT` values or fewer) a value at a time, cut the same way;
* a longer array a run of values at a time, the run's length fitted to the text the last run
  made (starting at `SHORT`);
* a long string a slice at a time (JSON escapes each character on its own: the slices' texts
  joined are the string's text);

down to `DEPTH` levels, and for at most `VISITS` values cut by hand: past that, values are one
call each. Anything else (a number, `None`, an object with other keys, a value of another type)
is one `json.dumps` call, with its own errors (a NaN, a type JSON has no form for), as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.jsonpieces import between

__all__ = ["DEPTH", "LONG_CHARS", "PIECE_CHARS", "SHORT", "VISITS", "long", "render", "texts"]

PIECE_CHARS = 256 * 1024
"""About the most text one piece makes (a millisecond of encoding or so)."""
SHORT = 16
"""An array of this many values or fewer is written a value at a time."""
DEPTH = 8
"""Levels cut by hand; below them a value is one call."""
VISITS = 20_000
"""Values cut by hand in one reply at most: past that, the rest is written a value at a time."""
LONG_CHARS = 64 * 1024
"""A reply of about this many characters or more is `long`: written in a worker thread."""
_WALK = 2_000
"""Values `long` looks at before it calls a reply long whatever their text."""


def render(value: Any) -> bytes:
    """`JSONResponse(value).body`, made a piece at a time (see the module)."""
    return b"".join(text.encode("utf-8") for text in texts(value, ensure_ascii=False, allow_nan=False))


def texts(
    value: Any, *, ensure_ascii: bool = True, allow_nan: bool = True, separators: tuple[str, str] = (",", ":")
) -> list[str]:
    """`json.dumps(value, ensure_ascii=..., allow_nan=..., separators=...)` as pieces of about
    `PIECE_CHARS` characters (joined, they are its text), made a piece at a time: the other
    threads run between two. The errors are `json.dumps`'s own, from the same value."""
    comma, colon = separators

    def dumps(part: Any) -> str:
        return json.dumps(part, ensure_ascii=ensure_ascii, allow_nan=allow_nan, separators=separators)

    writer = _Writer(dumps, comma, colon)
    writer.put(value, 0)
    return writer.done()


class _Writer:
    def __init__(self, dumps: Callable[[Any], str], comma: str, colon: str) -> None:
        self.dumps = dumps
        self.comma = comma
        self.colon = colon
        self.pending: list[str] = []
        self.size = 0
        self.chunks: list[str] = []
        self.visits = 0

    def add(self, text: str) -> None:
        self.pending.append(text)
        self.size += len(text)
        if self.size >= PIECE_CHARS:
            self.flush()
            between()

    def flush(self) -> None:
        if self.pending:
            self.chunks.append("".join(self.pending))
            self.pending.clear()
            self.size = 0

    def done(self) -> list[str]:
        self.flush()
        return self.chunks

    def put(self, value: Any, depth: int) -> None:
        _dumps, comma = self.dumps, self.comma
        kind = type(value)
        if depth >= DEPTH or self.visits >= VISITS:
            self.add(_dumps(value))
            return
        if kind is str:
            if len(value) <= PIECE_CHARS:
                self.add(_dumps(value))
                return
            self.add('"')
            for start in range(0, len(value), PIECE_CHARS):
                self.add(_dumps(value[start : start + PIECE_CHARS])[1:-1])
            self.add('"')
            return
        if kind is dict and value and all(type(key) is str for key in value):
            self.visits += 1
            mark = "{"
            for key, item in value.items():
                self.add(mark + _dumps(key) + self.colon)
                self.put(item, depth + 1)
                mark = comma
            self.add("}")
            return
        if (kind is list or kind is tuple) and value:
            self.visits += 1
            if len(value) <= SHORT:
                mark = "["
                for item in value:
                    self.add(mark)
                    self.put(item, depth + 1)
                    mark = comma
                self.add("]")
                return
            self.add("[")
            run, start = SHORT, 0
            while start < len(value):
                text = _dumps(value[start : start + run])[1:-1]
                self.add((comma if start else "") + text)
                start += run
                run = max(1, min(1000, run * PIECE_CHARS // max(1, len(text))))
            self.add("]")
            return
        self.add(_dumps(value))


def long(value: Any, limit: int = LONG_CHARS) -> bool:
    """Whether `value`'s JSON text is about `limit` characters or more: its strings' lengths and
    values counted, at most `_WALK` values looked at (a reply with more is long)."""
    seen = 0
    chars = 0
    stack = [value]
    while stack:
        item = stack.pop()
        seen += 1
        if seen > _WALK:
            return True
        kind = type(item)
        if kind is str:
            chars += len(item) + 2
        elif kind is dict:
            if len(item) > _WALK:
                return True
            stack.extend(item.values())
            chars += 2 + sum(len(key) + 4 if type(key) is str else 8 for key in item)
        elif kind is list or kind is tuple:
            if len(item) > _WALK:
                return True
            stack.extend(item)
            chars += 2 + len(item)
        else:
            chars += 8
        if chars >= limit:
            return True
    return False
