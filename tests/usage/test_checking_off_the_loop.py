"""A long tool output, or a program call's long arguments, is checked against its tool's schema
off the event loop: a check walks every value (a megabyte of small values takes seconds), and
health and a small create are answered while it is held.

The server runs in this process, so each test holds the check on an event the test sets. Nothing
is timed: with the check on the event loop, health got no answer until the event was set (issue
38: a `store: false` replay carrying one large output, fewer than a thousand items and no stored
history, was read and checked on the loop).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.rules import checks, contract
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import program_message
from tests.usage.held import Held, while_held

PTC = {"type": "programmatic_tool_calling"}
VALUES = contract.OFF_LOOP_CHARS // 2  # a list of this many zeros is longer than OFF_LOOP_CHARS


def _tool(**schemas: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"q": {"type": "array", "items": {"type": "integer"}}}}
    return {
        "type": "function",
        "name": "lookup",
        "parameters": parameters,
        "allowed_callers": ["programmatic"],
        **schemas,
    }


def test_a_long_output_in_a_replay_is_checked_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = checks.check_output

    def check_output(tool: Any, call_id: str, output: str) -> Any:
        if len(output) >= contract.OFF_LOOP_CHARS:
            held.hold()
        return real(tool, call_id, output)

    monkeypatch.setattr(checks, "check_output", check_output)
    server = make_server()
    tools = [PTC, _tool(output_schema={"type": "array", "items": {"type": "string"}})]
    question = {"role": "user", "content": program_message("const r = await tools.lookup({q: []}); text(r.length);")}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        paused = http.post("/responses", json={"model": "m", "input": [question], "tools": tools, "store": False})
    assert paused.status_code == 200, paused.text[:500]
    body = paused.json()
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    answer = {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "caller": call["caller"],
        "output": json.dumps([0] * VALUES),  # integers where the schema wants strings
    }
    replay = {"model": "m", "input": [question, *body["output"], answer], "tools": tools, "store": False}
    reply = while_held(server, held, lambda client: client.post("/responses", json=replay))
    assert reply["output"][-1]["content"][0]["text"] == str(VALUES)


def test_a_program_calls_long_arguments_are_checked_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = contract.check_call

    def check_call(tool: Any, call: Any) -> Any:
        if len(getattr(call, "arguments", "") or "") >= contract.OFF_LOOP_CHARS:
            held.hold()
        return real(tool, call)

    monkeypatch.setattr(contract, "check_call", check_call)
    server = make_server()
    code = f"const r = await tools.lookup({{q: new Array({VALUES}).fill(0)}}); text('sent');"
    create = {"model": "m", "input": program_message(code), "tools": [PTC, _tool()]}
    reply = while_held(server, held, lambda client: client.post("/responses", json=create))
    (call,) = [item for item in reply["output"] if item["type"] == "function_call"]
    assert len(json.loads(call["arguments"])["q"]) == VALUES
