"""The model upstream's two protocols: OpenAI-compatible Chat Completions (`/chat/completions`,
streamed with `stream_options.include_usage`, as Ollama, vLLM, llama.cpp's server, LM Studio and
LiteLLM serve it) and Responses (`/responses`, `store: false`).

Both take the same transcript (`transcript.Entry`) and functions (`teach.Function`) and give an
`Answer`: the text, the tool calls, any reasoning, the token counts. Both are asked to stream
(Chat Completions `delta.content` chunks, Responses `response.output_text.delta` events; an
answer that comes whole instead is read whole), and `on_delta` gets the text and the reasoning
as they arrive. A connection failure, a timeout, a 429 or a 5xx is retried a bounded number of
times, unless part of the answer already went to `on_delta`; what still fails is a
`StatusError` in the OpenAI envelope (502 `upstream_error`, 504 `upstream_timeout`). The key is
sent only in the `Authorization` header and appears in no message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ptc_emulator.emulator.errors import StatusError
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = ["Answer", "ToolCall", "UpstreamClient", "UpstreamConfig"]


@dataclass(frozen=True)
class UpstreamConfig:
    url: str
    """The base URL (say http://127.0.0.1:11434/v1): `/chat/completions` or `/responses` is added."""
    model: str | None = None
    """The model id sent upstream; None: the request's `model`."""
    api: Literal["chat", "responses"] = "chat"
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    """One upstream request, whole."""
    retries: int = 2
    """Further attempts after a connection failure, a timeout, a 429 or a 5xx."""
    stream: bool = True
    """Ask for a streamed answer (Chat Completions: chunks, the usage in the last one; Responses:
    its events)."""

    @property
    def label(self) -> str:
        return self.model or "upstream"


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


class _Retry(Exception):
    def __init__(self, error: StatusError) -> None:
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
        for as each protocol spells them (`settings`)."""
        model = self.config.model or model
        extra = _settings(self.config.api, effort, text_format)
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
                    if self.config.api == "responses":
                        return await self._responses(
                            model, instructions, transcript, functions, tool_choice, feed, extra
                        )
                    return await self._chat(model, instructions, transcript, functions, tool_choice, feed, extra)
            except TimeoutError:
                if attempt >= self.config.retries or passed:
                    raise _timeout(self.config) from None
            except _Retry as e:
                if attempt >= self.config.retries or passed:  # what was passed on cannot be taken back
                    raise e.error from None
            attempt += 1
            await asyncio.sleep(min(0.1 * 2**attempt, 2.0))

    async def _post(self, path: str, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        url = self.config.url.rstrip("/") + path
        try:
            request = self._http.build_request("POST", url, json=body, headers=self._headers())
            response = await self._http.send(request, stream=stream)
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(_error(f"The model upstream at {url} could not be reached ({type(e).__name__}).")) from None
        if response.status_code >= 400:
            text = (await response.aread()).decode("utf-8", "replace")
            await response.aclose()
            if self.config.api_key:  # an upstream that echoes the request's headers
                text = text.replace(self.config.api_key, "[redacted]")
            error = _error(f"The model upstream at {url} answered {response.status_code}: {_snippet(text)}")
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retry(error)
            raise error
        return response

    # ---- Chat Completions -----------------------------------------------------------------------

    async def _chat(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        choice: str,
        on_delta: Delta | None,
        extra: dict[str, Any],
    ) -> Answer:
        body: dict[str, Any] = {"model": model, "messages": chat_messages(instructions, transcript), **extra}
        if functions:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
                }
                for f in functions
            ]
            name = choice.removeprefix("function:")
            body["tool_choice"] = {"type": "function", "function": {"name": name}} if name != choice else choice
        if not self.config.stream:
            response = await self._post("/chat/completions", body, stream=False)
            return _shaped(_chat_answer, _json(response, self.config), self.config)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        response = await self._post("/chat/completions", body, stream=True)
        return await self._streamed(response, _chat_answer, lambda: _chat_stream(response, self.config, on_delta))

    async def _streamed(
        self,
        response: httpx.Response,
        parse: Callable[[dict[str, Any]], Answer],
        read: Callable[[], Awaitable[Answer]],
    ) -> Answer:
        """`read()` of a streamed answer, or `parse` of one that came whole (a server that does
        not stream); the 502 for a stream of an unknown shape, a retry for one that broke off."""
        try:
            if "json" in response.headers.get("content-type", ""):
                await response.aread()
                return _shaped(parse, _json(response, self.config), self.config)
            return await read()
        except (TypeError, AttributeError, KeyError, ValueError):
            raise _error(f"The model upstream at {self.config.url} streamed chunks of an unknown shape.") from None
        except httpx.TimeoutException:
            raise _Retry(_timeout(self.config)) from None
        except httpx.HTTPError as e:
            raise _Retry(_error(f"The model upstream's stream broke off ({type(e).__name__}).")) from None
        finally:
            await response.aclose()

    # ---- Responses ------------------------------------------------------------------------------

    async def _responses(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        choice: str,
        on_delta: Delta | None,
        extra: dict[str, Any],
    ) -> Answer:
        body: dict[str, Any] = {"model": model, "input": responses_input(transcript), "store": False, **extra}
        if instructions:
            body["instructions"] = instructions
        if functions:
            body["tools"] = [
                {"type": "function", "name": f.name, "description": f.description, "parameters": f.parameters}
                for f in functions
            ]
            name = choice.removeprefix("function:")
            body["tool_choice"] = {"type": "function", "name": name} if name != choice else choice
        if not self.config.stream:
            response = await self._post("/responses", body, stream=False)
            return _shaped(_responses_answer, _json(response, self.config), self.config)
        body["stream"] = True
        response = await self._post("/responses", body, stream=True)
        return await self._streamed(
            response, _responses_answer, lambda: _responses_stream(response, self.config, on_delta)
        )


def _settings(api: str, effort: str | None, text_format: dict[str, Any] | None) -> dict[str, Any]:
    """A reasoning effort and a text format as the protocol's body fields: Chat Completions'
    `reasoning_effort` and `response_format` (`{type: json_schema, json_schema: {name, schema,
    ...}}`), or Responses' `reasoning` and `text`. A plain text format is the default: not sent."""
    fields: dict[str, Any] = {}
    schema = text_format if text_format is not None and text_format.get("type") == "json_schema" else None
    if api == "responses":
        if effort is not None:
            fields["reasoning"] = {"effort": effort}
        if schema is not None:
            fields["text"] = {"format": schema}
        return fields
    if effort is not None:
        fields["reasoning_effort"] = effort
    if schema is not None:
        fields["response_format"] = {
            "type": "json_schema",
            "json_schema": {k: v for k, v in schema.items() if k != "type"},
        }
    return fields


def _function(f: Function) -> dict[str, Any]:
    return {"name": f.name, "description": f.description, "parameters": f.parameters}


def chat_messages(instructions: str | None, transcript: list[Entry]) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages: a call joins the assistant message before it."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for entry in transcript:
        if entry.kind == "message":
            messages.append({"role": entry.role, "content": entry.text})
        elif entry.kind == "call":
            call = {"id": entry.call_id, "type": "function", "function": {"name": entry.name, "arguments": entry.text}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                if last.get("content") == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": entry.call_id, "content": entry.text})
    return messages


def responses_input(transcript: list[Entry]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in transcript:
        if entry.kind == "message":
            found.append({"type": "message", "role": entry.role, "content": entry.text})
        elif entry.kind == "call":
            found.append(
                {"type": "function_call", "call_id": entry.call_id, "name": entry.name, "arguments": entry.text}
            )
        else:
            found.append({"type": "function_call_output", "call_id": entry.call_id, "output": entry.text})
    return found


def _json(response: httpx.Response, config: UpstreamConfig) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise _error(f"The model upstream at {config.url} answered something that is not JSON.") from None
    if not isinstance(data, dict):
        raise _error(f"The model upstream at {config.url} answered JSON that is not an object.")
    return data


def _shaped(parse: Callable[[dict[str, Any]], Answer], data: dict[str, Any], config: UpstreamConfig) -> Answer:
    """`parse(data)`, or the 502 for an answer of a shape the protocol does not have."""
    try:
        return parse(data)
    except (TypeError, AttributeError, KeyError, ValueError):
        raise _error(f"The model upstream at {config.url} answered JSON of an unknown shape.") from None


def _chat_answer(data: dict[str, Any]) -> Answer:
    choices = data.get("choices") or []
    message = (choices[0] or {}).get("message") or {} if choices else {}
    answer = Answer(text=message.get("content") or "", model=data.get("model"))
    answer.reasoning = message.get("reasoning_content") or message.get("reasoning") or None
    for n, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        answer.calls.append(
            ToolCall(
                str(call.get("id") or f"call_{n}"),
                str(function.get("name") or ""),
                _arguments(function.get("arguments")),
            )
        )
    _usage(answer, data.get("usage"))
    return answer


async def _chat_stream(response: httpx.Response, config: UpstreamConfig, on_delta: Delta | None = None) -> Answer:
    answer = Answer()
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise _error(f"The model upstream at {config.url} streamed a chunk that is not JSON.") from None
        if chunk.get("error"):  # what OpenAI-compatible servers send when they fail mid-stream
            failure = chunk["error"]
            message = failure.get("message") if isinstance(failure, dict) else failure
            raise _error(f"The model upstream at {config.url} failed mid-stream: {_snippet(str(message))}")
        answer.model = chunk.get("model") or answer.model
        _usage(answer, chunk.get("usage"))
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                reasoning.append(thought)
                if on_delta is not None:
                    on_delta("reasoning", thought)
            if delta.get("content"):
                text.append(delta["content"])
                if on_delta is not None:
                    on_delta("text", str(delta["content"]))
            for part in delta.get("tool_calls") or ():
                slot = calls.setdefault(int(part.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
                slot["id"] = str(part.get("id") or slot["id"])
                function = part.get("function") or {}
                slot["name"] += str(function.get("name") or "")
                slot["arguments"] += _arguments(function.get("arguments") or "")
    answer.text = "".join(text)
    answer.reasoning = "".join(reasoning) or None
    answer.calls = [
        ToolCall(slot["id"] or f"call_{index}", slot["name"], slot["arguments"])
        for index, slot in sorted(calls.items())
    ]
    return answer


async def _responses_stream(response: httpx.Response, config: UpstreamConfig, on_delta: Delta | None) -> Answer:
    """A streamed Responses answer: the text deltas as they come, a reasoning item's summary
    when it is done; the answer is the `response.completed` event's response (its output as the
    `output_item.done` events gave it, if the response comes without)."""
    done: list[dict[str, Any]] = []
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:].strip())
        except ValueError:
            raise _error(f"The model upstream at {config.url} streamed an event that is not JSON.") from None
        kind = event.get("type")
        if kind == "response.output_text.delta" and on_delta is not None:
            on_delta("text", str(event.get("delta") or ""))
        elif kind == "response.output_item.done":
            done.append(event["item"])
            if event["item"].get("type") == "reasoning" and on_delta is not None:
                on_delta("reasoning", " ".join(part.get("text", "") for part in event["item"].get("summary") or ()))
        elif kind in ("response.completed", "response.incomplete"):
            final = event["response"]
            return _responses_answer(final if final.get("output") else {**final, "output": done})
        elif kind in ("response.failed", "error"):
            failure = (event.get("response") or {}).get("error") or event.get("error") or event
            message = _snippet(str(failure.get("message") or "no message"))
            raise _error(f"The model upstream at {config.url} failed mid-stream: {message}")
    raise _error(f"The model upstream at {config.url} ended its stream before the response was completed.")


def _responses_answer(data: dict[str, Any]) -> Answer:
    answer = Answer(model=data.get("model"))
    text: list[str] = []
    for item in data.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            text.extend(part.get("text", "") for part in item.get("content") or () if part.get("type") == "output_text")
        elif kind == "function_call":
            answer.calls.append(
                ToolCall(
                    str(item.get("call_id") or item.get("id") or ""),
                    str(item.get("name") or ""),
                    _arguments(item.get("arguments")),
                )
            )
        elif kind == "reasoning":
            summary = " ".join(part.get("text", "") for part in item.get("summary") or ())
            answer.reasoning = summary or answer.reasoning
    answer.text = "".join(text)
    _usage(answer, data.get("usage"))
    return answer


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def _usage(answer: Answer, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    answer.input_tokens = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
    answer.output_tokens = int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _error(message: str) -> StatusError:
    return StatusError(502, message, type="server_error", code="upstream_error")


def _timeout(config: UpstreamConfig) -> StatusError:
    return StatusError(
        504,
        f"The model upstream at {config.url} did not answer within {config.timeout_s:g} s.",
        type="server_error",
        code="upstream_timeout",
    )
