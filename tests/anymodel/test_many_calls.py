"""An upstream answer of many function calls is made into call items a run at a time: the event
loop serves other clients between runs (issue 38: 60,000 calls held every client 4.4 s, 9.7 s
streamed).

Nothing is timed. While the second call is checked (on the event loop), the test sends a health
request on a raw socket and starts a callback that puts itself back on the loop each time it runs:
it runs once per turn the loop gets. By the last call it must have run about once per run of
calls; before, the calls were made in one go and it never ran meanwhile. (With one turn a run, a
health answer, which takes several turns and a hop to its own thread, is not bound to come back
within 2,048 calls: waiting for it on the loop made the test race.) Health is answered afterwards.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.model.runtime import Runtime
from ptc_emulator.emulator.model.upstream.model import CALLS_AT_ONCE
from ptc_emulator.emulator.model.upstream.protocol import MAX_CALLS
from ptc_emulator.testing.server import EmulatorServer
from tests.anymodel.anymodel_support import FakeUpstream

CALLS = MAX_CALLS  # the most one turn may make
TOOL = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}


class _Health:
    """A health request sent on a raw socket: `sent` once its bytes are written, `answered` once
    its whole answer has come back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = threading.Event()
        self.answered = threading.Event()
        self.reply = b""

    def start(self) -> None:
        threading.Thread(target=self._ask, daemon=True).start()

    def _ask(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=120) as sock:
            request = f"GET /_emulator/health HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n\r\n"
            sock.sendall(request.encode())
            self.sent.set()
            while chunk := sock.recv(65536):
                self.reply += chunk
        self.answered.set()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Counts the call items checked; `on` (a function of the count) runs at each, on the loop."""
    seen: dict[str, Any] = {"count": 0, "on": lambda n: None}
    real = Runtime.check_call

    async def check_call(self: Runtime, *args: Any, **kwargs: Any) -> None:
        seen["count"] += 1
        seen["on"](seen["count"])
        await real(self, *args, **kwargs)

    monkeypatch.setattr(Runtime, "check_call", check_call)
    yield seen


@pytest.mark.parametrize("stream", [False, True])
def test_health_is_answered_while_many_calls_are_made_into_items(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, checked: dict[str, Any], stream: bool
) -> None:
    upstream.streams = False  # one whole answer, read at once
    upstream.reply({"calls": [("f", json.dumps({"a": "x"})) for _ in range(CALLS)]})
    server = any_server()
    health = _Health(server.port)
    turns = {"now": 0, "by the last call": -1}

    def turn(loop: asyncio.AbstractEventLoop) -> None:
        turns["now"] += 1
        if turns["by the last call"] < 0:
            loop.call_soon(turn, loop)

    def on(n: int) -> None:
        if n == 2:
            health.start()
            assert health.sent.wait(60), "the health request was never sent"
            loop = asyncio.get_running_loop()
            loop.call_soon(turn, loop)
        elif n == CALLS:
            turns["by the last call"] = turns["now"]

    checked["on"] = on
    body = {"model": "m", "input": "go", "tools": [TOOL], "stream": stream}
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        response = client.post("/responses", json=body)
    assert response.status_code == 200, response.text[:500]
    assert checked["count"] == CALLS
    runs = (CALLS - 2) // CALLS_AT_ONCE
    assert turns["by the last call"] >= runs, f"the loop had {turns['by the last call']} turns in {runs} runs of calls"
    assert health.answered.wait(60), "health was never answered"
    assert health.reply.startswith(b"HTTP/1.1 200"), health.reply[:200]


@pytest.mark.parametrize("stream", [False, True])
def test_a_turn_of_more_calls_than_the_limit_is_a_502_naming_it(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, checked: dict[str, Any], stream: bool
) -> None:
    """Before, nothing bounded one turn's calls: 30,000 became 30,000 items and held every client
    for up to 2 s. None is made into an item now."""
    upstream.streams = stream
    upstream.reply({"calls": [("f", json.dumps({"a": "x"})) for _ in range(MAX_CALLS + 1)]})
    server = any_server()
    body = {"model": "m", "input": "go", "tools": [TOOL], "stream": False}
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        response = client.post("/responses", json=body)
    assert response.status_code == 502, response.text[:500]
    assert f"tool calls in one turn; at most {MAX_CALLS} are taken" in response.json()["error"]["message"]
    assert checked["count"] == 0
