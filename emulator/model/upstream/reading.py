"""What a model upstream sends, read as untrusted input: bounded as it arrives, decoded strictly,
and read against the protocol's shape with what is wrong named.

Bytes. Every byte of one answer (a whole body, or every line of a stream, comments and framing
included) counts towards one budget, `UpstreamConfig.max_answer_bytes`
(`--model-upstream-max-answer-bytes`); the answer is read chunk by chunk as it arrives, so one
past the budget is refused (a `Fault`) at the chunk that crosses it, never held whole, and no
line of a stream can grow past it either.

JSON. `decode` takes only what RFC 8259 calls JSON, and only what the rest of the emulator can
carry: UTF-8, no `NaN` or `Infinity` (nor a number too large for a double), nesting at most
`MAX_DEPTH` (64) levels, no string holding a lone UTF-16 surrogate (`"\\ud800"`). `parse` decodes
on the event loop up to `INLINE_BYTES`, where the worst shapes take a couple of milliseconds, and
in a worker thread beyond, with the standard library's pure-Python scanner: the thread runs
bytecode, so the loop gets the interpreter back every switch interval (5 ms) however large or
odd the text is.

Shape. `Shape` reads one decoded value the way a protocol needs it (an object, a list of
objects, a string, a count) and raises a `Fault` naming the path that is wrong
(`choices[0].message.content is a number, not a string`).
"""

from __future__ import annotations

import asyncio
import json
import json.scanner
import math
import re
from collections.abc import AsyncIterator
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.jsontext import MAX_DEPTH, depth
from ptc_emulator.emulator.model.upstream.protocol import Answer, Fault

__all__ = [
    "INLINE_BYTES",
    "Budget",
    "Malformed",
    "Shape",
    "whole",
    "decode",
    "events",
    "parse",
]

INLINE_BYTES = 8 * 1024
"""JSON text up to this many bytes is decoded on the event loop (a stream's chunk is a few
hundred); longer text in a worker thread."""


class Budget:
    """The bytes one answer may still take (`verb`: "answered" or "streamed", for the refusal,
    `messages.too_many_bytes`)."""

    def __init__(self, limit: int, verb: str) -> None:
        self.limit = limit
        self.verb = verb
        self.read = 0

    def spend(self, count: int) -> None:
        self.read += count
        if self.read > self.limit:
            raise Fault(messages.too_many_bytes(self.verb, self.limit))


async def whole(chunks: AsyncIterator[bytes], budget: Budget) -> bytes:
    """A whole body, read within `budget`."""
    read = bytearray()
    async for chunk in chunks:
        budget.spend(len(chunk))
        read += chunk
    return bytes(read)


_EOL = re.compile(rb"\r\n|\r|\n")
BOM = b"\xef\xbb\xbf"
"""UTF-8's byte order mark."""


async def events(chunks: AsyncIterator[bytes], budget: Budget, not_events: Fault | None = None) -> AsyncIterator[bytes]:
    """The data of each server-sent event, as the event-stream format frames it: lines end with
    CRLF, LF or CR; `data:` lines (one optional space after the colon) join with LF; an empty
    line ends the event; comments (`:`) and the fields `event`, `id` and `retry` are skipped; a
    line not UTF-8, or of any other field, is a `Fault` (`_field`). What is pending when the
    body ends is an event too (a server that leaves out the last empty line). A UTF-8 byte order
    mark that starts the stream is skipped, as an event-stream decoder skips it (anywhere else it
    is a line's junk, the 502); before, it made the first line's field `\ufeffdata` and its event was lost.
    `not_events`: raised when the stream's first byte past white space (and the mark) is `{` or
    `[`, which no event-stream line begins with: a whole JSON body, not a stream."""
    line = bytearray()
    data: list[bytes] = []
    after_cr = False  # the last chunk ended on CR: a LF that starts the next one belongs to it
    head: bytes | None = b""  # the stream's first bytes while they may be a byte order mark; then None
    async for chunk in chunks:
        budget.spend(len(chunk))
        if head is not None:
            head += chunk
            if len(head) < len(BOM) and BOM.startswith(head):
                continue  # a mark split across chunks, perhaps
            chunk, head = head.removeprefix(BOM), None
        if not_events is not None and (begun := chunk.lstrip(b" \t\r\n")):
            if begun[:1] in (b"{", b"["):
                raise not_events
            not_events = None
        start = 1 if after_cr and chunk.startswith(b"\n") else 0
        after_cr = chunk.endswith(b"\r")
        for end in _EOL.finditer(chunk, start):
            line += chunk[start : end.start()]
            start = end.end()
            if line:
                _field(line, data)
                line = bytearray()
            elif data:
                yield b"\n".join(data)
                data = []
        line += chunk[start:]
    if head:  # the stream ended within what began as a mark: data, not a mark
        line += head
    if line:
        _field(line, data)
    if data:
        yield b"\n".join(data)


_FIELDS = frozenset({b"event", b"id", b"retry"})
"""The event-stream fields besides `data`: read past (the emulator needs none of them)."""


