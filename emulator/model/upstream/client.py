"""The model upstream's client: the HTTP of one upstream turn, whichever protocol the upstream
speaks, and the registry of those protocols (`PROTOCOLS`), which the config, the server's settings
and the CLI's `--model-upstream-api` read their choices from.

A protocol (`protocol.UpstreamProtocol`: `chat.py`, `responses.py`) builds the request and reads
the answer; this module sends it. Every protocol is asked to stream (an answer that comes whole
instead is read whole), and `on_delta` gets the text and the reasoning as they arrive. A
connection failure, a timeout, a 429 or a 5xx is retried a bounded number of times, unless part
of the answer already went to `on_delta`; what still fails is an `EmulatorError` in the OpenAI
envelope (502 `upstream_error`, 504 `upstream_timeout`).

The answer is untrusted input (`reading.py`): read within `max_answer_bytes` as it arrives,
decoded strictly (off the event loop when it is long), read against the protocol's shape; an
answer it cannot take is the 502 saying what is wrong with it, and so is one with neither text
nor a tool call (it would be a `completed` response with nothing in it). The key is sent only
in the `Authorization` header; the upstream's text that is passed on, and every message, has it
taken out (`redaction.py`).

Adding a protocol: a module with one `UpstreamProtocol` subclass, and a `register(...)` line below.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.upstream.chat import ChatCompletions
from ptc_emulator.emulator.model.upstream.protocol import (
    MAX_CALLS,
    Answer,
    Delta,
    Fault,
    ToolCall,
    UpstreamProtocol,
    snippet,
)
from ptc_emulator.emulator.model.upstream.reading import INLINE_BYTES, Budget, Malformed, decode, events, whole
from ptc_emulator.emulator.model.upstream.redaction import Redaction
from ptc_emulator.emulator.model.upstream.responses import Responses
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "Answer",
    "ToolCall",
    "UpstreamClient",
    "UpstreamConfig",
    "UpstreamProtocol",
    "protocol_named",
    "register",
]

PROTOCOLS: dict[str, UpstreamProtocol] = {}
"""Every protocol a model upstream may speak, by the name `--model-upstream-api` gives it."""


def register(protocol: UpstreamProtocol) -> UpstreamProtocol:
    """Add `protocol` to the choices (its name must be new)."""
    if protocol.name in PROTOCOLS:
        raise ValueError(f"an upstream protocol named {protocol.name!r} is registered already")
    PROTOCOLS[protocol.name] = protocol
    return protocol


register(ChatCompletions())
register(Responses())

DEFAULT_PROTOCOL = ChatCompletions.name


def protocol_named(name: str) -> UpstreamProtocol:
    """The registered protocol of this name; a `ValueError` naming the choices if there is none."""
    found = PROTOCOLS.get(name)
    if found is None:
        raise ValueError(f"{name!r} is not a model upstream protocol: one of {', '.join(map(repr, PROTOCOLS))}")
    return found


@dataclass(frozen=True)
class UpstreamConfig:
    url: str
    """The base URL (say http://127.0.0.1:11434/v1): the protocol's path is added."""
    model: str | None = None
    """The model id sent upstream; None: the request's `model`."""
    api: str = DEFAULT_PROTOCOL
    """The protocol (`PROTOCOLS`' name of it)."""
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    """One upstream request, whole."""
    retries: int = 2
    """Further attempts after a connection failure, a timeout, a 429 or a 5xx."""
    stream: bool = True
    """Ask for a streamed answer (Chat Completions: chunks, the usage in the last one; Responses:
    its events)."""
    max_answer_bytes: int = 8 * 2**20
    """Bytes one answer may take, whole or streamed (`--model-upstream-max-answer-bytes`)."""

    def __post_init__(self) -> None:
        protocol_named(self.api)
        if self.max_answer_bytes < 1:
            raise ValueError(f"max_answer_bytes must be at least 1, not {self.max_answer_bytes}")

    @property
    def label(self) -> str:
        return self.model or "upstream"

    @property
    def protocol(self) -> UpstreamProtocol:
        return protocol_named(self.api)


class _Retry(Exception):
    def __init__(self, error: EmulatorError) -> None:
        self.error = error


class UpstreamClient:
    def __init__(self, config: UpstreamConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._http = httpx.AsyncClient(timeout=config.timeout_s, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _headers(self) -> dict[str, str]:
        # identity: the byte budget counts what is read, and a compressed answer would be
        # unpacked past it in one step
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        if self.config.api_key:
            headers["authorization"] = f"Bearer {self.config.api_key}"
        return headers

    @property
    def _redaction(self) -> Redaction:
        return Redaction(self.config.api_key)

    async def complete(
        self,
        *,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str = "auto",
        on_delta: Delta | None = None,
        effort: str | None = None,
        text_format: dict[str, Any] | None = None,
    ) -> Answer:
        """One turn of the upstream model, retried as the module says. `tool_choice`: `auto`,
        `none`, `required` or `function:<name>`. `on_delta(kind, text)`: each piece of the
        answer's text (`kind` "text") and reasoning ("reasoning") as it arrives. `effort`, a
        reasoning effort, and `text_format`, a Responses text format (`json_schema`), are asked
        for as the protocol spells them (`UpstreamProtocol.settings`)."""
        model = self.config.model or model
        extra = self.config.protocol.settings(effort, text_format)
        attempt = 0
        passed = False

        def told(kind: str, text: str) -> None:
            nonlocal passed
            if text and on_delta is not None:
                passed = True
                on_delta(kind, text)

        while True:
            redaction = self._redaction
            feed = redaction.stream(told) if on_delta is not None else None
            try:
                async with asyncio.timeout(self.config.timeout_s):  # the whole request, a stream's chunks too
                    answer = await self._turn(model, instructions, transcript, functions, tool_choice, feed, extra)
            except TimeoutError:
                if attempt >= self.config.retries or passed:
                    raise redaction.error(_timeout(self.config)) from None
            except _Retry as e:
                if attempt >= self.config.retries or passed:  # what was passed on cannot be taken back
                    raise redaction.error(e.error) from None
            except Fault as e:
                raise redaction.error(_fault(self.config, e, redaction)) from None
            except EmulatorError as e:
                raise redaction.error(e) from None
            else:
                if feed is not None:
                    feed.flush()
                if len(answer.calls) > MAX_CALLS:  # each an item: 30,000 held every client for seconds
                    raise redaction.error(
                        _fault(self.config, Fault(messages.too_many_calls(len(answer.calls), MAX_CALLS)), redaction)
                    )
                if not answer.text.strip() and not answer.calls:  # a response with nothing in it
                    refused = answer.refusal.strip()
                    empty = (
                        Fault.quoting(messages.upstream_refused, refused)
                        if refused
                        else Fault(messages.answered_nothing())
                    )
                    raise redaction.error(_fault(self.config, empty, redaction))
                answer = redaction.answer(answer)
                nested = next((c.name for c in answer.calls if redaction.within(c.arguments)), None)
                if nested is not None:  # the key still in them, a decoding or more further down
                    raise redaction.error(_fault(self.config, Fault(messages.key_in_arguments(nested)), redaction))
                return answer
            attempt += 1
            await asyncio.sleep(min(0.1 * 2**attempt, 2.0))

    async def _turn(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        choice: str,
        on_delta: Delta | None,
        extra: dict[str, Any],
    ) -> Answer:
        """One attempt: the protocol's request (with `extra`, its settings), its answer (whole or
        streamed), read within the byte budget (`reading.py`)."""
        protocol = self.config.protocol
        body = {**protocol.request(model, instructions, transcript, functions, choice), **extra}
        response = await self._post(protocol.path, protocol.streamed(body) if self.config.stream else body)
        try:
            encoding = response.headers.get("content-encoding", "identity").strip()
            if encoding.lower() not in ("", "identity"):  # quoted as it came, the key taken out first
                raise Fault(messages.compressed(snippet(self._redaction.text(encoding))))
            kind = response.headers.get("content-type", "")
            if not _answer_type(kind):
                raise Fault(messages.not_an_answer(response.status_code, snippet(self._redaction.text(kind))))
            chunks = response.aiter_bytes()
            if self.config.stream and "json" not in kind.lower():
                budget = Budget(self.config.max_answer_bytes, "streamed")
                not_events = Fault(messages.json_not_events(response.status_code, snippet(self._redaction.text(kind))))
                return await protocol.stream(events(chunks, budget, not_events), on_delta)
            data = await whole(chunks, Budget(self.config.max_answer_bytes, "answered"))
            if len(data) <= INLINE_BYTES:  # a server that does not stream, or was asked not to
                return _whole(protocol, data)
            return await asyncio.to_thread(_whole, protocol, data)
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(messages.upstream_stream_broke(type(e).__name__)) from None
        except (TypeError, AttributeError, KeyError, IndexError, ValueError):  # a protocol that reads without a Shape
            raise Fault(messages.unreadable_shape()) from None
        finally:
            await response.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """The response to `body`, its headers read, its body not yet; an error status is the
        502 (retried when it is a 429 or a 5xx), with the start of the upstream's body."""
        url = self.config.url.rstrip("/") + path
        try:
            request = self._http.build_request("POST", url, json=body, headers=self._headers())
            response = await self._http.send(request, stream=True)
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(messages.upstream_unreachable(url, type(e).__name__)) from None
        if response.status_code >= 300:  # a redirect is not followed: it is no answer either
            encoding = response.headers.get("content-encoding", "identity").strip()
            try:
                if encoding.lower() in ("", "identity"):
                    text = await _start(response.aiter_bytes(), ERROR_BODY_BYTES)
                    said = self._redaction.text(text, cut=len(text.encode()) >= ERROR_BODY_BYTES)
                else:  # never unpacked: 64 KiB of gzip are 64 MiB
                    said = messages.compressed(snippet(self._redaction.text(encoding)))
            except httpx.HTTPError:
                said = ""
            finally:
                await response.aclose()
            error = messages.upstream_answered_status(url, response.status_code, snippet(said))
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retry(error)
            raise error
        return response


ERROR_BODY_BYTES = 64 * 1024
"""What is read of an error status's body: its start goes into the 502."""


async def _start(chunks: AsyncIterator[bytes], limit: int) -> str:
    """The first `limit` bytes of a body, as text."""
    read = bytearray()
    async for chunk in chunks:
        read += chunk[: limit - len(read)]
        if len(read) >= limit:
            break
    return read.decode("utf-8", "replace")


_ANSWER_TYPES = frozenset({"text/event-stream", "text/plain", "application/octet-stream", ""})
"""Media types an answer may come as besides JSON's (`application/json`, `+json`, `x-ndjson`):
server-sent events, and what servers that send them anyway label them; none at all is taken too."""


def _answer_type(kind: str) -> bool:
    """Whether an answer of this Content-Type is read: JSON or server-sent events (an HTML page
    read as a stream had no events in it: "ended its stream before it finished", the wrong reason)."""
    media = kind.split(";", 1)[0].strip().lower()
    return "json" in media or media in _ANSWER_TYPES


def _whole(protocol: UpstreamProtocol, data: bytes) -> Answer:
    """A whole answer, from its body."""
    try:
        value = decode(data)
    except Malformed as e:
        raise Fault(e.said(messages.answered_body())) from None
    return protocol.answer(value)


def _fault(config: UpstreamConfig, fault: Fault, redaction: Redaction) -> EmulatorError:
    """The 502 for what the upstream got wrong: its own words, if any, without the key and cut short."""
    return messages.upstream_fault(config.url, fault.said(redaction.text))


def _timeout(config: UpstreamConfig) -> EmulatorError:
    return messages.upstream_timeout(config.url, config.timeout_s)
