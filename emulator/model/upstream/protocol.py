"""What a model upstream's protocol must do, whichever API the real model speaks: build the request
(`request`, and `streamed` to ask for a stream), read a whole answer (`answer`), read a streamed
one (`stream`). `client.py` does the rest (the HTTP, the retries, the timeout, the errors in the
OpenAI envelope) and keeps the registry of protocols; `chat.py` and `responses.py` are the two
the emulator speaks.

A protocol takes the transcript (`transcript.Entry`) and the functions (`teach.Function`) the
model is offered, and gives an `Answer`: the text, the tool calls, any reasoning, the token
counts. Reading an answer of a shape the protocol does not have may raise `TypeError`,
`AttributeError`, `KeyError` or `ValueError` (the client reports the shape); a stream that says
it failed, or cannot be read, raises `Fault`.
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
    "Answer",
    "Delta",
    "Fault",
    "ToolCall",
    "UpstreamProtocol",
    "arguments",
    "json_schema_of",
    "snippet",
    "usage",
]


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


class Fault(Exception):
    """What went wrong with a stream, as the end of a sentence that begins "The model upstream at
    <url> " (`streamed a chunk that is not JSON.`): the client makes it the 502."""


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
    def answer(self, data: dict[str, Any]) -> Answer:
        """A whole answer, from its JSON object."""

    @abstractmethod
    async def stream(self, lines: AsyncIterator[str], on_delta: Delta | None) -> Answer:
        """A streamed answer, from the response's lines as they arrive (server-sent events):
        `on_delta(kind, text)` gets each piece of text and reasoning as it comes."""


def arguments(value: Any) -> str:
    """A call's arguments as JSON text (some servers send an object)."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def usage(answer: Answer, counts: Any) -> None:
    """The token counts of a `usage` object (either protocol's names) into `answer`."""
    if not isinstance(counts, dict):
        return
    answer.input_tokens = int(counts.get("prompt_tokens") or counts.get("input_tokens") or 0)
    answer.output_tokens = int(counts.get("completion_tokens") or counts.get("output_tokens") or 0)


def json_schema_of(text_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """A text format that asks for a JSON schema, or None (plain text: the default)."""
    return text_format if text_format is not None and text_format.get("type") == "json_schema" else None


def snippet(text: str) -> str:
    """The start of an upstream's text, for a message: whitespace folded, at most 300 characters."""
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."
