"""Helpers for the endpoint tests. Every JSON body the emulator returns to them is validated with
the official SDK's pydantic models (`model_validate`), because the SDK's own parsing is lenient
and would hide a missing required field."""

from __future__ import annotations

import contextlib
import functools
import json
import typing
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
from openai.types.responses import CompactedResponse, Response, ResponseItem
from openai.types.responses.input_token_count_response import InputTokenCountResponse
from pydantic import TypeAdapter

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import PTCEmulator


@functools.cache
def adapter(kind: Any) -> TypeAdapter[Any]:
    """pydantic's `TypeAdapter(kind)`, built once and only when first used: building one of the
    SDK's item unions takes tens of milliseconds, which a test session that never validates such
    an item should not pay at collection."""
    return TypeAdapter(kind)


validated: list[str] = []
"""Paths whose bodies were validated in this session (a test checks the hook really ran)."""


def validate_body(method: str, path: str, status: int, body: Any) -> None:
    """Strict SDK validation of a Responses API body, by endpoint."""
    if status >= 400:
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}, body
        assert isinstance(error["message"], str) and isinstance(error["type"], str)
        return
    if path.endswith("/input_items"):
        assert body["object"] == "list" and isinstance(body["has_more"], bool)
        for item in body["data"]:
            adapter(ResponseItem).validate_python(item)
    elif path.endswith("/input_tokens"):
        InputTokenCountResponse.model_validate(body)
    elif path.endswith("/responses/compact"):
        validate_compacted(body)
    elif "/v1/agents" in path or "/v1/models" in path:
        validate_resource(method, path, body)
    elif method == "DELETE" and "/conversations/" in path and "/items/" in path:
        assert body["object"] == "conversation"  # an item's deletion answers with its conversation
    elif method == "DELETE":
        assert body["deleted"] is True
    elif "/responses" in path:
        Response.model_validate(body)
    validated.append(path)


def validate_resource(method: str, path: str, body: Any) -> None:
    """An Agents API or Models API body, by path, with the installed SDK's models."""
    from openai.types import Model
    from openai.types.beta.agent import Agent
    from openai.types.beta.agent_session import AgentSession
    from openai.types.beta.agent_session_item import AgentSessionItem
    from openai.types.beta.agents.sessions.turn import Turn

    def session(data: Any) -> None:
        AgentSession.model_validate(for_installed_sdk(data))

    item = adapter(AgentSessionItem).validate_python
    parts = path.split("/v1/", 1)[1].split("/")
    if parts[0] == "models":
        one: Callable[[Any], Any] = Model.model_validate
    elif parts[:2] != ["agents", "sessions"]:
        one = Agent.model_validate
    elif len(parts) <= 3:
        one = session
    elif parts[-1] == "items":
        one = item
    elif parts[3] == "turns":
        one = Turn.model_validate
    else:
        raise AssertionError(f"no SDK model is known here for {method} {path}")
    collection = parts[-1] in ("models", "agents", "sessions", "items", "turns")
    if method == "DELETE":
        assert body["deleted"] is True and body["id"] == parts[-1], body
    elif method == "GET" and collection:
        assert body["object"] == "list" and isinstance(body.get("has_more", False), bool), body
        for row in body["data"]:
            one(row)
    else:
        one(body)


def _older_spend_control() -> bool:
    """Whether the installed SDK's `SpendControl` is the one before openai 3.60: `limit` required,
    and "unlimited sessions omit this object" (3.51). openai 3.60 made `spend_control` required,
    its limit null for an unlimited session: the newest types win, so the emulator sends that."""
    from openai.types.beta.agent_session import AgentSession

    field = AgentSession.model_fields.get("spend_control")
    if field is None or field.is_required():
        return False
    spend = next(a for a in typing.get_args(field.annotation) if a is not type(None))
    return bool(spend.model_fields["limit"].is_required())


def for_installed_sdk(data: Any) -> Any:
    """An Agents API body as the installed SDK's models take it: under an SDK of the older spend
    control (`_older_spend_control`), every unlimited session's `spend_control` (null limit) is
    left out, as such an SDK expects of an unlimited session; nothing else changes."""
    if not _older_spend_control():
        return data

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items()}
        if node.get("object") == "agent.session" and (node.get("spend_control") or {}).get("limit") is None:
            out.pop("spend_control", None)
        return out

    return walk(data)


