"""A reasoning item's `encrypted_content` is bound to its own item id: swapping two items' contents
is refused, as the hosted API refuses content it did not issue for that item."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from openai.types.responses import Response

from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import assert_envelope

LOOKUP: dict[str, Any] = {
    "type": "function",
    "name": "lookup",
    "description": "looks a thing up",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
}
SCENARIO = {
    "name": "two-thoughts",
    "match": {"input": "^think twice$"},
    "turns": [
        {"reasoning": "first thought", "call": {"name": "lookup", "arguments": {"q": "one"}}},
        {"reasoning": "second thought", "call": {"name": "lookup", "arguments": {"q": "two"}}},
        {"message": "done"},
    ],
}
JSON = {"content-type": "application/json"}


def create(http: httpx.Client, items: list[Any]) -> httpx.Response:
    body = {"model": "m", "input": items, "tools": [LOOKUP], "store": False}
    return http.post("/responses", content=json.dumps(body), headers=JSON)


def test_swapped_encrypted_content_between_reasoning_items_is_refused(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    root = server.base_url[: -len("/v1")]
    assert httpx.post(f"{root}/_emulator/scenarios", json=SCENARIO, timeout=30).status_code == 201
    items: list[Any] = [{"type": "message", "role": "user", "content": "think twice"}]
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for _ in range(2):
            reply = create(http, items)
            assert reply.status_code == 200, reply.text[:300]
            response = Response.model_validate(reply.json())
            output = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
            calls = [item for item in output if item["type"] == "function_call"]
            items += output + [{"type": "function_call_output", "call_id": c["call_id"], "output": "ok"} for c in calls]
        reasoning = [item for item in items if item.get("type") == "reasoning"]
        assert len(reasoning) == 2 and all(r.get("encrypted_content") for r in reasoning)
        assert create(http, items).status_code == 200  # as issued: accepted
        a, b = reasoning
        a["encrypted_content"], b["encrypted_content"] = b["encrypted_content"], a["encrypted_content"]
        assert_envelope(create(http, items), 400, "could not be verified", code="invalid_encrypted_content")
