"""A tool output given as content parts is made into text off the event loop, and a scenario's turn
parses its tool outputs as JSON off the loop.

A `function_call_output` whose `output` is a list of content parts reaches a program (and a
scenario's templates) as the JSON array of its parts. 700,000 bare parts fit a 15 MB body and took
over a second to dump, on the event loop, where no other client was answered meanwhile: on a
program's resume (by `previous_response_id`, or a `store: false` replay) and in a scenario's turn
after a direct call. That turn also parsed every tool output as JSON on the loop (13 MB: seconds).

The server runs in this process: each test notes the thread every dump of a long parts list (or
every parse of a long output) runs on, and none may be the event loop's. Nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from ptc_emulator.emulator.model.scripted import player
from ptc_emulator.emulator.rules import contract
from ptc_emulator.emulator.wire import base, calls
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import program_message

PTC = {"type": "programmatic_tool_calling"}
F = {
    "type": "function",
    "name": "f",
    "parameters": {"type": "object", "properties": {}},
    "allowed_callers": ["programmatic"],
}
ORDER = {"type": "function", "name": "get_order", "parameters": {"type": "object", "properties": {}}}
PARTS = 6000
"""More parts than a program's answers (`OFF_LOOP_PARTS`) or a turn's context may hold on the loop."""
CODE = "const r = await tools.f({}); text(r.length, r[0].type, r[0].text, r[1].type);"


def _parts() -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": "a"}, *[{"type": "input_file"}] * (PARTS - 1)]


class Threads:
    """The threads a patched function ran on, for the calls `when` is true of."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.lock = threading.Lock()

    def around(self, real: Callable[..., Any], when: Callable[..., bool]) -> Callable[..., Any]:
        def noting(*args: Any, **kwargs: Any) -> Any:
            if when(*args, **kwargs):
                with self.lock:
                    self.seen.append(threading.get_ident())
            return real(*args, **kwargs)

        return noting

    def off_the_loop(self, server: EmulatorServer) -> None:
        async def ident() -> int:
            return threading.get_ident()

        assert server.loop is not None
        loop_thread = asyncio.run_coroutine_threadsafe(ident(), server.loop).result(60)
        assert self.seen, "the patched work never ran"
        on_the_loop = sum(1 for thread in self.seen if thread == loop_thread)
        assert on_the_loop == 0, f"{on_the_loop} of {len(self.seen)} runs were on the event loop"


@pytest.fixture
def dumps(monkeypatch: pytest.MonkeyPatch) -> Threads:
    """Notes every dump of a long parts list, wherever the output models look `parts_text` up."""
    threads = Threads()

    def long(output: Any) -> bool:
        return isinstance(output, list) and len(output) >= PARTS

    for module in (base, calls):
        if hasattr(module, "parts_text"):
            monkeypatch.setattr(module, "parts_text", threads.around(module.parts_text, long))
    return threads


def _answer(call: dict[str, Any], output: Any) -> dict[str, Any]:
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": output}
    if call.get("caller") is not None:
        answer["caller"] = call["caller"]
    return answer


def _call(body: dict[str, Any]) -> dict[str, Any]:
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    return call


@pytest.mark.parametrize("how", ["previous_response_id", "store_false"])
def test_a_parts_answer_is_made_into_text_off_the_loop(
    make_server: Callable[..., EmulatorServer], dumps: Threads, how: str
) -> None:
    server = make_server()
    store = how == "previous_response_id"
    question = {"role": "user", "content": program_message(CODE)}
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        paused = http.post("/responses", json={"model": "m", "input": [question], "tools": [PTC, F], "store": store})
        assert paused.status_code == 200, paused.text[:500]
        body = paused.json()
        answer = _answer(_call(body), _parts())
        if store:
            resume = {"model": "m", "previous_response_id": body["id"], "input": [answer], "tools": [PTC, F]}
        else:
            resume = {"model": "m", "input": [question, *body["output"], answer], "tools": [PTC, F], "store": False}
        reply = http.post("/responses", json=resume)
    assert reply.status_code == 200, reply.text[:500]
    # the program still receives the JSON array of the parts
    assert reply.json()["output"][-1]["content"][0]["text"] == f"{PARTS} input_text a input_file"
    dumps.off_the_loop(server)


def test_a_direct_calls_parts_output_is_made_into_text_off_the_loop(
    make_server: Callable[..., EmulatorServer], dumps: Threads
) -> None:
    server = make_server()
    turns = [{"call": {"name": "f", "arguments": {}}}, {"message": "{{ output | length }} {{ output[0].text }}"}]
    scenario = {"name": "parts", "match": {"input": "^go$"}, "turns": turns}
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        added = http.post(server.base_url.removesuffix("/v1") + "/_emulator/scenarios", json=scenario)
        assert added.status_code == 201, added.text
        first = http.post("/responses", json={"model": "m", "input": "go", "tools": [tool]})
        assert first.status_code == 200, first.text[:500]
        answer = _answer(_call(first.json()), _parts())
        resume = {"model": "m", "previous_response_id": first.json()["id"], "input": [answer], "tools": [tool]}
        reply = http.post("/responses", json=resume)
    assert reply.status_code == 200, reply.text[:500]
    # the templates still see the parts, parsed from their JSON array
    assert reply.json()["output"][-1]["content"][0]["text"] == f"{PARTS} a"
    dumps.off_the_loop(server)


def test_a_direct_calls_long_output_is_parsed_off_the_loop(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = Threads()
    monkeypatch.setattr(
        player, "_parse", threads.around(player._parse, lambda text: len(text) >= contract.OFF_LOOP_CHARS)
    )
    server = make_server(bundled_fixtures=True)
    zeros = ",".join(["0"] * contract.OFF_LOOP_CHARS)
    output = '{"order_id": "A-104", "promised_date": "May \\ud800 1", "k": [' + zeros + "]}"
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        first = http.post("/responses", json={"model": "m", "input": "Where is order A-104?", "tools": [ORDER]})
        assert first.status_code == 200, first.text[:500]
        answer = _answer(_call(first.json()), output)
        reply = http.post(
            "/responses",
            content=json.dumps(
                {"model": "m", "previous_response_id": first.json()["id"], "input": [answer], "tools": [ORDER]}
            ),
            headers={"content-type": "application/json"},
        )
    assert reply.status_code == 200, reply.text[:500]
    # the templates still see the parsed output, its lone surrogate as U+FFFD
    text = reply.json()["output"][-1]["content"][0]["text"]
    assert text.startswith("Order A-104 was promised for May \ufffd 1;"), text
    threads.off_the_loop(server)


def test_a_parts_answer_over_the_websocket_is_made_into_text_off_the_loop(
    make_server: Callable[..., EmulatorServer], dumps: Threads
) -> None:
    server = make_server()
    question = {"role": "user", "content": program_message(CODE)}

    def played(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
        ws.send(json.dumps({"type": "response.create", **frame}))
        while True:
            event = json.loads(ws.recv(timeout=120))
            if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
                assert event["type"] == "response.completed", event
                return event["response"]  # type: ignore[no-any-return]

    with connect(server.base_url.replace("http://", "ws://") + "/responses", max_size=None) as ws:
        paused = played(ws, {"model": "m", "input": [question], "tools": [PTC, F], "store": False})
        answer = _answer(_call(paused), _parts())
        replay = {"model": "m", "input": [question, *paused["output"], answer], "tools": [PTC, F], "store": False}
        reply = played(ws, replay)
    assert reply["output"][-1]["content"][0]["text"] == f"{PARTS} input_text a input_file"
    dumps.off_the_loop(server)
