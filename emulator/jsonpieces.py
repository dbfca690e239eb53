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
fitted to about 256 K characters of text), a long string a slice at a time. `loads` reads the outer
levels a value at a time, `PIECE` values or `READ_CHARS` characters of text between two pauses,
whichever comes first. A value inside those is one call when its text is at most `STEP` characters;
a longer array or object is read a value at a time too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator import collector
from ptc_emulator.sandbox import json_pieces

__all__ = [
    "LONG_TEXT",
    "PIECE",
    "READ_CHARS",
    "between",
    "compact_size",
    "decode",
    "dumps",
    "loads",
    "loads_each",
    "value_at",
]

PIECE = 1000
"""Values of a long array made or read in one call: about a millisecond of work."""
LONG_TEXT = 256 * 1024
"""A text shorter than this is read in one call (a millisecond or so)."""
READ_CHARS = 64 * 1024
"""Characters of text read between two pauses at most (and `PIECE` values at most). A value's
cost is not its count: an integer of 4,000 digits takes some 0.1 ms to read (the conversion is
quadratic in its digits), so 1,000 of them between two pauses held every other client 0.1-0.5 s;
64 K characters of them are some 2 ms."""
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
    array a run of values at a time (`PIECE` at most, fitted to about 256 K characters of text), a
    long string a slice at a time; `between` every 256 K characters or so."""

    def dump(part: Any) -> str:
        return json.dumps(part, separators=separators)

    return "".join(
        json_pieces(value, dump, separators=separators, depth=_OUTER, short=PIECE, fit=True, pause=lambda: between())
    )


_BYTES = 256 * 1024
"""Bytes of a long body decoded in one call (a 14 MB body of Cyrillic held the interpreter 10-40
ms in one `bytes.decode`)."""


def decode(raw: bytes, encoding: str = "utf-8", errors: str = "strict") -> str:
    """`raw.decode(encoding, errors)`; a long UTF-8 text `_BYTES` at a time, cut before a
    character's first byte, pausing (`between`) between two. Whatever it refuses is refused by
    `raw.decode` itself, with its own error."""
    if encoding.lower().replace("_", "-") not in ("utf-8", "utf8") or len(raw) <= 2 * _BYTES:
        return raw.decode(encoding, errors)
    parts: list[str] = []
    start = 0
    try:
        while start < len(raw):
            end = min(start + _BYTES, len(raw))
            back = 0
            while end < len(raw) and back < 3 and raw[end] & 0xC0 == 0x80:  # a continuation byte
                end -= 1
                back += 1
            parts.append(_bytes_piece(raw, start, end, errors))
            if end < len(raw):
                between()
            start = end
    except UnicodeDecodeError:
        return raw.decode(encoding, errors)  # its error, placed in the whole text
    return "".join(parts)


def _bytes_piece(raw: bytes, start: int, end: int, errors: str) -> str:
    return raw[start:end].decode("utf-8", errors)


def loads(text: str, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """`json.loads(text)` of text `json.dumps` wrote (a stored record, a request's body): a long
    one's outer arrays and objects a value at a time, pausing (`between`) every `PIECE` values,
    and a long string a slice at a time (see `_Reader`). A long text that is not JSON raises the
    `json.JSONDecodeError` found where the reader stops: it is not read again whole (one call over
    a 14 MB body failing at its last byte held every other client 1-3 s). `object_pairs_hook`:
    as `json.loads` calls it, for every object (a scenario file's keys given twice are refused)."""
    if len(text) < LONG_TEXT:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    collector.hold_for_request()  # as many objects as a large body: no full passes over them meanwhile
    try:
        value, end = _Reader(text, hook=object_pairs_hook).value(_skip(text, 0), 0)
    except StopIteration as e:  # the scanner found no value where one must be
        raise json.JSONDecodeError("Expecting value", text, e.value) from None
    except IndexError:  # the text ends inside a value
        raise json.JSONDecodeError("Expecting value", text, len(text)) from None
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def loads_each(texts: list[str]) -> list[Any]:
    """`[json.loads(t) for t in texts]` of many short stored texts (a conversation's items): as many
    objects as one long text, so full collections are held off for the rest of the request when they
    are `LONG_TEXT` characters or more in all, as `loads` holds them for one long text (150,000 items
    read back started full collections of 0.15-1.3 s each, every other client waiting)."""
    if len(texts) * 16 >= LONG_TEXT and sum(map(len, texts)) >= LONG_TEXT:
        collector.hold_for_request()
    return [json.loads(text) for text in texts]


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


_WINDOW = 32 * 1024
"""A stretch of text this long with no `"` in it lies in one long string (or a long run of
numbers): the reader finds these first, a `str.count` each, and reads up to them by hand."""
_SLICE = 256 * 1024
"""Characters of a long string's text decoded in one call."""
_NEAR = 2 * _WINDOW
"""A value starting this close before such a stretch is read by hand: an array or object a
value at a time, a string a slice at a time (`_string`)."""


def _quoteless(text: str, first: int = 0) -> list[int]:
    """Where stretches of `_WINDOW` characters with no `"` start, in order (one per window), from
    `first` on."""
    found = []
    for start in range(first, len(text) - _WINDOW + 1, _WINDOW):
        if text.count('"', start, start + _WINDOW) == 0:
            found.append(start)
    return found


def _escaped(text: str, at: int) -> bool:
    """Whether the character at `at` (in a string) follows an odd run of backslashes."""
    run = 0
    while text[at - 1 - run] == "\\":
        run += 1
    return run % 2 == 1


def _cut(text: str, start: int, end: int) -> int:
    """A place past `start` and at or before `end` to cut a string's text (`start` is one): before
    a character or an escape, and not between the two escapes of a surrogate pair (`\\uD83D\\uDE00`,
    decoded apart they would be two lone surrogates). Found among the 64 places before `end`; a
    string dense with escapes (`\\n` over and over) is cut before one, and a run of escaped
    backslashes at an even distance from where the run starts."""
    low = max(start + 1, end - 64)
    for at in range(end, low - 1, -1):
        if text.rfind("\\", max(start, at - 6), at) == -1:  # no escape in the 6 characters before
            return at
    for at in range(end, low - 1, -1):  # before an escape: a backslash after no backslash
        if text[at] == "\\" and text[at - 1] != "\\" and not _pair_at(text, at):
            return at
    # Every backslash among them follows a backslash, or is a pair's low half: the window ends a
    # run of backslashes begun before it. Cut in that run, at an even distance from its start
    # (where an escape begins): before a backslash that begins an escape, never a pair's half.
    at = end
    while at >= low and not (text[at] == "\\" and text[at - 1] == "\\"):
        at -= 1
    run = start + len(text[start : at + 1].rstrip("\\"))
    cut = run + (at - run) // 2 * 2
    if at < low or cut <= start:
        raise ValueError("no place to cut")  # (not met: see the two searches above)
    return cut


def _pair_at(text: str, at: int) -> bool:
    """Whether the escape at `at` is a surrogate pair's low half, right after its high half."""
    escape = text[at : at + 4].lower()
    before = text[max(0, at - 6) : at - 2].lower()
    low_half = escape[:3] == "\\ud" and escape[3:] in ("c", "d", "e", "f")
    return low_half and before[:3] == "\\ud" and before[3:] in ("8", "9", "a", "b")


def _piece(text: str, start: int, end: int) -> str:
    """A slice of a string's JSON text (no quotes around it), decoded as `json.loads` would; what
    it refuses (a control character, a bad escape) is placed in the whole text."""
    try:
        value: str = _SCAN('"' + text[start:end] + '"', 0)[0]
    except json.JSONDecodeError as e:
        raise json.JSONDecodeError(e.msg, text, start + e.pos - 1) from None
    return value


class _Reader:
    def __init__(self, text: str, start: int = 0, hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> None:
        self.text = text
        self.hook = hook
        self.scan = _SCAN if hook is None else json.JSONDecoder(object_pairs_hook=hook).scan_once  # type: ignore[attr-defined]
        self.read = 0
        self.chars = 0
        """Characters of text read since the last pause."""
        self.marks = _quoteless(text, start)
        self.mark = 0

    def _near(self, i: int) -> bool:
        """Whether a quoteless stretch starts at most `_NEAR` characters after `i`."""
        marks = self.marks
        while self.mark < len(marks) and marks[self.mark] < i:
            self.mark += 1
        return self.mark < len(marks) and marks[self.mark] - i <= _NEAR

    def _string(self, i: int) -> tuple[str, int]:
        """The string whose opening quote is at `i`, decoded `_SLICE` characters at a time."""
        text = self.text
        start = i + 1
        parts: list[str] = []
        while True:
            end = min(start + _SLICE, len(text))
            quote = text.find('"', start, end)
            while quote != -1 and _escaped(text, quote):
                quote = text.find('"', quote + 1, end)
            if quote != -1:
                if not parts:
                    value, after = self.scan(text, i)
                    return value, int(after)
                parts.append(_piece(text, start, quote))
                return "".join(parts), quote + 1
            if end == len(text):
                raise json.JSONDecodeError("Unterminated string starting at", text, i)
            cut = _cut(text, start, end)
            parts.append(_piece(text, start, cut))
            between()
            start = cut

    def value(self, i: int, level: int) -> tuple[Any, int]:
        text = self.text
        if text[i] == '"' and self.marks and self._near(i):
            return self._string(i)
        if not (
            level == 0
            and text[i] in "[{"
            or level < _OUTER
            and text[i] == "["
            or text[i] in "[{"
            and self.marks
            and self._near(i)
        ):
            found = _bounded(text, i, self.scan) if text[i] in "[{" else self.scan(text, i)
            if found is not None:
                value, end = found
                self.read += 1
                self.chars += int(end) - i
                if self.read % PIECE == 0 or self.chars >= READ_CHARS:
                    self.chars = 0
                    between()
                return value, int(end)
            # An array or object of more than `STEP` characters: read a value at a time, as the
            # outer levels are (an object of 1,450,000 members was one call of 1-3 s).
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
                    raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
                i = _skip(text, i + 1)
        # Without a hook the object is made as it is read, a member at a time (as `json.loads` does:
        # a key given twice keeps its first place and its last value): `dict(pairs)` at its end was
        # one call over them all, and 1,860,000 members held every other client 0.9-4.6 s.
        made: dict[str, Any] = {}
        pairs: list[tuple[str, Any]] = []
        while True:
            if text[i] != '"':  # (scanned as a value, a long array there was one call)
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
            key, i = self._string(i) if self.marks and self._near(i) else self.scan(text, i)
            i = _skip(text, int(i))
            if text[i] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
            member, i = self.value(_skip(text, i + 1), level + 1)
            if self.hook is None:
                made[key] = member
            else:  # (a scenario's: its values are bounded, `MAX_SCENARIO_JSON_VALUES`)
                pairs.append((key, member))
            i = _skip(text, i)
            if text[i] == "}":
                return (made if self.hook is None else self.hook(pairs)), i + 1
            if text[i] != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
            i = _skip(text, i + 1)


STEP = 64 * 1024
"""Characters of an array or object (below the outer levels) read in one call at most: a longer
one is read a value at a time."""
_TRIES = (64, 4096, STEP)
"""The lengths of text an array or object is first tried in, shortest first: most are short, and a
slice of the text costs its length to copy."""


def _bounded(text: str, i: int, scan: Callable[[str, int], tuple[Any, int]] = _SCAN) -> tuple[Any, int] | None:
    """The array or object at `i` and where it ends, read in one scanner call if it ends within
    `STEP` characters (None: it is longer)."""
    for size in _TRIES:
        end = i + size
        if end >= len(text):
            value, after = scan(text, i)
            return value, int(after)
        try:
            value, after = scan(text[i:end], 0)
        except (StopIteration, ValueError):
            continue  # cut short (or not JSON: a longer try, or the hand, finds where)
        return value, i + int(after)
    return None


def value_at(text: str, i: int) -> tuple[Any, int]:
    """The JSON value at `i` of `text` and where it ends, as the scanner behind `json.loads` reads
    it (and raising what it raises): an array or object of more than `STEP` characters a value at
    a time, pausing (`between`) every `PIECE` values, a long string a slice at a time."""
    if text[i] in "[{":
        found = _bounded(text, i)
        if found is not None:
            return found
        try:
            value, end = _Reader(text, i).value(i, _OUTER)
        except (IndexError, RecursionError) as e:  # cut short, or nested beyond Python's stack
            raise ValueError("not JSON read here") from e
        return value, end
    if text[i] == '"' and text.count('"', i + 1, i + 1 + _SLICE) == 0:  # a long string
        return _Reader(text, i).value(i, _OUTER)
    value, end = _SCAN(text, i)
    return value, int(end)


def compact_size(value: list[Any]) -> int:
    """`len(json.dumps(value, separators=(",", ":"), default=str))`, `PIECE` values at a time."""
    size = 2  # the brackets
    for start in range(0, len(value), PIECE):
        if start:
            between()
            size += 1  # the comma between two pieces
        size += len(json.dumps(value[start : start + PIECE], separators=(",", ":"), default=str)) - 2
    return size
