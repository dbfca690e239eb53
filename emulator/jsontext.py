"""JSON text from untrusted sources, parsed only once its nesting is known to be bounded.

Python's `json` recurses once per level, so a deep enough text raises `RecursionError` (or, in
a worker, takes the process down) wherever it is parsed. Every parse of text that a client, a
program or a scenario author controls goes through `loads`, which measures the nesting first,
in one linear pass, and refuses a text nested deeper than `MAX_DEPTH` with `TooDeep` (a
`json.JSONDecodeError`, so callers that already handle bad JSON handle it too).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ptc_emulator.emulator.wire.items import MAX_DEPTH

__all__ = ["MAX_DEPTH", "TooDeep", "depth", "includes", "loads"]

# A string (skipped whole, escapes included) or one bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


class TooDeep(json.JSONDecodeError):
    pass


def depth(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in `text` (0 for a scalar), whether or not it is
    valid JSON; brackets inside strings do not count."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8", "replace")
    deepest = level = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            level += 1
            deepest = max(deepest, level)
        elif c in "]}":
            level -= 1
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing text nested deeper than `max_depth` with `TooDeep`."""
    if depth(text) > max_depth:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise TooDeep(f"JSON nested deeper than {max_depth} levels", shown[:0], 0)
    return json.loads(text)


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
