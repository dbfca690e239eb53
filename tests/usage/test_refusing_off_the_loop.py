"""A large invalid body is validated, and its 400 found, off the event loop (issue 38): health and a
small create are answered while it is validated, on every route that takes a long list, over HTTP
and over a WebSocket, and the 400 names the error it named before.

The server runs in this process, so the test holds every validation of the large body at its
start (the models' JSON check, `check_json`, which a validation of the body runs first) until it
has asked for health and a small create. Nothing is timed: before, a route's large body was
validated (again) by FastAPI on the event loop, and its 400 worded there from every item's
errors (100,000 invalid input items stalled every other client for 15.9 s); health got no answer
while that validation was held. The 400 is then the same, found from one item's errors
(`wire.stepped`).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.emulator.agents import wire as agents_wire
from ptc_emulator.emulator.wire import request as request_wire
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import others_answered_while_held

ITEMS = 100_000
HELD_ITEMS = 10_000


def _large(value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(v, list) and len(v) > HELD_ITEMS for v in value.values())


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Iterator[queue.Queue[threading.Event]]:
    """Each validation of a large body waits at its start on an event it puts here."""
    waiting: queue.Queue[threading.Event] = queue.Queue()
    released: list[threading.Event] = []

    def held(real: Callable[[Any], None]) -> Callable[[Any], None]:
        def check_json(value: Any) -> None:
            if _large(value):
                release = threading.Event()
                released.append(release)
                waiting.put(release)
                assert release.wait(120), "never released"
            real(value)

        return check_json

    monkeypatch.setattr(request_wire, "check_json", held(request_wire.check_json))
    monkeypatch.setattr(agents_wire, "check_json", held(agents_wire.check_json))
    yield waiting
    for release in released:
        release.set()


def _answered_during_every_hold(
    server: EmulatorServer, holds: queue.Queue[threading.Event], pending: Future[Any]
) -> None:
    """While the large request is pending, each time its validation is held, health and a small
    create are answered before it is let go. The body must have been held at least once."""
    held = 0
    while not (pending.done() and holds.empty()):
        try:
            release = holds.get(timeout=0.05)
        except queue.Empty:
            continue
        held += 1
        entered = threading.Event()
        entered.set()
        others_answered_while_held(server, entered, release, pending)
    assert held, "the large body's validation was never held"


def _post(
    server: EmulatorServer, path: str, body: dict[str, Any], holds: queue.Queue[threading.Event]
) -> httpx.Response:
    def big() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300, headers={"OpenAI-Beta": "agents=v1"}) as client:
            return client.post(path, json=body)

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(big)
        _answered_during_every_hold(server, holds, pending)
        return pending.result(timeout=300)


def _refused(response: httpx.Response, message: str, param: str, code: str) -> None:
    assert response.status_code == 400, response.text[:500]
    assert response.json() == {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


CONTENT = "Invalid type for 'input[0].content': expected one of a string or an array, but got an integer instead."
INVALID_INPUT = {"model": "m", "input": [{"role": "user", "content": 5}] * ITEMS}
INVALID_TOOLS = {"model": "m", "input": "hi", "tools": [{"type": "function"}] * ITEMS}


@pytest.mark.parametrize("path", ["/responses", "/responses/input_tokens"])
def test_a_large_invalid_input_is_refused_off_the_loop(
    make_server: Callable[..., EmulatorServer], holds: queue.Queue[threading.Event], path: str
) -> None:
    server = make_server()
    _refused(_post(server, path, INVALID_INPUT, holds), CONTENT, "input[0].content", "invalid_type")


def test_large_invalid_tools_are_refused_off_the_loop(
    make_server: Callable[..., EmulatorServer], holds: queue.Queue[threading.Event]
) -> None:
    server = make_server()
    response = _post(server, "/responses", INVALID_TOOLS, holds)
    _refused(response, "Missing required parameter: 'tools[0].name'.", "tools[0].name", "missing_required_parameter")


def test_large_invalid_agent_events_are_refused_off_the_loop(
    make_server: Callable[..., EmulatorServer], holds: queue.Queue[threading.Event]
) -> None:
    server = make_server()
    body = {"events": [{"type": "agent.session.input.message"}] * (ITEMS // 2)}
    response = _post(server, "/agents/sessions/sess_x/events", body, holds)
    message = "Missing required parameter: 'events[0].input'."
    _refused(response, message, "events[0].input", "missing_required_parameter")


def test_a_large_invalid_item_among_valid_ones_is_named_at_its_place(
    make_server: Callable[..., EmulatorServer], holds: queue.Queue[threading.Event]
) -> None:
    """The deepest error is named, wherever its item is: the item the stepped validation found,
    at its place in the input as sent."""
    server = make_server()
    items = [{"role": "user", "content": "hi"}] * ITEMS
    items[ITEMS - 7] = {"role": "user", "content": [{"type": "input_text", "text": 5}]}
    items[3] = {"role": "user", "content": 5}
    response = _post(server, "/responses", {"model": "m", "input": items}, holds)
    message = f"Invalid type for 'input[{ITEMS - 7}].content[0].text': expected a string, but got an integer instead."
    _refused(response, message, f"input[{ITEMS - 7}].content[0].text", "invalid_type")


def test_a_large_invalid_websocket_create_is_refused_off_the_loop(
    make_server: Callable[..., EmulatorServer], holds: queue.Queue[threading.Event]
) -> None:
    server = make_server()
    frame = json.dumps({"type": "response.create", **INVALID_TOOLS})

    def big() -> dict[str, Any]:
        with websockets.sync.client.connect(
            f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
        ) as ws:
            ws.send(frame)
            return json.loads(ws.recv(timeout=300))  # type: ignore[no-any-return]

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(big)
        _answered_during_every_hold(server, holds, pending)
        event = pending.result(timeout=300)
    assert event["type"] == "error", str(event)[:500]
    assert event["status"] == 400
    assert event["error"] == {
        "message": "Missing required parameter: 'tools[0].name'.",
        "type": "invalid_request_error",
        "param": "tools[0].name",
        "code": "missing_required_parameter",
    }
