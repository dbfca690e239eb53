"""Large bodies are parsed and validated `AT_ONCE` at a time on one server; the others wait their
turn on the event loop (not in a worker thread, which other requests need).

Before, nothing bounded it: three 15.6 MB bodies at once took the server from 1.33 to 2.34 GB.
Nothing is timed: each parse of a large body is held until the test lets it go, and the test
sees how many are parsing at once when one more waits for its turn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.api import bodies
from ptc_emulator.emulator import jsonpieces
from ptc_emulator.testing.server import EmulatorServer

ARRAYS = 300_000  # 1.5 MB: over `LARGE_BYTES`


class Parsing:
    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.changed = threading.Condition()
        self.release = threading.Event()


def _waiting(server: EmulatorServer) -> int:
    assert server.loop is not None
    turn = bodies._turns.get(server.loop)
    return len(turn._waiters or ()) if turn is not None else 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("over", ["http", "socket"])
def test_large_bodies_are_parsed_a_few_at_a_time(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch, over: str
) -> None:
    server = make_server()
    parsing = Parsing()
    loads = jsonpieces.loads

    def held(text: str) -> Any:
        if len(text) < bodies.LARGE_BYTES:
            return loads(text)
        with parsing.changed:
            parsing.inside += 1
            parsing.most = max(parsing.most, parsing.inside)
            parsing.changed.notify_all()
        try:
            assert parsing.release.wait(120), "never released"
            return loads(text)
        finally:
            with parsing.changed:
                parsing.inside -= 1

    monkeypatch.setattr(jsonpieces, "loads", held)
    body = {"model": "m", "input": "hi", "store": False, "x": [[0]] * ARRAYS}

    def send() -> str:
        if over == "http":
            with httpx.Client(base_url=server.base_url, timeout=300) as client:
                return str(client.post("/responses", json=body).json()["error"]["param"])
        with websockets.sync.client.connect(
            f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
        ) as ws:
            ws.send(json.dumps({"type": "response.create", **body}))
            return str(json.loads(ws.recv(timeout=300))["error"]["param"])

    with ThreadPoolExecutor(bodies.AT_ONCE + 1) as pool:
        sent = [pool.submit(send) for _ in range(bodies.AT_ONCE + 1)]
        with parsing.changed:
            # Either one more body than may be parsed at once waits for its turn, or it is parsed too
            # (the turn's waiters are looked at again every few milliseconds: no notice comes of them).
            for _ in range(12_000):
                if parsing.inside > bodies.AT_ONCE or (parsing.inside == bodies.AT_ONCE and _waiting(server)):
                    break
                parsing.changed.wait(0.01)
            else:
                pytest.fail("the bodies never reached their parse")
            assert parsing.inside == bodies.AT_ONCE
        parsing.release.set()
        assert [s.result(timeout=300) for s in sent] == ["x"] * (bodies.AT_ONCE + 1)
    assert parsing.most == bodies.AT_ONCE
