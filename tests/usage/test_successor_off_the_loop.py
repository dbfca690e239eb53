"""A WebSocket's automatic successor of a steered `store: false` response replays the whole
conversation; a long one's body is made and validated in a worker thread. Health and a small
create are answered while the making is held (issue 38: 200,000 items held every client 2.5 s).

The server runs in this process, so the test holds the making on an event it sets (the first
history item made into the successor's input). Nothing is timed."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from ptc_emulator.api.routes import websocket
from ptc_emulator.emulator.responses.engine import OFF_LOOP_ITEMS
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, others_answered_while_held

FINISHED = ("response.completed", "response.failed", "response.incomplete", "error")


def _steered(server: EmulatorServer) -> list[dict[str, Any]]:
    """A long `store: false` create steered while it plays: the two finished responses' events."""
    items: list[dict[str, Any]] = [{"role": "user", "content": f"hi {n}"} for n in range(OFF_LOOP_ITEMS + 10)]
    items.append({"role": "user", "content": "think slowly"})
    frame = {"type": "response.create", "model": "m", "store": False, "tools": PTC_TOOLS, "input": items}
    finished: list[dict[str, Any]] = []
    with connect(server.base_url.replace("http://", "ws://") + "/responses", max_size=None) as ws:
        ws.send(json.dumps(frame))
        while len(finished) < 2:
            event = json.loads(ws.recv(timeout=300))
            if event["type"] == "response.created" and not finished:
                steer = {"previous_response_id": event["response"]["id"], "input": program_message("text('after')")}
                ws.send(json.dumps({"type": "response.steer", **steer}))
            if event["type"] in FINISHED:
                finished.append(event)
    return finished


def test_a_long_successor_is_made_off_the_loop(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    scenario = {"match": {"input": "(?i)think slowly"}, "turns": [{"message": "slow", "fault": {"latency_ms": 300}}]}
    admin = server.base_url.removesuffix("/v1") + "/_emulator/scenarios"
    assert httpx.post(admin, json=scenario, timeout=60).status_code == 201
    held = Held()
    monkeypatch.setattr(websocket, "dump", held.around(websocket.dump))
    try:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_steered, server)
            others_answered_while_held(server, held.entered, held.release, pending)
            first, successor = pending.result(timeout=300)
    finally:
        held.release.set()
    assert first["type"] == successor["type"] == "response.completed", successor
    assert successor["response"]["output"][-1]["content"][0]["text"] == "after"
