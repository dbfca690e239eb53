"""An error shows at most 256 characters of any value of the request it echoes (an id, a name, a
schema's `type` or `pattern`), and of its `param`: the catalogue fills every wording through one
place that cuts them (`messages._shown_parts`). Before, these errors echoed the value whole: a
1 MB id gave a 1 MB reply (over HTTP and in a WebSocket's `error` event)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.testing.server import EmulatorServer

LONG = "Z" * 1_000_000
CODE = 'Run this.\n```js\ntext("ok")\n```'
BASE = {"model": "m", "input": CODE}
FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "previous_response_id": ("/responses", {**BASE, "previous_response_id": LONG}),
    "conversation": ("/responses", {**BASE, "conversation": LONG}),
    "conversation.id": ("/responses", {**BASE, "conversation": {"id": LONG}}),
    "item_reference.id": ("/responses", {**BASE, "input": [{"type": "item_reference", "id": LONG}]}),
    "call_id": ("/responses", {**BASE, "input": [{"type": "function_call_output", "call_id": LONG, "output": "x"}]}),
    "tool_choice.name": (
        "/responses",
        {**BASE, "tools": [FUNCTION], "tool_choice": {"type": "function", "name": LONG}},
    ),
    "schema type": ("/responses", {**BASE, "tools": [{**FUNCTION, "parameters": {"type": LONG}}]}),
    "schema pattern": (
        "/responses",
        {
            **BASE,
            "tools": [
                {
                    **FUNCTION,
                    "strict": True,
                    "parameters": {
                        "type": "object",
                        "properties": {"a": {"type": "string", "pattern": "(" + LONG}},
                        "required": ["a"],
                        "additionalProperties": False,
                    },
                }
            ],
        },
    ),
    "input_tokens previous_response_id": ("/responses/input_tokens", {**BASE, "previous_response_id": LONG}),
    "compact previous_response_id": ("/responses/compact", {**BASE, "previous_response_id": LONG}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_error_echoing_a_long_value_shows_it_cut(make_server: Callable[..., EmulatorServer], case: str) -> None:
    server = make_server()
    path, body = CASES[case]
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        reply = http.post(path, json=body)
    assert reply.status_code in (400, 404), reply.text[:500]
    assert len(reply.content) < 2048, reply.text[:600]  # before: over 1,000,000 bytes
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Z" * 200 in error["message"] and "…" in error["message"], error["message"][:1200]


def test_a_websocket_error_echoing_a_long_id_shows_it_cut(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server()
    with websockets.sync.client.connect(
        f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
    ) as ws:
        ws.send(json.dumps({"type": "response.create", **BASE, "previous_response_id": LONG}))
        frame = ws.recv(timeout=120)
    assert len(frame) < 2048, frame[:600]
    event = json.loads(frame)
    assert event["type"] == "error", frame[:600]
    assert "…" in event["error"]["message"]
