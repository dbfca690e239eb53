"""A fake model upstream, scripted per test, on a free 127.0.0.1 port: Chat Completions
(`/v1/chat/completions`, plain or streamed as OpenAI-compatible servers stream it: a role chunk,
content deltas, tool-call deltas with the id and name first and the arguments in pieces, a finish
chunk, a usage chunk with no choices when `stream_options.include_usage` asks, `[DONE]`) and
Responses (`/v1/responses`).

Each request takes the next answer of the script: `say(text)`, `program(code)`, `call(name,
**arguments)`, `fail(status)`, `hold()` (the request waits until the test ends), `streamed(...)`
(text in given pieces, held back one by one by a `Gate` the test opens), or a function of the
request body that returns one. Every request body and its headers are kept. A request that asks
to stream is answered with the protocol's stream (unless `streams` is off: a server that does not
stream).

What a server that gets it wrong sends, either protocol: `raw_body(bytes)` (a whole body, as it
is), `raw_stream(*data)` (server-sent events of that data), `raw_bytes(*chunks, forever=...)`
(bytes as they are, then one chunk again and again until the client goes). The exact JSON the
fake sends for an answer, to change before sending it that way: `chat_completion`,
`chat_chunks`, `responses_object`, `responses_events`.

Also what several test files share: the seed's inventory tools, the five-pause program, and
`run_node` for the npm client's scripts in tests/node (tests/sdk/node_support.py runs them).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.sdk import node_support
from tests.sdk.node_support import NodeRun

CODE_TOOL = "run_javascript"

Answer = dict[str, Any]
Script = Answer | Callable[[dict[str, Any]], Answer]


def say(text: str) -> Answer:
    return {"text": text}


def program(code: str, text: str = "", reasoning: str = "") -> Answer:
    return {"text": text, "reasoning": reasoning, "calls": [(CODE_TOOL, json.dumps({"code": code}))]}


def call(name: str, **arguments: Any) -> Answer:
    return {"calls": [(name, json.dumps(arguments))]}


def raw_call(name: str, arguments: str) -> Answer:
    return {"calls": [(name, arguments)]}


def fail(status: int, message: str = "upstream exploded") -> Answer:
    return {"status": status, "message": message}


def hold() -> Answer:
    return {"hold": True}


@dataclass
class Gate:
    """Holds a streamed answer's text pieces back: the fake sends the first at once and each next
    one after a `release()`. A release that does not come within `timeout_s` lets the piece go
    anyway, so a test of an emulator that does not stream live fails instead of hanging."""

    timeout_s: float = 5.0
    sent: int = 0
    """The text pieces the fake has sent so far."""
    _released: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))

    def release(self) -> None:
        self._released.release()

    def wait(self) -> None:
        self._released.acquire(timeout=self.timeout_s)


def streamed(
    *pieces: str, gate: Gate | None = None, code: str | None = None, reasoning: str = "", then: str | None = None
) -> Answer:
    """A streamed answer whose text comes in these pieces (held back by `gate`), then a call of the
    code function with `code` if given. `then`: "error" ends the stream with an error (a chunk with
    `error`; a `response.failed` event) instead of its end, "break" drops the connection."""
    answer: Answer = {"text": "".join(pieces), "pieces": list(pieces), "gate": gate, "reasoning": reasoning}
    if code is not None:
        answer["calls"] = [(CODE_TOOL, json.dumps({"code": code}))]
    if then is not None:
        answer["then"] = then
    return answer


_HOLD = "<the next text piece>"
"""What `_chunks` and `_events` yield before each text piece, for `_gated` to hold it back."""


def raw_stream(*lines: str) -> Answer:
    """A streamed answer of these `data:` lines, whatever they say (either protocol)."""
    return {"raw": lines}


def raw_body(data: bytes | str, content_type: str = "application/json", code: int = 200, **headers: str) -> Answer:
    """A whole answer of these bytes, whatever they say, with this content type and status code
    (either protocol, asked to stream or not)."""
    body = data.encode() if isinstance(data, str) else data
    return {"body": body, "content_type": content_type, "headers": headers, "code": code}


def raw_bytes(*chunks: bytes, forever: bytes | None = None, content_type: str = "text/event-stream") -> Answer:
    """An answer of these bytes, sent chunk by chunk as they are; then `forever`, if given, again
    and again until the client goes (`FakeUpstream.sent` counts what went out)."""
    return {"chunks": chunks, "forever": forever, "content_type": content_type}


def stall() -> Answer:
    """A streamed answer that sends its first chunk and then nothing until the test ends."""
    return {"stall": True}


def last_result(body: dict[str, Any]) -> str:
    """The latest tool result in a request body, either protocol."""
    if "messages" in body:
        return str([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])
    return str([i for i in body["input"] if i.get("type") == "function_call_output"][-1]["output"])


def functions_of(body: dict[str, Any]) -> dict[str, str]:
    """The functions a request body offers, name -> description, either protocol."""
    tools = [t.get("function", t) for t in body.get("tools") or ()]
    return {t["name"]: t.get("description", "") for t in tools}


def called(body: dict[str, Any]) -> list[str]:
    """The names of the calls a request body replays, either protocol."""
    if "messages" in body:
        return [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    return [i["name"] for i in body["input"] if i.get("type") == "function_call"]


def echo(prefix: str = "") -> Callable[[dict[str, Any]], Answer]:
    """A final message that quotes the latest tool result."""
    return lambda body: say(prefix + last_result(body))


@dataclass
class FakeUpstream:
    url: str = ""
    script: list[Script] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    usage: tuple[int, int] = (11, 7)
    streams: bool = True
    """Answer a request that asks to stream with the protocol's stream (else as JSON, whole)."""
    sent: int = 0
    """The bytes the latest `raw_bytes` answer sent."""
    completed_output: bool = True
    """A streamed Responses answer's `response.completed` carries the output (else only its usage)."""

    def reply(self, *answers: Script) -> FakeUpstream:
        self.script.extend(answers)
        return self

    def _next(self, body: dict[str, Any]) -> Answer:
        if not self.script:
            return fail(500, "the fake upstream's script is used up")
        answer = self.script.pop(0)
        return answer(body) if callable(answer) else answer


