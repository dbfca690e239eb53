"""A reply's JSON bytes, a long one made a piece at a time in a worker thread (issue 38).

`JSONResponse` encodes its content on the event loop in one C call, holding every other client
for as long as it lasts: a 7 MB reply (a hosted `mcp` tool's listing of 1,550 tools) 20-40 ms.
`render(value)` makes exactly `JSONResponse`'s bytes (`json.dumps` with `ensure_ascii=False`,
`allow_nan=False`, compact separators, UTF-8), but a piece at a time, letting the other threads
run between two pieces (`jsonpieces.between`), so that made in a worker thread it never holds
the loop long. `long(value)` tells, at a bounded cost, whether a value is worth that hop.

It is cut by the sandbox's walk (`sandbox/_pieces.py`, `json_pieces`: an object a member at a
time, a long string a slice at a time, each piece one C call of about `PIECE_CHARS` characters),
with this module's limits: a short array (`SHORT` values or fewer) a value at a time, a longer
one a run of values at a time, the run's length fitted to the text the last run made (starting
at `SHORT`); down to `DEPTH` levels, and for at most `VISITS` values cut by hand: past that,
values are one call each. Anything else (a number, `None`, an object with other keys, a value of
another type) is one `json.dumps` call, with its own errors (a NaN, a type JSON has no form for),
as before.
"""

from __future__ import annotations

import json
from typing import Any

from ptc_emulator.emulator.jsonpieces import between
from ptc_emulator.sandbox import JSON_PIECE_CHARS as PIECE_CHARS
from ptc_emulator.sandbox import json_pieces

__all__ = ["DEPTH", "LONG_CHARS", "PIECE_CHARS", "SHORT", "SMALL_CHARS", "VISITS", "long", "render", "texts"]

SHORT = 16
"""An array of this many values or fewer is written a value at a time."""
DEPTH = 8
"""Levels cut by hand; below them a value is one call."""
VISITS = 20_000
"""Values cut by hand in one reply at most: past that, the rest is written a value at a time."""
LONG_CHARS = 64 * 1024
"""A reply of about this many characters or more is `long`: written in a worker thread."""
SMALL_CHARS = 16 * 1024
"""A value of about this many characters or fewer is one `json.dumps` call: a few microseconds,
where cutting it by hand costs a call for each of its values (every journal entry is one)."""
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

    def dump(part: Any) -> str:
        return json.dumps(part, ensure_ascii=ensure_ascii, allow_nan=allow_nan, separators=separators)

    if not long(value, SMALL_CHARS):  # one short C call: cutting it by hand would cost more
        return [dump(value)]
    return json_pieces(
        value, dump, separators=separators, depth=DEPTH, short=SHORT, fit=True, visits=VISITS, pause=between
    )


def long(value: Any, limit: int = LONG_CHARS) -> bool:
    """Whether `value`'s JSON text is about `limit` characters or more: its strings' lengths, its
    integers' digits and other values counted, at most `_WALK` values looked at (a reply with more is long)."""
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
        elif kind is int:
            # Its digits, from its bits (no text made): an integer of thousands of digits is slow to
            # write (quadratic), and 1,900 of them held the loop 1-2 s when each counted as 8.
            chars += 2 + (item.bit_length() * 77 >> 8)
        else:
            chars += 8
        if chars >= limit:
            return True
    return False
