"""A large create's body is read (parsed, validated as a `CreateRequest`) off the event loop, over
HTTP and over a WebSocket: health and a small request are answered while a large one is inside its
validation.

The server runs in this process, so the test holds the large body inside `model_validate`: a
validation of an input of more than `HELD_ITEMS` items waits on an event the test sets. Nothing is
timed: before the body was read in a worker thread, the held validation held the event loop, and
health got no answer until the event was set (issue 38: 200,000 small items stalled every other
client for 11.4 s).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import websockets.sync.client

from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, long_create, others_answered_while_held, while_held

ITEMS = 100_000
HELD_ITEMS = 50_000


def _large(value: Any, *args: Any, **kwargs: Any) -> bool:
    given = value.get("input") if isinstance(value, dict) else None
    return given is not None and not isinstance(given, str) and len(given) > HELD_ITEMS


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    holder = Held()
    monkeypatch.setattr(CreateRequest, "model_validate", holder.around(CreateRequest.model_validate, when=_large))
    yield holder
    holder.release.set()


def test_health_and_a_small_request_are_answered_while_a_large_body_is_validated(
    make_server: Callable[..., EmulatorServer], held: Held
) -> None:
    server = make_server()
    items = [{"role": "user", "content": "hi"}] * ITEMS + [{"role": "user", "content": program_message("text('big')")}]
    big_body = {"model": "m", "input": items, "tools": PTC_TOOLS, "store": False}
    large = while_held(server, held, lambda client: client.post("/responses", json=big_body))
    assert large["output"][-1]["content"][0]["text"] == "big"


def test_health_and_a_small_request_are_answered_while_a_large_websocket_create_is_validated(
    make_server: Callable[..., EmulatorServer], held: Held
) -> None:
    server = make_server()
    items = [{"role": "user", "content": "hi"}] * ITEMS + [{"role": "user", "content": program_message("text('big')")}]
    frame = json.dumps({"type": "response.create", "model": "m", "input": items, "tools": PTC_TOOLS, "store": False})

    def big() -> dict[str, Any]:
        with websockets.sync.client.connect(
            f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
        ) as ws:
            ws.send(frame)
            while True:
                event = json.loads(ws.recv(timeout=300))
                if event["type"] in ("error", "response.completed", "response.failed", "response.incomplete"):
                    return event  # type: ignore[no-any-return]

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(big)
        others_answered_while_held(server, held.entered, held.release, pending)
        done = pending.result(timeout=300)
    assert done["type"] == "response.completed", str(done)[:500]
    assert done["response"]["output"][-1]["content"][0]["text"] == "big"


def test_a_long_bodys_chunks_are_joined_off_the_loop(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long body's chunks are joined in a worker thread (`bodies._joined`); on the code before,
    Starlette joined them on the event loop (7 MB: 3-4 ms), and there was no such step to hold."""
    from ptc_emulator.api import bodies

    holder = Held()
    monkeypatch.setattr(
        bodies,
        "_joined",
        holder.around(bodies._joined, when=lambda chunks: sum(map(len, chunks)) >= bodies.OFF_LOOP_BYTES),
    )
    server = make_server()
    body = long_create("x" * 100_000)
    try:
        done = while_held(server, holder, lambda client: client.post("/responses", json=body))
    finally:
        holder.release.set()
    assert done["output"][-1]["content"][0]["text"] == "ok"
