"""The model upstream's key, kept to the one header that carries it: wherever the upstream's own
text is passed on (its answer's text, reasoning and calls, the message of a failure it reports,
the start of an error body that echoes the request's headers; a call's arguments) and wherever
the key is written with JSON's `\\u` escapes for any of its characters, which decode to it (`text`
finds that form too; a call's arguments are then their decoded values written again) and wherever a message names the
upstream (its URL), the key is replaced by `[redacted]` before the client, the journal, the log,
a trace or a recording can see it.

A streamed answer is passed on piece by piece, and the key may arrive split across pieces: each
kind of text (`text`, `reasoning`) holds back its end while it could be the start of the key,
written plainly or with JSON's escapes (`\\u00` of `\\u0073k-...`: `partial`), and lets it go
with the next piece or at the end of the turn (`Redacting.flush`).

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

__all__ = ["MASK", "MIN_REDACTED", "Redacting", "RedactingBytes", "Redaction"]

E = TypeVar("E", bound=EmulatorError)
S = TypeVar("S", str, bytes)

MASK = "[redacted]"

MIN_REDACTED = 8
"""The shortest key taken out of text. A shorter one is a local server's dummy key (`EMPTY`,
`ollama`, `lo`), no secret: taken out wherever it matched, it rewrote the model's own words
(`hello` became `hel[redacted]`, a call of `lookup` one of `[redacted]okup`). `serve` says so in
one line at start (docs/security.md)."""


class Redaction:
    """Takes `secret` (the upstream's key; None, empty or shorter than `MIN_REDACTED`: nothing to
    take) out of text."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret if secret and len(secret) >= MIN_REDACTED else ""
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

    def rewrite(self, text: str) -> str:
        """`text` as `text` gives it, except that a `\\u` (or `\\/`) form is taken out only where its
        first backslash begins an escape (an even number of backslashes before it): after an escaped
        backslash it is no escape, and `[redacted]` there would break the JSON (`\\[`). What is left
        so, `within` still finds (for the recording proxy, which then refuses the text)."""
        if not self.secret:
            return text
        text = text.replace(self.secret, MASK)
        if self.escaped is not None and "\\" in text:
            text = self.escaped.sub(_aligned, text)
        return text

    def scan(self, text: str) -> str | None:
        """For the recording proxy: `rewrite`, or None when the key is still `within` the result
        (a string inside a string, an escape after an escaped backslash): such text cannot be
        rewritten in place without breaking it, and is refused instead."""
        cleaned = self.rewrite(text)
        return None if self.within(cleaned) else cleaned

    def within(self, text: str, levels: int = 3) -> bool:
        """Whether `text` holds the key: plainly, with JSON's escapes (wherever they start), or so
        once JSON's escapes in it are decoded again, up to `levels` times more (a JSON document
        inside a JSON string, as a call's arguments are, which the app decodes in its turn)."""
        if not self.secret:
            return False
        for level in range(levels + 1):
            if self.secret in text:
                return True
            if "\\" not in text:
                return False
            if self.escaped is not None and self.escaped.search(text):
                return True
            if level == levels:
                break
            decoded = _unescaped(text)
            if decoded == text:
                return False
            text = decoded
        return False

    def partial(self, text: str) -> int:
        """The length of the longest end of `text` that could begin the key written plainly or with
        any of JSON's escapes for its characters (`\\u`, `\\u00`, `s\\u006`; the whole key not
        counted): a delta that ends so is held back, the rest of an escape may come with the next."""
        if not self.secret:
            return 0
        first = self.secret[0]
        for start in range(max(0, len(text) - _WIDEST * len(self.secret)), len(text)):
            if text[start] in ("\\", first) and _begins(text, start, self.secret):
                return len(text) - start
        return 0

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
        are the redacted values written again (arguments that are no JSON keep the plain check).
        An escape right after an escaped backslash (`\\\\u0073...`) is no escape, and is left as it
        is (`rewrite`): `[redacted]` there broke the JSON (`\\\\[redacted]`, "not JSON"), where the
        key it holds once decoded again is what `within` finds (the call is refused for it)."""
        text = self.rewrite(text)
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
        held = self.redaction.partial(text)  # an unfinished escape (`\\u00`) could begin the key too
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


_WIDEST = 12
"""The most characters JSON writes one character with (a surrogate pair's two `\\u` escapes)."""

_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_DECODED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _unescaped(text: str) -> str:
    """`text` with JSON's escapes decoded (the whole of it, as if one string: outside strings JSON
    has no backslash); a surrogate pair made one character, a lone surrogate kept."""
    decoded = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else _DECODED[m.group(2)], text)
    if _SURROGATE.search(decoded):
        decoded = decoded.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return decoded


def _aligned(match: re.Match[str]) -> str:
    """The mask for a match of the escaped key, unless its first backslash is itself escaped."""
    text, start = match.string, match.start()
    before = start
    while before and text[before - 1] == "\\":
        before -= 1
    return match.group() if (start - before) % 2 else MASK


def _forms(char: str) -> tuple[str, ...]:
    code = ord(char)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    escape = "".join(f"\\u{unit:04x}" for unit in units)
    return (char, escape, *((_SHORT[char],) if char in _SHORT else ()))


def _begins(text: str, start: int, secret: str) -> bool:
    """Whether `text[start:]` is a beginning (not the whole) of `secret` written with any mix of its
    characters and JSON's escapes (hex in either case)."""
    at = start
    for char in secret:
        if at == len(text):
            return True
        for form in _forms(char):
            piece = text[at : at + len(form)]
            same = piece == form[: len(piece)] if form == char else piece.lower() == form[: len(piece)]
            if same:
                if len(piece) < len(form):
                    return True
                at += len(form)
                break
        else:
            return False
    return False
