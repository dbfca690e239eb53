"""A request that reads or makes a long conversation does that work off the event loop: reading
its input or its stored history into the conversation (`attempt`), counting its tokens
(`input_tokens`), and finishing the response (usage, body, storing). Health and a small create
are answered while the work is held.

The server runs in this process, so each test holds the large request inside that work on an
event the test sets. Nothing is timed: with the work on the event loop, health got no answer until
the event was set (issue 38: a create of 200,000 short items, its body already validated in a
worker thread, still held every other client for 5 to 11 s while its response was counted and
stored; a continuation of that chain for 9 s while the chain was read back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.model.runtime.hosted import Hosted
from ptc_emulator.emulator.model.scripted.model import MANY_SCENARIOS
from ptc_emulator.emulator.responses.engine import OFF_LOOP_ITEMS, Engine
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, while_held

ITEMS = 2 * OFF_LOOP_ITEMS


def _long_input(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi"}] * ITEMS + [{"role": "user", "content": program_message(text)}]


def test_a_long_conversations_response_is_finished_and_stored_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Engine._keep

    def keep(self: Engine, prepared: Any, response: dict[str, Any], turn: Any = None) -> None:
        if len(prepared.conversation.items) > ITEMS:
            held.hold()
        real(self, prepared, response, turn)

    monkeypatch.setattr(Engine, "_keep", keep)
    server = make_server()
    body = {"model": "m", "input": _long_input("text('big')"), "tools": PTC_TOOLS}
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "big"


def test_a_long_input_is_read_into_its_conversation_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Engine.attempt

    def attempt(self: Engine, request: Any, **options: Any) -> Any:
        if isinstance(request.input, list) and len(request.input) > ITEMS:
            held.hold()
        return real(self, request, **options)

    monkeypatch.setattr(Engine, "attempt", attempt)
    server = make_server()
    body = {"model": "m", "input": _long_input("text('big')"), "tools": PTC_TOOLS, "store": False}
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "big"


def test_a_continuation_reads_its_long_stored_chain_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        first = client.post(
            "/responses", json={"model": "m", "input": _long_input("text('first')"), "tools": PTC_TOOLS}
        )
    assert first.status_code == 200, first.text[:500]
    previous = first.json()["id"]
    real = Engine.attempt

    def attempt(self: Engine, request: Any, **options: Any) -> Any:
        if request.previous_response_id == previous:
            held.hold()
        return real(self, request, **options)

    monkeypatch.setattr(Engine, "attempt", attempt)
    body = {
        "model": "m",
        "previous_response_id": previous,
        "input": program_message("text('next')"),
        "tools": PTC_TOOLS,
    }
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "next"


def test_a_long_inputs_tokens_are_counted_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Engine.count_tokens

    def count_tokens(self: Engine, request: Any, **options: Any) -> Any:
        if isinstance(request.input, list) and len(request.input) > ITEMS:
            held.hold()
        return real(self, request, **options)

    monkeypatch.setattr(Engine, "count_tokens", count_tokens)
    server = make_server()
    body = {"model": "m", "input": _long_input("text('big')")}
    counted = while_held(server, held, lambda client: client.post("/responses/input_tokens", json=body))
    assert counted["input_tokens"] > ITEMS


def test_a_long_conversations_items_are_scanned_off_the_loop_before_the_play(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The play reads the conversation's listings and sealed results over every item (two scans,
    some 10 ms each for 200,000 items), on the event loop; they are read in a worker thread before
    it now (`Hosted.read_ahead`), and the play's reads are cache hits. On the code before there was
    no such step: the held step was never reached."""
    monkeypatch.setattr(Hosted, "read_ahead", held.around(Hosted.read_ahead))
    server = make_server()
    body = {"model": "m", "input": _long_input("text('big')"), "tools": PTC_TOOLS, "store": False}
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "big"


def test_a_request_of_a_scope_with_many_scenarios_is_planned_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matching tries a request's scenarios one by one: 3,000 added at run time held the event loop
    0.5-2.3 s on every request of their scope, whatever its size. Past `MANY_SCENARIOS` the plan
    is made in a worker thread: held there, health and a small create (of no scope) are answered."""
    real = Engine.attempt

    def attempt(self: Engine, request: Any, **options: Any) -> Any:
        if options.get("scope") == "many":
            held.hold()
        return real(self, request, **options)

    monkeypatch.setattr(Engine, "attempt", attempt)
    server = make_server()
    admin = server.base_url.removesuffix("/v1") + "/_emulator/scenarios"
    scoped = {"x-ptc-emulator-scope": "many"}
    with httpx.Client(timeout=60) as http:
        for i in range(MANY_SCENARIOS + 1):
            yaml = f"name: s{i}\nmatch: {{input: '^question {i}$'}}\nturns:\n  - message: answer {i}\n"
            assert http.post(admin, json={"yaml": yaml}, headers=scoped).status_code == 201
    body = {"model": "m", "input": f"question {MANY_SCENARIOS}"}
    done = while_held(server, held, lambda client: client.post("/responses", json=body, headers=scoped))
    assert done["output"][-1]["content"][0]["text"] == f"answer {MANY_SCENARIOS}"
