"""The new items on the wire as streams: SSE (every stream rule, strict SDK validation of each
event) and the WebSocket mode, where a steer waits for the answers of every client-owned kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import SERVER_EVENT, check_event, check_stream, decode, get_stream, post_stream
from tests.support import js
from tests.tools.client_kinds_support import PROGRAMMATIC, PTC

pytestmark = pytest.mark.sdk  # every event of the new items, validated with the official client's models

TOOLS: list[dict[str, Any]] = [
    {"type": "custom", "name": "shout", "allowed_callers": PROGRAMMATIC},
    {"type": "shell", "allowed_callers": PROGRAMMATIC},
    {"type": "apply_patch", "allowed_callers": PROGRAMMATIC},
    PTC,
]
CODE = """
await Promise.all([
  tools.shout("stream me please"),
  tools.shell({commands: ["echo one", "echo two"]}),
  tools.apply_patch({type: "delete_file", path: "old.md"}),
]);
"""


def test_sse_stream_of_every_client_kind_keeps_every_rule(ptc_emulator: PTCEmulator) -> None:
    status, raw = post_stream(ptc_emulator, {"model": "m", "input": js(CODE), "tools": TOOLS, "stream": True})
    assert status == 200
    events = decode(raw)
    final = check_stream(events)
    assert [i["type"] for i in final["output"]] == ["program", "custom_tool_call", "shell_call", "apply_patch_call"]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta")
    assert deltas == "stream me please"
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert added[1]["item"]["input"] == "" and added[2]["item"]["action"]["commands"] == []
    # Replayed from the store, the same events.
    assert decode(get_stream(ptc_emulator, final["id"])) == events


def test_a_steer_waits_for_the_answer_of_each_kind(ptc_emulator: PTCEmulator) -> None:
    with ptc_emulator.client(max_retries=0).responses.connect() as conn:
        conn.response.create(model="m", input=js(CODE), tools=TOOLS)  # type: ignore[arg-type]
        events = []
        while True:
            event = json.loads(conn.recv_bytes())
            check_event(event, SERVER_EVENT)
            events.append(event)
            if event["type"] == "response.completed":
                break
        first = check_stream(events, SERVER_EVENT)
        conn.response.steer(input=js("text('steered')"), previous_response_id=first["id"])
        accepted, pending = json.loads(conn.recv_bytes()), json.loads(conn.recv_bytes())
    assert accepted["type"] == "response.steer.accepted" and pending["type"] == "response.steer.pending"
    calls = first["output"][1:]
    assert pending["required_input"] == [
        {"type": "custom_tool_call_output", "call_id": calls[0]["call_id"]},
        {"type": "shell_call_output", "call_id": calls[1]["call_id"]},
        {"type": "apply_patch_call_output", "call_id": calls[2]["call_id"]},
    ]
    check_event(pending, SERVER_EVENT)
