"""The model upstream's client: the HTTP of one upstream turn, whichever protocol the upstream
speaks, and the registry of those protocols (`PROTOCOLS`), which the config, the server's settings
and the CLI's `--model-upstream-api` read their choices from.

A protocol (`protocol.UpstreamProtocol`: `chat.py`, `responses.py`) builds the request and reads
the answer; this module sends it. Every protocol is asked to stream (an answer that comes whole
instead is read whole), and `on_delta` gets the text and the reasoning as they arrive. A
connection failure, a timeout, a 429 or a 5xx is retried a bounded number of times, unless part
of the answer already went to `on_delta`; what still fails is a `StatusError` in the OpenAI
envelope (502 `upstream_error`, 504 `upstream_timeout`). The key is sent only in the
`Authorization` header and appears in no message.

Adding a protocol: a module with one `UpstreamProtocol` subclass, and a `register(...)` line below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.upstream.chat import ChatCompletions
from ptc_emulator.emulator.model.upstream.protocol import Answer, Delta, Fault, ToolCall, UpstreamProtocol, snippet
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

    def __post_init__(self) -> None:
        protocol_named(self.api)

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
        headers = {"content-type": "application/json"}
        if self.config.api_key:
            headers["authorization"] = f"Bearer {self.config.api_key}"
        return headers

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

        feed = told if on_delta is not None else None
        while True:
            try:
                async with asyncio.timeout(self.config.timeout_s):  # the whole request, a stream's chunks too
                    return await self._turn(model, instructions, transcript, functions, tool_choice, feed, extra)
            except TimeoutError:
                if attempt >= self.config.retries or passed:
                    raise _timeout(self.config) from None
            except _Retry as e:
                if attempt >= self.config.retries or passed:  # what was passed on cannot be taken back
                    raise e.error from None
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
        """One attempt: the protocol's request (with `extra`, its settings), its answer (whole or streamed)."""
        protocol = self.config.protocol
        body = {**protocol.request(model, instructions, transcript, functions, choice), **extra}
        if not self.config.stream:
            response = await self._post(protocol.path, body, stream=False)
            return _shaped(protocol.answer, _json(response, self.config), self.config)
        response = await self._post(protocol.path, protocol.streamed(body), stream=True)
        try:
            if "json" in response.headers.get("content-type", ""):  # a server that does not stream
                await response.aread()
                return _shaped(protocol.answer, _json(response, self.config), self.config)
            return await protocol.stream(response.aiter_lines(), on_delta)
        except Fault as e:
            raise messages.upstream_stream_failed(self.config.url, str(e)) from None
        except (TypeError, AttributeError, KeyError, ValueError):
            raise messages.upstream_stream_unknown_shape(self.config.url) from None
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(messages.upstream_stream_broke(type(e).__name__)) from None
        finally:
            await response.aclose()

    async def _post(self, path: str, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        url = self.config.url.rstrip("/") + path
        try:
            request = self._http.build_request("POST", url, json=body, headers=self._headers())
            response = await self._http.send(request, stream=stream)
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(messages.upstream_unreachable(url, type(e).__name__)) from None
        if response.status_code >= 400:
            text = (await response.aread()).decode("utf-8", "replace")
            await response.aclose()
            if self.config.api_key:  # an upstream that echoes the request's headers
                text = text.replace(self.config.api_key, "[redacted]")
            error = messages.upstream_answered_status(url, response.status_code, snippet(text))
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retry(error)
            raise error
        return response


def _json(response: httpx.Response, config: UpstreamConfig) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise messages.upstream_not_json(config.url) from None
    if not isinstance(data, dict):
        raise messages.upstream_not_an_object(config.url)
    return data


def _shaped(parse: Callable[[dict[str, Any]], Answer], data: dict[str, Any], config: UpstreamConfig) -> Answer:
    """`parse(data)`, or the 502 for an answer of a shape the protocol does not have."""
    try:
        return parse(data)
    except (TypeError, AttributeError, KeyError, ValueError):
        raise messages.upstream_unknown_shape(config.url) from None


def _timeout(config: UpstreamConfig) -> EmulatorError:
    return messages.upstream_timeout(config.url, config.timeout_s)