def _chat_message(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.get("text") or None}
    if answer.get("reasoning"):
        message["reasoning_content"] = answer["reasoning"]
    calls = answer.get("calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": f"call_up_{n}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for n, (name, arguments) in enumerate(calls)
        ]
    return message


def _chat_usage(usage: tuple[int, int]) -> dict[str, int]:
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunks(answer: Answer, model: str, usage: tuple[int, int], include_usage: bool) -> Iterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    if answer.get("reasoning"):
        yield chunk({"reasoning_content": answer["reasoning"]})
    text = answer.get("text") or ""
    for piece in answer.get("pieces") or [text[start : start + 8] for start in range(0, len(text), 8)]:
        yield _HOLD
        yield chunk({"content": piece})
    calls = answer.get("calls") or []
    for n, (name, arguments) in enumerate(calls):
        yield chunk(
            {
                "tool_calls": [
                    {"index": n, "id": f"call_up_{n}", "type": "function", "function": {"name": name, "arguments": ""}}
                ]
            }
        )
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]})
    if answer.get("then") == "break":
        return
    if answer.get("then") == "error":
        yield f"data: {json.dumps({'error': {'message': 'the model crashed', 'type': 'server_error'}})}\n\n"
        yield "data: [DONE]\n\n"
        return
    yield chunk({}, "tool_calls" if calls else "stop")
    if include_usage:
        prompt, completion = usage
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [],
            "usage": _chat_usage(usage),
        }
        yield f"data: {json.dumps(body)}\n\n"
    yield "data: [DONE]\n\n"