def _field(line: bytearray, data: list[bytes]) -> None:
    """One line of an event: a `data:` line's value joins `data`; a comment (`:`) and the other
    fields of the event-stream format (`event`, `id`, `retry`) are skipped. A line with no colon
    is a field with an empty value, as the format reads it.

    Stricter than the format in two ways, so that no line holding the answer is dropped unseen
    (a false green: before, `Data:`, a stray byte or a byte order mark before `data`, made the
    line's field unknown, and the response was `completed` without that chunk): a line whose
    bytes are not UTF-8 is a `Fault` (the format would decode it with replacement characters),
    and so is a line whose field is none of the four (the format ignores an unknown field; no
    model upstream sends one, and one that is `data` after junk or in another case carries the
    answer). The field is quoted with what is not printable escaped (`'\\ufeffdata'`)."""
    field, colon, value = bytes(line).partition(b":")
    if field == b"data":
        data.append(value[1:] if value.startswith(b" ") else value)
        return
    try:
        name = field.decode("utf-8")
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise Fault(messages.malformed(messages.streamed_line(), messages.answer_not_utf8())) from None
    if not field or field in _FIELDS:
        return
    shown = name if len(name) <= 40 else name[:37] + "..."
    raise Fault.quoting(messages.unknown_stream_field, "".join(c if c.isprintable() else ascii(c)[1:-1] for c in shown))


class Malformed(ValueError):
    """Text `decode` does not take; `problem`: what is wrong with it, a catalogue text
    (`messages.answer_not_json()`, `messages.answer_too_deep(64)`, ...); `not_json`: it is not JSON at all."""

    def __init__(self, problem: str, *, not_json: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.not_json = not_json

    def said(self, subject: str) -> str:
        """`subject` (what was read, `messages.streamed_chunk()`) and what is wrong with it: a fault's text."""
        return messages.malformed(subject, self.problem)


class _NotFinite(Exception):
    pass


def _constant(name: str) -> Any:
    raise _NotFinite(messages.answer_constant(name))


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(messages.answer_number_too_large(text if len(text) <= 40 else text[:37] + "..."))
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _pure_python(decoder: json.JSONDecoder) -> None:
    """Let `decoder` scan with the standard library's Python scanner (bytecode, so the thread
    running it gives the interpreter back every switch interval)."""
    scanner = getattr(json.scanner, "py_make_scanner", None)
    if scanner is not None:
        setattr(decoder, "scan_once", scanner(decoder))  # noqa: B010 (typeshed does not declare it)


def decode(data: bytes | str) -> Any:
    """The JSON value of `data`, or `Malformed` saying why not (see the module docstring)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed(messages.answer_not_utf8()) from None
    else:
        text = data
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH:
        raise Malformed(messages.answer_too_deep(MAX_DEPTH))
    decoder = json.JSONDecoder(parse_constant=_constant, parse_float=_float)
    if len(text) > INLINE_BYTES:
        _pure_python(decoder)
    try:
        value = decoder.decode(text)
    except _NotFinite as e:
        raise Malformed(str(e)) from None
    except (ValueError, RecursionError):
        raise Malformed(messages.answer_not_json(), not_json=True) from None
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(value):
        raise Malformed(messages.answer_lone_surrogate())
    return value


def _lone_surrogate(value: Any) -> bool:
    """Whether a string in `value` (a key or a value) holds a surrogate code point: `json` joins
    an escaped pair into one character, so any that is left stands alone."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


async def parse(data: bytes | str) -> Any:
    """`decode`, on the event loop for short text and in a worker thread for longer."""
    if len(data) <= INLINE_BYTES:
        return decode(data)
    return await asyncio.to_thread(decode, data)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class Shape:
    """Reads decoded JSON as a protocol expects it; `subject` is what is read (`messages.answered_body()`,
    `messages.streamed_chunk()`), for the `Fault` that names the path that is wrong."""

    def __init__(self, subject: str) -> None:
        self.subject = subject

    def fault(self, where: str, problem: str) -> Fault:
        """`problem` (`messages.shape_missing()`, ...) at the path `where`."""
        return Fault(messages.unknown_shape_at(self.subject, where, problem))

    def _wrong(self, value: Any, where: str, wanted: str) -> Fault:
        if value is None:
            return self.fault(where, messages.shape_missing())
        return self.fault(where, messages.shape_wrong(_kind(value), wanted))

    def object(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self._wrong(value, where, "an object")
        return value

    def objects(self, value: Any, where: str) -> list[dict[str, Any]]:
        """A list of objects; missing or null is an empty one."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(value, where, "a list")
        return [self.object(item, f"{where}[{n}]") for n, item in enumerate(value)]

    def string(self, value: Any, where: str) -> str:
        """A string; missing or null is an empty one."""
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._wrong(value, where, "a string")
        return value

    def count(self, value: Any, where: str) -> int:
        """A count of tokens: a whole number, not negative; missing or null is 0."""
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(value, where, "a whole number")
        if value < 0:
            raise self.fault(where, messages.shape_negative())
        return value

    def index(self, value: Any, where: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(value, where, "a whole number")
        return value

    def arguments(self, value: Any, where: str) -> str:
        """A call's arguments as JSON text: a string as it is, an object (some servers send one)
        as JSON; missing or null is `{}`."""
        if value is None:
            return "{}"
        if isinstance(value, str):
            return value
        return json.dumps(self.object(value, where), ensure_ascii=False)

    def usage(self, answer: Answer, counts: Any, where: str) -> None:
        """The token counts of a `usage` object (either protocol's names) into `answer`."""
        if counts is None:
            return
        counts = self.object(counts, where)
        for names in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
            for name in names:
                if counts.get(name) is not None:
                    setattr(answer, names[1], self.count(counts[name], f"{where}.{name}"))
                    break
