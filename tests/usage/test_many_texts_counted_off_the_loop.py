"""Texts that are long together are counted in a worker thread, not only a text that is long alone.

A request of many texts each just under the tokenizer's piece (65,536 characters), or one tool whose
definition is long only as a whole (many property descriptions), was counted on the event loop:
236 texts of 65,535 characters held every other client 1-3.5 s, a tool of 250 descriptions of
60,000 characters 4-7 s. Here the tokenizer is wrapped to note every text of the test's marker it
encodes while an event loop runs in its thread; on every route that counts (create, streamed
create, a continuation, input_tokens, compact, a WebSocket create) none may be. Before, each of
them encoded the marked texts on the loop. Nothing is timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import program_message
from tests.usage.on_loop import Noting, noted

MARK = "\ua66e"
"""The marker character of the texts counted: no other text of the test holds it."""
TEXT = 30_000
"""Characters of each marked text: well under a piece, three of them over `usage.COUNTED_ON_LOOP`."""
CODE = program_message("text('ok')")


@pytest.fixture
def noting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Noting]:
    yield from noted(monkeypatch, MARK)


def _texts(salt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{salt}{i} " + MARK * TEXT} for i in range(3)]


def _tool(salt: str) -> dict[str, Any]:
    properties = {f"p{i}": {"type": "string", "description": f"{salt}{i} " + MARK * TEXT} for i in range(3)}
    return {"type": "function", "name": "f", "parameters": {"type": "object", "properties": properties}}


BODIES = {
    "texts": lambda salt: {"input": [*_texts(salt), {"role": "user", "content": CODE}]},
    "tool": lambda salt: {"input": CODE, "tools": [_tool(salt)]},
}


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_texts_long_together_are_counted_off_the_loop_on_every_route(
    make_server: Callable[..., EmulatorServer], noting: Noting, kind: str
) -> None:
    server = make_server()
    make = BODIES[kind]
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        made = http.post("/responses", json={"model": "m", "store": False, **make("a")})
        assert made.status_code == 200, made.text[:500]
        assert made.json()["usage"]["input_tokens"] > 3 * TEXT
        with http.stream("POST", "/responses", json={"model": "m", "stream": True, **make("b")}) as streamed:
            events = "".join(streamed.iter_text())
        assert "response.completed" in events, events[-500:]
        stored = streamed_id = json.loads(events.split("data: ", 2)[1].split("\n", 1)[0])["response"]["id"]
        follow = http.post(
            "/responses", json={"model": "m", "store": False, "previous_response_id": stored, "input": CODE}
        )
        assert follow.status_code == 200, follow.text[:500]
        counted = http.post("/responses/input_tokens", json={"model": "m", **make("c")})
        assert counted.status_code == 200, counted.text[:500]
        if kind != "tool":  # compact takes no tools
            compacted = http.post("/responses/compact", json={"model": "m", **make("d")})
            assert compacted.status_code == 200, compacted.text[:500]
    with websockets.sync.client.connect(
        f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
    ) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "store": False, **make("e")}))
        while (event := json.loads(ws.recv(timeout=120)))["type"] not in ("response.completed", "error"):
            pass
        assert event["type"] == "response.completed", str(event)[:500]
    assert streamed_id
    assert noting.on_loop == []  # before: every route encoded the marked texts on the event loop


def test_a_request_of_many_texts_is_counted_exactly(make_server: Callable[..., EmulatorServer], noting: Noting) -> None:
    server = make_server()
    texts = _texts("x")
    expected = sum(len(usage.encoding().real.encode(t["content"], disallowed_special=())) for t in texts)
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        counted = http.post("/responses/input_tokens", json={"model": "m", "input": texts})
        assert counted.status_code == 200, counted.text[:500]
    assert counted.json()["input_tokens"] == expected