def _events(answer: Answer, model: str, usage: tuple[int, int], with_output: bool = True) -> Iterator[str]:
    """A Responses answer as its stream events (`_HOLD` before each text piece)."""
    sequence = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> str:
        return f"data: {json.dumps({'type': kind, 'sequence_number': next(sequence), **fields})}\n\n"

    output = _responses_output(answer)
    response: dict[str, Any] = {"id": "resp_up", "object": "response", "model": model, "status": "in_progress"}
    yield event("response.created", response={**response, "output": []})
    for index, item in enumerate(output):
        if item["type"] == "message":
            yield event("response.output_item.added", output_index=index, item={**item, "content": []})
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **where, part={"type": "output_text", "text": ""})
            for piece in answer.get("pieces") or [answer["text"]]:
                yield _HOLD
                yield event("response.output_text.delta", **where, delta=piece)
            if answer.get("then") == "break":
                return
            yield event("response.output_text.done", **where, text=answer["text"])
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    if answer.get("then") == "error":
        failed = {**response, "status": "failed", "error": {"code": "server_error", "message": "the model crashed"}}
        yield event("response.failed", response=failed)
        return
    prompt, completion = usage
    counted = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}
    finished = {**response, "status": "completed", "usage": counted}
    yield event("response.completed", response={**finished, "output": output} if with_output else finished)


async def _gated(lines: Iterator[str], answer: Answer) -> AsyncIterator[str]:
    """`lines`, each text piece after the first held until the answer's gate opens; "break" drops
    the connection after them (`_chunks` and `_events` end after the text then)."""
    gate: Gate | None = answer.get("gate")
    for line in lines:
        if line != _HOLD:
            yield line
            continue
        if gate is not None:
            if gate.sent:
                await asyncio.to_thread(gate.wait)
            gate.sent += 1
    if answer.get("then") == "break":
        raise ConnectionResetError("the fake upstream dropped the connection")


def chat_completion(answer: Answer, model: str = "fake", usage: tuple[int, int] = (11, 7)) -> dict[str, Any]:
    """A whole Chat Completions answer, as the fake sends it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": _chat_message(answer), "finish_reason": "stop"}],
        "usage": _chat_usage(usage),
    }


def chat_chunks(answer: Answer, model: str = "fake", usage: tuple[int, int] = (11, 7)) -> list[dict[str, Any]]:
    """A streamed Chat Completions answer's chunks, as the fake sends them (the usage chunk last;
    `[DONE]` after them is not one)."""
    lines = _chunks(answer, model, usage, include_usage=True)
    return [json.loads(line.removeprefix("data: ")) for line in lines if line != _HOLD and "[DONE]" not in line]


def responses_object(answer: Answer, model: str = "fake", usage: tuple[int, int] = (11, 7)) -> dict[str, Any]:
    """A whole Responses answer, as the fake sends it."""
    prompt, completion = usage
    return {
        "id": "resp_up",
        "object": "response",
        "model": model,
        "status": "completed",
        "output": _responses_output(answer),
        "usage": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion},
    }


def responses_events(answer: Answer, model: str = "fake", usage: tuple[int, int] = (11, 7)) -> list[dict[str, Any]]:
    """A streamed Responses answer's events, as the fake sends them."""
    return [json.loads(line.removeprefix("data: ")) for line in _events(answer, model, usage) if line != _HOLD]


def _responses_output(answer: Answer) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if answer.get("reasoning"):
        summary = [{"type": "summary_text", "text": answer["reasoning"]}]
        output.append({"type": "reasoning", "id": "rs_up", "summary": summary})
    if answer.get("text"):
        output.append(
            {
                "type": "message",
                "id": "msg_up",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer["text"], "annotations": []}],
            }
        )
    for n, (name, arguments) in enumerate(answer.get("calls") or []):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_up_{n}",
                "call_id": f"call_up_{n}",
                "name": name,
                "arguments": arguments,
            }
        )
    return output


