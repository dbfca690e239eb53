"""The model upstream's key, kept to the one header that carries it: wherever the upstream's own
text is passed on (its answer's text, reasoning and calls, the message of a failure it reports,
the start of an error body that echoes the request's headers; a call's arguments) and wherever
the key is written with JSON's `\\u` escapes for any of its characters, which decode to it (`text`
finds that form too; a call's arguments are then their decoded values written again) and wherever a message names the
upstream (its URL), the key is replaced by `[redacted]` before the client, the journal, the log,
a trace or a recording can see it.

A streamed answer is passed on piece by piece, and the key may arrive split across pieces: each
kind of text (`text`, `reasoning`) holds back its end while it could be the start of the key, and
lets it go with the next piece or at the end of the turn (`Redacting.flush`).

The recording proxy (`serve --upstream URL --upstream-api-key-env NAME`, api/proxy.py) takes the
same key out of what its upstream answers: the bytes of a body or an SSE stream as they pass
(`RedactingBytes`, holding back an end that could start the key in the same way), its headers'
values, each WebSocket message, and the upstream's words in the proxy's own errors; the
recording is made from what the client is sent, so it never holds the key either. A key written
with JSON's escapes (`\\u0073`, `\\/`) is found by `text` in the text of a whole body, SSE event or
WebSocket message, a scan rather than a parse (a document too deep to parse is looked through
too); what the proxy cannot be sure to read as the client will, it refuses."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, TypeVar

from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.upstream.protocol import Answer, Delta, ToolCall

__all__ = ["MASK", "Redacting", "RedactingBytes", "Redaction"]

E = TypeVar("E", bound=EmulatorError)
S = TypeVar("S", str, bytes)

MASK = "[redacted]"


class Redaction:
    """Takes `secret` (the upstream's key; None or empty: nothing to take) out of text."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret or ""
        self.escaped = _escaped(self.secret) if self.secret else None
        """The key written with any mix of its characters and JSON's `\\uXXXX` escapes."""

    def text(self, text: str, *, cut: bool = False) -> str:
        """`text` without the key, written plainly or with JSON's `\\u` escapes for any of its
        characters (an error body's text, say, which a client decodes to the key); `cut`: the
        text was cut short, so an end that starts the key goes too."""
        if not self.secret:
            return text
        text = text.replace(self.secret, MASK)
        if self.escaped is not None and "\\" in text:
            text = self.escaped.sub(MASK, text)
        if cut:
            text = text[: len(text) - self.held(text)]
        return text

    def held(self, text: str) -> int:
        """The length of the longest end of `text` that the key starts with (the whole key not counted)."""
        return _held(text, self.secret)

    def answer(self, answer: Answer) -> Answer:
        """`answer` with the key out of every text in it."""
        if not self.secret:
            return answer
        return dataclasses.replace(
            answer,
            text=self.text(answer.text),
            reasoning=None if answer.reasoning is None else self.text(answer.reasoning),
            model=None if answer.model is None else self.text(answer.model),
            calls=[ToolCall(self.text(c.id), self.text(c.name), self.arguments(c.arguments)) for c in answer.calls],
        )

    def arguments(self, text: str) -> str:
        """A call's JSON arguments without the key, written plainly or with JSON's escapes
        (`"\\u0073k-..."`, which decodes to the key): when a decoded string holds it, the arguments
        are the redacted values written again (arguments that are no JSON keep the plain check)."""
        text = self.text(text)
        found = self.json(text)
        return text if found is None else found

    def json(self, text: str) -> str | None:
        """`text`, a JSON document, written again with the key out of each decoded string (keys
        too), or None when no decoded string holds the key (or `text` is no JSON)."""
        if not self.secret or "\\" not in text:  # without a backslash a decoded string is as written
            return None
        try:
            cleaned, changed = self.values(json.loads(text))
        except (ValueError, RecursionError):
            return None
        return self.write(cleaned) if changed else None

    @staticmethod
    def write(data: Any) -> str:
        """Decoded JSON `data` written again (compact, UTF-8 as it is; a lone surrogate escaped)."""
        try:
            written = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            written.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: kept escaped, as it came
            written = json.dumps(data, separators=(",", ":"))
        except (ValueError, RecursionError):
            return json.dumps(MASK)
        return written

    def values(self, data: Any) -> tuple[Any, bool]:
        """Decoded JSON `data` with the key out of each string in it (keys too), and whether any held it."""
        if not self.secret:
            return data, False
        if isinstance(data, str):
            cleaned = data.replace(self.secret, MASK)
            return cleaned, cleaned != data
        if isinstance(data, list):
            items = [self.values(item) for item in data]
            return [item for item, _ in items], any(changed for _, changed in items)
        if isinstance(data, dict):
            changed = False
            out: dict[str, Any] = {}
            for key, value in data.items():
                new_key, key_changed = self.values(key)
                new_value, value_changed = self.values(value)
                out[new_key] = new_value
                changed = changed or key_changed or value_changed
            return out, changed
        return data, False

    def error(self, error: E) -> E:
        """`error` with the key out of its message."""
        error.message = self.text(error.message)
        error.args = (error.message,)
        return error

    def stream(self, on_delta: Delta) -> Redacting:
        return Redacting(self, on_delta)

    def chunks(self) -> RedactingBytes:
        return RedactingBytes(self)


class Redacting:
    """An `on_delta` that passes each piece on without the key (see the module docstring)."""

    def __init__(self, redaction: Redaction, on_delta: Delta) -> None:
        self.redaction = redaction
        self.on_delta = on_delta
        self.pending: dict[str, str] = {}

    def __call__(self, kind: str, text: str) -> None:
        if not self.redaction.secret:
            self.on_delta(kind, text)
            return
        text = self.redaction.text(self.pending.pop(kind, "") + text)
        held = self.redaction.held(text)
        if held:
            self.pending[kind] = text[len(text) - held :]
            text = text[: len(text) - held]
        if text:
            self.on_delta(kind, text)

    def flush(self) -> None:
        """Pass on what was held back: the turn has ended, so it is not the key."""
        pending, self.pending = self.pending, {}
        for kind, text in pending.items():
            self.on_delta(kind, text)


class RedactingBytes:
    """Bytes passed on without the key (UTF-8): each call gives back what can go now, holding
    back an end that could be the key's start; `flush` gives that back when the bytes end."""

    def __init__(self, redaction: Redaction) -> None:
        self.secret = redaction.secret.encode("utf-8")
        self.mask = MASK.encode("ascii")
        self.pending = b""

    def __call__(self, chunk: bytes) -> bytes:
        if not self.secret:
            return chunk
        data = (self.pending + chunk).replace(self.secret, self.mask)
        held = _held(data, self.secret)
        self.pending = data[len(data) - held :]
        return data[: len(data) - held]

    def flush(self) -> bytes:
        """What was held back: the bytes have ended, so it is not the key."""
        pending, self.pending = self.pending, b""
        return pending


_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
"""JSON's two-character escapes, each with the character it decodes to (`\\/` is `/`)."""


def _escaped(secret: str) -> re.Pattern[str]:
    """A pattern for `secret` with each character as it is, as a JSON `\\u` escape (hex in
    either case; one outside the BMP as its surrogate pair) or as JSON's two-character escape for
    it (`\\/` for `/`): every way a JSON string can write it. Built from the server's own key."""
    parts = []
    for char in secret:
        code = ord(char)
        units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
        escape = "".join(f"\\\\u(?i:{unit:04x})" for unit in units)
        short = f"|{re.escape(_SHORT[char])}" if char in _SHORT else ""
        parts.append(f"(?:{re.escape(char)}|{escape}{short})")
    return re.compile("".join(parts))


def _held(text: S, secret: S) -> int:
    """The length of the longest end of `text` that `secret` starts with (the whole of it not counted)."""
    for size in range(min(len(secret) - 1, len(text)), 0, -1):
        if text.endswith(secret[:size]):
            return size
    return 0
