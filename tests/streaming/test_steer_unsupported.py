"""Steering refused where the SDK says it does not apply: "Responses bound to a conversation or
using automatic compaction do not support steering." (`response_steer_event.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import ADD_TOOLS, SERVER_EVENT, TERMINAL, THREE_PAUSES, check_event, js


def _receive(conn: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(conn.recv_bytes())
    check_event(raw, SERVER_EVENT)
    return raw


def _final(conn: Any) -> dict[str, Any]:
    while True:
        event = _receive(conn)
        if event["type"] in TERMINAL:
            return event["response"]  # type: ignore[no-any-return]
        assert event["type"] != "error", event


@pytest.mark.parametrize("binding", ["conversation", "compaction"])
def test_a_paused_response_that_cannot_be_steered_says_why(ptc_emulator: PTCEmulator, binding: str) -> None:
    client = ptc_emulator.client(max_retries=0)
    options: dict[str, Any]
    if binding == "conversation":
        options = {"conversation": client.conversations.create().id}
    else:
        options = {"context_management": [{"type": "compaction", "compact_threshold": 1_000_000}]}
    with client.responses.connect() as conn:
        conn.response.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, **options)
        paused = _final(conn)
        assert paused["output"][-1]["type"] == "function_call", "waiting on a tool: steerable otherwise"
        conn.response.steer(input="change of plan", previous_response_id=paused["id"])
        refused = _receive(conn)
    assert refused["type"] == "response.steer.failed"
    assert refused["error"]["code"] == "steering_not_supported"
    assert paused["id"] in refused["error"]["message"]
    assert ("conversation" if binding == "conversation" else "compaction") in refused["error"]["message"]