def _app(fake: FakeUpstream) -> Starlette:
    async def answer_of(request: Request) -> tuple[dict[str, Any], Answer | Response]:
        body = await request.json()
        fake.requests.append(body)
        fake.headers.append(dict(request.headers))
        answer = fake._next(body)
        if answer.get("hold"):
            while not fake.released.is_set():
                await asyncio.sleep(0.02)
            return body, JSONResponse({"error": {"message": "released"}}, status_code=500)
        if "status" in answer:
            error = {"error": {"message": answer["message"], "type": "server_error", "code": None}}
            return body, JSONResponse(error, status_code=answer["status"])
        return body, answer

    def raw(answer: Answer, request: Request) -> Response | None:
        """The answer of `raw_body`, `raw_stream` or `raw_bytes`, if it is one."""
        if "body" in answer:
            body, kind, code = answer["body"], answer["content_type"], answer["code"]
            return Response(body, status_code=code, media_type=kind, headers=answer["headers"])
        if "raw" in answer:
            lines = [f"data: {line}\n\n" for line in answer["raw"]]
            return StreamingResponse(iter(lines), media_type="text/event-stream")
        if "chunks" in answer:
            fake.sent = 0

            async def chunks() -> AsyncIterator[bytes]:
                for chunk in answer["chunks"]:
                    if await request.is_disconnected():
                        return
                    fake.sent += len(chunk)
                    yield chunk
                while answer["forever"] is not None and not fake.released.is_set():
                    if await request.is_disconnected():  # writes to a closed connection do not fail
                        return
                    fake.sent += len(answer["forever"])
                    yield answer["forever"]

            return StreamingResponse(chunks(), media_type=answer["content_type"])
        return None

    async def chat(request: Request) -> Response:
        body, answer = await answer_of(request)
        if isinstance(answer, Response):
            return answer
        model = body.get("model", "fake")
        raw_answer = raw(answer, request)
        if raw_answer is not None:
            return raw_answer
        if body.get("stream") and answer.get("stall"):

            async def stalled() -> Any:
                yield next(_chunks({}, model, fake.usage, False))
                while not fake.released.is_set():
                    await asyncio.sleep(0.02)

            return StreamingResponse(stalled(), media_type="text/event-stream")
        if body.get("stream") and fake.streams:
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            lines = _gated(_chunks(answer, model, fake.usage, include), answer)
            return StreamingResponse(lines, media_type="text/event-stream")
        return JSONResponse(chat_completion(answer, model, fake.usage))

    async def responses(request: Request) -> Response:
        body, answer = await answer_of(request)
        if isinstance(answer, Response):
            return answer
        raw_answer = raw(answer, request)
        if raw_answer is not None:
            return raw_answer
        model = body.get("model", "fake")
        if body.get("stream") and fake.streams:
            lines = _gated(_events(answer, model, fake.usage, fake.completed_output), answer)
            return StreamingResponse(lines, media_type="text/event-stream")
        return JSONResponse(responses_object(answer, model, fake.usage))

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
        ]
    )


@contextmanager
def fake_upstream() -> Iterator[FakeUpstream]:
    from tests.tools.mcp_servers_support import serve

    fake = FakeUpstream()
    app = _app(fake)

    async def http_only(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # nothing to start or stop
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await app(scope, receive, send)

    with serve(http_only, "/v1") as served:
        fake.url = served.url
        try:
            yield fake
        finally:
            fake.released.set()


INVENTORY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_inventory",
        "description": "Return an object with sku (string) and available_units (number).",
        "parameters": {
            "type": "object",
            "properties": {"sku": {"type": "string"}},
            "required": ["sku"],
            "additionalProperties": False,
        },
        "output_schema": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "available_units": {"type": "number"}},
            "required": ["sku", "available_units"],
            "additionalProperties": False,
        },
        "allowed_callers": ["programmatic"],
    },
    {"type": "programmatic_tool_calling"},
]

INVENTORY_CODE = """const skus = ["A-1", "B-2", "C-3"];
const rows = await Promise.all(skus.map((sku) => tools.get_inventory({ sku })));
const low = rows.filter((r) => r.available_units < 10).map((r) => r.sku);
text(JSON.stringify({ low }));"""

STOCK = {"A-1": 4, "B-2": 25, "C-3": 8}


def answer_inventory(call: Any) -> dict[str, Any]:
    args = json.loads(call.arguments)
    out = {"sku": args["sku"], "available_units": STOCK[args["sku"]]}
    return {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": json.dumps(out),
        "caller": call.caller.model_dump(),
    }


FIVE_PAUSES = """let n = 0;
for (let i = 0; i < 5; i++) {
  n = (await tools.step({ n })).next;
}
text(`n=${n}`);"""

needs_node = node_support.needs_node


def run_node(script: str, base_url: str, **env: str) -> NodeRun:
    """Run a script of tests/node with the newest npm `openai` against the emulator at `base_url`
    (it must succeed): what it printed, and the version that ran."""
    return node_support.run_node(script, {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test", **env})