def validate_compacted(body: Any) -> None:
    """A `CompactedResponse`: its user messages are `ResponseOutputMessage`s with user-style
    content (the SDK's docstring and the Agents SDK say so, though the model's `role` literal is
    "assistant"), checked by hand; everything else with the SDK's models."""
    users = [i for i in body["output"] if i.get("type") == "message" and i.get("role") == "user"]
    for item in users:
        assert set(item) == {"id", "type", "role", "status", "content"}, item
        assert all(part["type"].startswith("input_") for part in item["content"]), item
    CompactedResponse.model_validate({**body, "output": [i for i in body["output"] if i not in users]})


ClientVersion = Callable[[str, str], None]
"""The `client_version` fixture (tests/conftest.py): `client_version("openai-python", openai.__version__)`."""

Validate = Callable[[str, str, int, Any], None]


def validating_hooks(validate: Validate) -> tuple[Callable[[httpx.Response], None], Any]:
    """httpx response hooks (sync, async) that pass every JSON body to `validate`."""

    def hook(response: httpx.Response) -> None:
        if "application/json" in response.headers.get("content-type", ""):
            response.read()
            validate(response.request.method, response.request.url.path, response.status_code, response.json())

    async def ahook(response: httpx.Response) -> None:
        if "application/json" in response.headers.get("content-type", ""):
            await response.aread()
            validate(response.request.method, response.request.url.path, response.status_code, response.json())

    return hook, ahook


_hook, _ahook = validating_hooks(validate_body)


def validating_client(emulator: PTCEmulator, **options: Any) -> openai.OpenAI:
    http = httpx.Client(event_hooks={"response": [_hook]}, timeout=60)
    client: openai.OpenAI = emulator.client(http_client=http, **options)
    return client


@contextlib.asynccontextmanager
async def in_process_http(
    settings: Settings, base_url: str = "http://127.0.0.1"
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The app in this process through httpx's ASGI transport (no socket), lifespan included:
    a raw client that validates every response, and the app (for its state). The admin API
    answers only a loopback `base_url`."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url=base_url, event_hooks={"response": [_ahook]}, timeout=60
        ) as http:
            yield http, app


@contextlib.asynccontextmanager
async def in_process(settings: Settings) -> AsyncIterator[openai.AsyncOpenAI]:
    """The app in this process, as `in_process_http`, through the SDK's async client."""
    async with in_process_http(settings) as (http, _):
        yield openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="sk-test", http_client=http, max_retries=0)


ADD_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "add",
    "description": "a + b",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "allowed_callers": ["programmatic"],
}
"""A strict, program-only `add` tool: what the load tests and the benchmarks call."""

PTC_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"], "parameters": None, "strict": None},
    {"type": "function", "name": "echo", "allowed_callers": ["programmatic", "direct"]},
    {"type": "function", "name": "lookup", "allowed_callers": ["direct"]},
    {"type": "programmatic_tool_calling"},
]


def js(code: str) -> str:
    """A user message that runs `code` inline."""
    return f"Run this:\n```js\n{code}\n```"


def answer_all(response: Any, handler: Any) -> list[dict[str, Any]]:
    """function_call_output items for every function call in `response`, caller copied."""
    outputs = []
    for item in response.output:
        if item.type == "function_call":
            result = handler(item.name, json.loads(item.arguments))
            outputs.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": result if isinstance(result, str) else json.dumps(result),
                    "caller": item.caller.model_dump() if item.caller else None,
                }
            )
    return outputs


def add_answers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `function_call_output` items that answer every `add` call in a response's output (as
    dicts), caller copied."""
    return [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": json.dumps(sum(json.loads(item["arguments"]).values())),
            "caller": item["caller"],
        }
        for item in output
        if item["type"] == "function_call"
    ]


def arithmetic(name: str, args: dict[str, Any]) -> Any:
    if name == "add":
        return args["a"] + args["b"]
    return args


def runner_model(emulator: PTCEmulator) -> Any:
    """The Agents SDK's `OpenAIResponsesModel` on the emulator, with no pooled connections: the
    Runner may run on an event loop of its own (`run_sync`), which closes before a test could
    close a pooled connection. (The SDK is imported here, not at the top: most tests never need it.)"""
    from agents import OpenAIResponsesModel

    http = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), timeout=60)
    client = emulator.async_client(max_retries=0, http_client=http)
    return OpenAIResponsesModel(model="gpt-6-astra", openai_client=client)
