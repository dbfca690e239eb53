"""Helpers for the streaming tests: raw SSE and WebSocket reading, and strict checks of what the
emulator sends against the official SDK's models and the stream helper's ordering rules.

Events are validated from the raw JSON with `TypeAdapter(...).validate_python(raw, strict=True)`:
the SDK's own parsing is lenient and would hide a missing or mistyped field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from openai._streaming import SSEDecoder
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.responses_server_event import ResponsesServerEvent
from pydantic import TypeAdapter

from ptc_emulator.testing.server import PTCEmulator

SLOW_WORKERS = 2
SLOW_KEEPALIVE_S = 0.1
SLOW_TIMEOUT_S = 300.0
"""The settings of the `slow` server (see conftest.py)."""

STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(ResponsesServerEvent)
TERMINAL = ("response.completed", "response.incomplete", "response.failed")

ADD_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"], "parameters": None, "strict": None},
    {"type": "programmatic_tool_calling"},
]

THREE_PAUSES = """\
const a = await tools.add({ a: 1, b: 2 });
const b = await tools.add({ a, b: 10 });
const c = await tools.add({ a: b, b: 100 });
text(`total: ${c}, héllo ✓`);"""
"""A program that pauses three times (one await after another); its answer is `THREE_PAUSES_ANSWER`."""
THREE_PAUSES_ANSWER = "total: 113, héllo ✓"


def js(code: str) -> str:
    """A user message that runs `code` inline."""
    return f"Run this:\n```js\n{code}\n```"


def add_outputs(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """function_call_output items answering every `add` call of a response, caller copied."""
    outputs = []
    for item in output:
        if item["type"] == "function_call":
            args = json.loads(item["arguments"])
            outputs.append(
                {
                    "type": "function_call_output",
                    "call_id": item["call_id"],
                    "output": str(args["a"] + args["b"]),
                    "caller": item.get("caller"),
                }
            )
    return outputs


def as_input(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items replayed as input items (output-only fields dropped)."""
    return [{k: v for k, v in item.items() if k != "created_by"} for item in output]


def run_loop(create: Callable[[list[dict[str, Any]]], dict[str, Any]], first: str) -> list[dict[str, Any]]:
    """Play a PTC loop with full replay; `create(input)` returns a response dict. All responses, in order."""
    items: list[dict[str, Any]] = [{"role": "user", "content": first}]
    responses = []
    for _ in range(10):
        response = create(items)
        responses.append(response)
        outputs = add_outputs(response["output"])
        if not outputs:
            return responses
        items = [*items, *as_input(response["output"]), *outputs]
    raise AssertionError("the loop did not end in 10 responses")


# ---- SSE --------------------------------------------------------------------------------------


def decode(raw: bytes | Iterator[bytes]) -> list[dict[str, Any]]:
    """The events of an SSE byte stream, decoded by the SDK's own decoder."""
    chunks = iter([raw]) if isinstance(raw, bytes) else raw
    return [sse.json() for sse in SSEDecoder().iter_bytes(chunks)]


def post_stream(emulator: PTCEmulator, body: dict[str, Any]) -> tuple[int, bytes]:
    """POST /v1/responses with stream=true; the status and the raw body."""
    with httpx.Client(timeout=60) as http:
        reply = http.post(
            f"{emulator.base_url}/responses",
            json={**body, "stream": True},
            headers={**emulator.headers, "Authorization": f"Bearer {emulator.api_key}"},
        )
    return reply.status_code, reply.content


def get_stream(emulator: PTCEmulator, response_id: str, starting_after: int | None = None) -> bytes:
    params: dict[str, Any] = {"stream": "true"}
    if starting_after is not None:
        params["starting_after"] = starting_after
    with httpx.Client(timeout=60) as http:
        reply = http.get(
            f"{emulator.base_url}/responses/{response_id}",
            params=params,
            headers={**emulator.headers, "Authorization": f"Bearer {emulator.api_key}"},
        )
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/event-stream")
    return reply.content


# ---- checks -----------------------------------------------------------------------------------


def check_event(raw: dict[str, Any], adapter: TypeAdapter[Any] = STREAM_EVENT) -> None:
    """Strict validation of one event, and of the Response it carries."""
    adapter.validate_python(raw, strict=True)
    if "response" in raw:
        Response.model_validate(raw["response"], strict=True)


def check_stream(events: list[dict[str, Any]], adapter: TypeAdapter[Any] = STREAM_EVENT) -> dict[str, Any]:
    """Every rule a well-formed response stream keeps; returns the final response.

    Strict SDK validation of each event; sequence numbers 0, 1, 2, ...; created first, then
    in_progress, a terminal event last; one lifecycle id; each output index added once, in
    order, deltas inside its added/done, done equal to the final output item; the deltas of
    every text and argument string join to the final string.
    """
    for event in events:
        check_event(event, adapter)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds
    assert kinds[-1] in TERMINAL and not any(k in TERMINAL for k in kinds[:-1]), kinds
    final: dict[str, Any] = events[-1]["response"]
    created = events[0]["response"]
    assert created["output"] == [] and created["usage"] is None
    assert {e["response"]["id"] for e in events if "response" in e} == {final["id"]}
    output = final["output"]
    open_index: int | None = None
    added: list[int] = []
    texts: dict[tuple[int, str, int], str] = {}
    for event in events[2:-1]:
        kind, index = event["type"], event.get("output_index")
        if kind == "response.output_item.added":
            assert open_index is None, "an item was added before the previous one was done"
            assert index == len(added), f"output_index {index} added out of order"
            added.append(index)
            open_index = index
            assert _identity(event["item"]) == _identity(output[index])
        elif kind == "response.output_item.done":
            assert index == open_index
            assert event["item"] == output[index]
            open_index = None
        else:
            assert index == open_index, f"{kind} outside its item"
            if kind.endswith(".delta"):
                key = (index, kind, _part(event))
                texts[key] = texts.get(key, "") + event["delta"]
            elif kind.endswith(".done") and not kind.endswith("part.done"):
                key = (index, kind[: -len(".done")] + ".delta", _part(event))
                field = next(f for f in ("text", "arguments", "refusal", "input", "command") if f in event)
                assert texts.get(key, "") == event[field], f"{kind}: deltas do not join to the final value"
    assert added == list(range(len(output))), "not every output item was streamed"
    return final


def _part(event: dict[str, Any]) -> int:
    """Which part of its item a delta or done event writes (content, summary, shell command)."""
    for field in ("content_index", "summary_index", "command_index"):
        if field in event:
            return int(event[field])
    return 0


def _identity(item: dict[str, Any]) -> tuple[Any, ...]:
    return (item["type"], item.get("id"), item.get("call_id"))


_ID = re.compile(r"\b(?:resp|msg|fc|call|prog|po|rs|fco|steer)_[0-9a-zA-Z]+\b")
_VOLATILE = {"created_at", "completed_at", "fingerprint", "encrypted_content"}


def normalise(value: Any, names: dict[str, str] | None = None) -> Any:
    """`value` with ids renamed in order of first appearance and timestamps blanked, so two runs
    of the same conversation compare equal exactly when they differ only in ids and times."""
    names = {} if names is None else names
    if isinstance(value, dict):
        return {k: "<volatile>" if k in _VOLATILE else normalise(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, names) for v in value]
    if isinstance(value, str):
        return _ID.sub(lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"), value)
    return value
