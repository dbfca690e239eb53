"""What a model upstream's protocol must do, whichever API the real model speaks: build the request
(`request`, and `streamed` to ask for a stream), read a whole answer (`answer`), read a streamed
one (`stream`). `client.py` does the rest (the HTTP, the byte budget, the retries, the timeout,
the errors in the OpenAI envelope) and keeps the registry of protocols; `chat.py` and
`responses.py` are the two the emulator speaks.

A protocol takes the transcript (`transcript.Entry`) and the functions (`teach.Function`) the
model is offered, and gives an `Answer`: the text, the tool calls, any reasoning, the token
counts. What it reads is untrusted (`reading.py`): it decodes with `reading.parse`, reads the
values with a `reading.Shape`, and raises `Fault` for anything it cannot take (an answer of a
shape the protocol does not have, a stream that says it failed or ends before it finished); a
`TypeError`, `AttributeError`, `KeyError`, `IndexError` or `ValueError` that escapes a protocol is
still the 502 (`messages.unreadable_shape`), never a 500.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = [
    "MAX_CALLS",
    "Answer",
    "Delta",
    "Fault",
    "ToolCall",
    "UpstreamProtocol",
    "json_schema_of",
    "snippet",
    "words",
]


MAX_CALLS = 2048
"""The most tool calls one upstream turn may make (`messages.too_many_calls`, a 502): each becomes
an item of the response, checked, stored, journaled and sent; 30,000 held every client for up to
2 s. The client checks every protocol's answer; a protocol may refuse sooner (a stream at the call
past it)."""


Delta = Callable[[str, str], None]
"""`(kind, text)`: a piece of a streamed answer as it arrives, `kind` "text" or "reasoning"."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Answer:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    refusal: str = ""
    """A refusal the upstream gave (Chat Completions' `refusal`, a Responses `refusal` part): read
    so that an answer of a refusal alone is said as one (`messages.upstream_refused`)."""
    stopped: str | None = None
    """Why the upstream stopped before its answer was done, as `incomplete_details.reason` says it:
    `max_output_tokens` (Chat Completions' `finish_reason: "length"`), `content_filter` (its
    `finish_reason: "content_filter"`), or a Responses answer's own `incomplete` reason. None: it
    finished."""


class Fault(Exception):
    """What went wrong with an answer, as the end of a sentence that begins "The model upstream at
    <url> " (a catalogue text: `messages.malformed(...)`): the client makes it the 502
    (`messages.upstream_fault`). `Fault.quoting(wording, quoted)`: a text that quotes the
    upstream's own words (a failure's message), which the client gives it once it has taken the
    key out of them and cut them short."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.wording: Callable[[str], str] | None = None
        self.quoted: str | None = None

    @classmethod
    def quoting(cls, wording: Callable[[str], str], quoted: str) -> Fault:
        fault = cls(quoted)
        fault.wording = wording
        fault.quoted = quoted
        return fault

    def said(self, redact: Callable[[str], str]) -> str:
        """The fault's text, the upstream's words in it passed through `redact` and cut short."""
        if self.wording is None or self.quoted is None:
            return self.message
        return self.wording(snippet(redact(self.quoted)))


class UpstreamProtocol(ABC):
    """One API a model upstream may speak. A subclass names itself (`name`, what
    `--model-upstream-api` says, and `title`, what `--help` says of it), the path its requests go
    to, and how its requests and answers are spelled; `client.register` adds it to the choices."""

    name: ClassVar[str]
    title: ClassVar[str]
    path: ClassVar[str]
    """Added to the base URL (`/chat/completions`)."""

    @abstractmethod
    def request(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str,
    ) -> dict[str, Any]:
        """The body of a request for a whole answer. `tool_choice`: `auto`, `none`, `required` or
        `function:<name>`."""

    def settings(self, effort: str | None, text_format: dict[str, Any] | None) -> dict[str, Any]:
        """A reasoning effort and a Responses text format as this protocol's body fields (a plain
        text format is the default: not sent), added to `request`'s body. A protocol that has
        neither sends nothing."""
        return {}

    @abstractmethod
    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` (from `request`) asking for a streamed answer."""

    @abstractmethod
    def answer(self, data: Any) -> Answer:
        """A whole answer, from its decoded JSON (`reading.decode`: any JSON value)."""

    @abstractmethod
    async def stream(self, events: AsyncIterator[bytes], on_delta: Delta | None) -> Answer:
        """A streamed answer, from the data of its server-sent events as they arrive
        (`reading.events`, not yet decoded): `on_delta(kind, text)` gets each piece of text and
        reasoning as it comes."""


def json_schema_of(text_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """A text format that asks for a JSON schema, or None (plain text: the default)."""
    return text_format if text_format is not None and text_format.get("type") == "json_schema" else None


def words(value: Any) -> str:
    """What an upstream's failure says, as text: a string as it is, any other value (a list, an
    object) as its JSON, not as Python writes it (`['a', 'b']`)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def snippet(text: str) -> str:
    """The start of an upstream's text, for a message: whitespace folded, at most 300 characters."""
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."
