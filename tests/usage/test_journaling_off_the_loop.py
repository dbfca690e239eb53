"""A long create over a WebSocket is journaled as its JSON text, made a piece at a time in the
worker thread that validates it, not dumped from its validated request on the event loop when it
finishes (issue 38: 200,000 items held every client a second). Health and a small create are
answered while the making is held; the journal shows the request as sent.

The server runs in this process, so the test holds the making on an event it sets (the body's
text being made). Nothing is timed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, while_held

ITEMS = 3 * jsonpieces.PIECE


class _Sent:
    """What `while_held` reads of an answer: the socket's finished response, as an HTTP reply."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.status_code = 200 if event["type"] == "response.completed" else 500
        self.text = json.dumps(event)

    def json(self) -> Any:
        return json.loads(self.text)


def _long_create_over_a_socket(server: EmulatorServer) -> _Sent:
    items: list[dict[str, Any]] = [{"role": "user", "content": f"hi {n}"} for n in range(ITEMS)]
    items.append({"role": "user", "content": program_message("text('long')")})
    frame = {"type": "response.create", "model": "m", "tools": PTC_TOOLS, "input": items}
    with connect(server.base_url.replace("http://", "ws://") + "/responses", max_size=None) as ws:
        ws.send(json.dumps(frame))
        while True:
            event = json.loads(ws.recv(timeout=300))
            if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
                return _Sent(event)


def test_a_long_socket_create_is_journaled_as_its_text(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    held = Held()
    dumps = jsonpieces.dumps

    def holding(value: Any, **options: Any) -> str:
        if isinstance(value, dict) and len(value.get("input") or ()) > ITEMS:
            held.hold()
        return dumps(value, **options)

    monkeypatch.setattr(jsonpieces, "dumps", holding)
    try:
        done = while_held(server, held, lambda _client: _long_create_over_a_socket(server))  # type: ignore[arg-type,return-value]
    finally:
        held.release.set()
    assert done["response"]["output"][-1]["content"][0]["text"] == "long"
    journal = httpx.get(server.base_url.removesuffix("/v1") + "/_emulator/journal", timeout=60).json()["data"]
    kept = next(e for e in journal if e["method"] == "WS" and e["response_id"] == done["response"]["id"])
    assert len(kept["request"]["input"]) == ITEMS + 1
    assert kept["request"]["input"][0]["content"] == "hi 0"
