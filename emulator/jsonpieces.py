"""JSON text of large stored records, written and read a piece at a time.

One `json.dumps` or `json.loads` call runs in C from start to end and holds the interpreter
throughout, in a worker thread too: a stored response of 200,000 short input items held every
other client (the event loop included) for a few hundred milliseconds per call. `dumps` and
`loads` make and read the same text as `json.dumps` and `json.loads`, a piece at a time, and let
the other threads run between pieces (`between`). The text is byte for byte what `json.dumps`
writes, so what was stored before reads back as it did, and what is stored now reads back with
plain `json.loads`.

`dumps` is the sandbox's walk (`sandbox/_pieces.py`, `json_pieces`, under `jsonreply` too) with
this module's limits: the outer `_OUTER` levels cut by hand (a record's members and values, and an
array in it: a response body's `output`), a long array a run of values at a time (`PIECE` at most,
fitted to about `PIECE_CHARS` of text), a long string a slice at a time. `loads` reads the outer
levels a value at a time, `PIECE` values between two pauses. A value inside those is one call.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ptc_emulator.sandbox import JSON_PIECE_CHARS as PIECE_CHARS
from ptc_emulator.sandbox import json_pieces

__all__ = ["PIECE", "between", "compact_size", "dumps", "loads"]

PIECE = 1000
"""Values of a long array made or read in one call: about a millisecond of work."""
_LONG_TEXT = 256 * 1024
"""A text shorter than this is read in one call (a millisecond or so)."""
_OUTER = 2
"""Levels of arrays made and read a value at a time: a record's, and one directly in a record
that is an object (a response body's `output`)."""

_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner behind `json.loads`: one value from an index, and where it ends."""
_WS = " \t\n\r"


def between() -> None:
    """Between two pieces: let the other threads run (the event loop among them)."""
    time.sleep(0)


def dumps(value: Any, *, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`json.dumps(value, separators=separators)`, made a piece at a time by the sandbox's walk
    (`json_pieces`, the one under `jsonreply` too): the outer `_OUTER` levels cut by hand, a long
    array a run of values at a time (`PIECE` at most, fitted to about `PIECE_CHARS` of text), a
    long string a slice at a time; `between` every `PIECE_CHARS` characters or so."""

    def dump(part: Any) -> str:
        return json.dumps(part, separators=separators)

    return "".join(
        json_pieces(value, dump, separators=separators, depth=_OUTER, short=PIECE, fit=True, pause=lambda: between())
    )


def loads(text: str) -> Any:
    """`json.loads(text)` of text `json.dumps` wrote (a stored record): a long one's outer arrays
    and objects a value at a time, pausing (`between`) every `PIECE` values."""
    if len(text) < _LONG_TEXT:
        return json.loads(text)
    try:
        value, end = _Reader(text).value(_skip(text, 0), 0)
    except (StopIteration, ValueError, IndexError):
        return json.loads(text)  # not the shape read here: as before (and its error, if any)
    if _skip(text, end) != len(text):
        return json.loads(text)
    return value


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.read = 0

    def value(self, i: int, level: int) -> tuple[Any, int]:
        text = self.text
        if not (level == 0 and text[i] in "[{" or level < _OUTER and text[i] == "["):
            value, end = _SCAN(text, i)
            self.read += 1
            if self.read % PIECE == 0:
                between()
            return value, int(end)
        closing = "]" if text[i] == "[" else "}"
        i = _skip(text, i + 1)
        if text[i] == closing:
            return ([] if closing == "]" else {}), i + 1
        if closing == "]":
            values: list[Any] = []
            while True:
                value, i = self.value(i, level + 1)
                values.append(value)
                i = _skip(text, i)
                if text[i] == "]":
                    return values, i + 1
                if text[i] != ",":
                    raise ValueError("not an array")
                i = _skip(text, i + 1)
        members: dict[str, Any] = {}
        while True:
            key, i = _SCAN(text, i)
            if not isinstance(key, str):
                raise ValueError("not a key")
            i = _skip(text, int(i))
            if text[i] != ":":
                raise ValueError("not an object")
            members[key], i = self.value(_skip(text, i + 1), level + 1)
            i = _skip(text, i)
            if text[i] == "}":
                return members, i + 1
            if text[i] != ",":
                raise ValueError("not an object")
            i = _skip(text, i + 1)


def compact_size(value: list[Any]) -> int:
    """`len(json.dumps(value, separators=(",", ":"), default=str))`, `PIECE` values at a time."""
    size = 2  # the brackets
    for start in range(0, len(value), PIECE):
        if start:
            between()
            size += 1  # the comma between two pieces
        size += len(json.dumps(value[start : start + PIECE], separators=(",", ":"), default=str)) - 2
    return size
