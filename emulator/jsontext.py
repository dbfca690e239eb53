"""JSON text from untrusted sources, parsed only once its nesting is known to be bounded.

Python's `json` recurses once per level, so a deep enough text raises `RecursionError` (or, in
a worker, takes the process down) wherever it is parsed. Every parse of text that a client, a
program or a scenario author controls goes through `loads`, which measures the nesting first,
in one linear pass, and refuses a text nested deeper than `MAX_DEPTH` with `TooDeep` (a
`json.JSONDecodeError`, so callers that already handle bad JSON handle it too).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.wire.items import MAX_DEPTH

__all__ = [
    "MAX_DEPTH",
    "TooDeep",
    "TooMany",
    "more_values_than",
    "depth",
    "includes",
    "loads",
    "loads_in_pieces",
    "values",
]

# A string, once its escaped quotes and backslashes are gone: a run of one class, matched at C
# speed without a backtracking entry per character.
_STRING = re.compile(r'"[^"]*"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""An opening bracket a step up, a closing one a step down (read as signed bytes)."""
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_CHUNK = 2**20
"""Characters read in one piece (more when a string goes on past it)."""


class TooDeep(json.JSONDecodeError):
    pass


def depth(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in `text` (0 for a scalar), whether or not it is
    valid JSON; brackets inside strings do not count.

    Each pass runs at C speed in time and memory linear in the text: escaped backslashes go first
    (a run of them pairs off from its left, as JSON reads it), then escaped quotes, then every
    string, then all but the brackets; the brackets are summed as steps up and down. A regular
    expression matching a whole string with its escapes kept a backtracking entry per character:
    a frame holding one 4 MB string took 589 MB and held the interpreter for seconds, in a worker
    thread too. On text that is not JSON the figure may be off after the first stray backslash,
    but a parser stops there, so the nesting it reaches is still counted."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8", "replace")
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    deepest = level = 0
    start = 0
    while start < len(text):  # a piece at a time, strings whole: bounded memory, and the
        end = start + _CHUNK  # interpreter may switch threads between pieces
        if text.count('"', start, end) % 2:  # the piece would end inside a string: to its end
            end = text.find('"', end) + 1 or len(text)
        piece = text[start:end]
        start = end
        if '"' in piece:
            piece = _STRING.sub("", piece)
        steps = memoryview(piece.encode("utf-8", "surrogatepass").translate(_STEPS, _NOT_BRACKET)).cast("b")
        if steps:
            deepest = max(deepest, max(itertools.accumulate(steps, initial=level)))
            level += sum(steps)
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_DEPTH, **options: Any) -> Any:
    """`json.loads` (with its `options`), refusing text nested deeper than `max_depth` with `TooDeep`."""
    if depth(text) > max_depth:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise TooDeep(f"JSON nested deeper than {max_depth} levels", shown[:0], 0)
    return json.loads(text, **options)


class TooMany(json.JSONDecodeError):
    pass


# A value starts the text, or follows `[`, `,` or `:` (an object's key follows `{` or `,`): their
# number outside strings, plus one, bounds the values and keys. Counted first with `str.count`
# (strings' own commas and colons counted too: an overcount), and only past the bound exactly, one
# match per `[`, `{`, `,` or `:` outside strings, what lies between skipped in C. A quote that opens
# no string, or the text's end, stops the count: the text is not JSON, and the parser says so.
_STRUCTURE = "[{,:"
_OUTSIDE_STRINGS = re.compile(r'(?>"[^"\\]*(?:\\.[^"\\]*)*"|[^"\[{,:]++)*+(?:([\[{,:])|"|\Z)')


def more_values_than(text: str, most: int) -> bool:
    """Whether `text` holds more than `most` JSON values and keys, counted before any is parsed."""
    if sum(text.count(c) for c in _STRUCTURE) + 1 <= most:
        return False
    found = 1
    for match in _OUTSIDE_STRINGS.finditer(text):
        if match.lastindex is None:
            return False
        found += 1
        if found > most:
            return True
    return False


def loads_in_pieces(
    text: str | bytes,
    max_depth: int = MAX_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    max_values: int | None = None,
) -> Any:
    """`loads`, a long text a piece at a time (`jsonpieces.loads`), letting the other threads run
    between pieces: a scenario's JSON (a body posted to `/_emulator/scenarios`, a `.json` file)
    of 5,000,000 empty arrays was one `json.loads` call of 1.8 s that held every client, the event
    loop too, from the worker thread reading it. Bytes are read as `json.loads` reads them."""
    from ptc_emulator.emulator import jsonpieces  # (it imports the sandbox's walk)

    if depth(text) > max_depth:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise TooDeep(f"JSON nested deeper than {max_depth} levels", shown[:0], 0)
    if isinstance(text, bytes | bytearray):
        text = jsonpieces.decode(bytes(text), json.detect_encoding(text), "surrogatepass")
    if max_values is not None and more_values_than(text, max_values):
        raise TooMany(f"JSON of more than {max_values:,} values and keys", text[:0], 0)
    return jsonpieces.loads(text, object_pairs_hook=object_pairs_hook)


def includes(actual: Any, expected: Any) -> bool:
    """Whether the JSON value `actual` has all that `expected` says: each of an object's entries
    (recursively: `actual` may have more), an array's elements one by one (the same length),
    anything else equal (`true` is not `1`)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and includes(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(includes(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    return bool(actual == expected)


def values(value: Any) -> int:
    """How many values `value` holds, itself included (what `includes` walks at most)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
