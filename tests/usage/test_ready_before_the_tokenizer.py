"""The server is ready before its tokenizer has loaded and its checkers' modules are imported
(issue 39: the pytest plugin's first test waited for them in its setup); a request that comes
meanwhile waits for them at the edge, and is answered as it would have been after.

Nothing is timed. The tokenizer's load is held on an event the test sets: `start()` returns while
it is held (before, the start waited for it, and this test's start ran into its timeout), and a
request sent meanwhile is answered only once it is let go, with the same usage as a request sent
after. The edge's wait itself is shown on the edge alone, stepped on an event loop of the test's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import _Edge
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

BODY = {"model": "m", "input": program_message("text('counted')"), "tools": PTC_TOOLS, "store": False}


class _HeldLoad:
    """`usage.encoding`, wrapped: its first call (the server's load of the tokenizer) waits until
    `release` is set; every call notes whether the tokenizer had been let go then."""

    def __init__(self) -> None:
        self.real = usage.encoding()
        self.release = threading.Event()
        self.calls: list[bool] = []

    def __call__(self) -> Any:
        released = self.release.is_set()
        self.calls.append(released)
        if len(self.calls) == 1:
            assert self.release.wait(120), "never released"
        return self.real


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldLoad]:
    wrapper = _HeldLoad()
    monkeypatch.setattr(usage, "encoding", wrapper)
    yield wrapper
    wrapper.release.set()


class _Arrived:
    """The outermost middleware: notes that a request has reached the app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.arrived = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.arrived.set()
        await self.app(scope, receive, send)


def test_the_server_is_ready_while_its_tokenizer_loads_and_a_request_waits_for_it(
    tmp_path: Path, held: _HeldLoad
) -> None:
    server = EmulatorServer(Settings(data_dir=tmp_path / "data", pool_size=1, bundled_fixtures=False))
    arrivals: list[_Arrived] = []

    def arrived(app: Any) -> _Arrived:
        arrivals.append(_Arrived(app))
        return arrivals[-1]

    server.app.add_middleware(arrived)  # type: ignore[arg-type]
    server.start(timeout=120)
    try:
        warming = server.app.state.emulator.warming
        assert held.calls == [False] and warming is not None and not warming.done()  # ready, and still loading

        def send() -> httpx.Response:
            with httpx.Client(base_url=server.base_url, timeout=120) as http:
                return http.post("/responses", json=BODY)

        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(send)
            assert arrivals[0].arrived.wait(120), "the request never reached the app"
            held.release.set()
            early = pending.result(timeout=120)
        later = send()
    finally:
        held.release.set()
        server.stop()
    assert early.status_code == later.status_code == 200, early.text[:500]
    assert early.json()["output"][-1]["content"][0]["text"] == "counted"
    assert early.json()["usage"] == later.json()["usage"]
    assert all(held.calls[1:]), held.calls  # no count began before the tokenizer was let go


def test_the_edge_holds_a_request_until_the_warm_up_is_done(tmp_path: Path) -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    async def steps() -> None:
        state = type("State", (), {})()
        state.warming = asyncio.get_running_loop().create_future()
        edge = _Edge(app, Settings(data_dir=tmp_path), state=state)  # type: ignore[arg-type]
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/v1/models",
            "headers": [(b"host", b"127.0.0.1")],
            "server": None,
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            pass

        call = asyncio.ensure_future(edge(scope, receive, send))
        for _ in range(5):
            await asyncio.sleep(0)
        assert reached == [] and not call.done()  # held at the edge
        state.warming.set_result(None)
        await call
        assert reached == ["/v1/models"]
        await edge(scope, receive, send)  # once done, nothing is waited for
        assert reached == ["/v1/models", "/v1/models"]

    asyncio.run(steps())


def test_a_failed_warm_up_is_a_503_naming_it_on_every_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server no longer waits for the tokenizer before it is ready, so a tokenizer that cannot
    load (a broken install) is found by the requests: each, health too, is the 503
    `emulator_not_ready` naming the failure, in OpenAI's envelope (before: a bare 500)."""

    def broken() -> Any:
        raise OSError("the tokenizer's data file is missing")

    monkeypatch.setattr(usage, "encoding", broken)
    server = EmulatorServer(Settings(data_dir=tmp_path / "data", pool_size=1, bundled_fixtures=False))
    server.start(timeout=120)
    try:
        with httpx.Client(base_url=server.base_url, timeout=120) as http:
            answers = [http.post("/responses", json=BODY), http.get("/_emulator/health")]
            answers.append(http.post("/responses", json=BODY))
    finally:
        server.stop()
    for answer in answers:
        assert answer.status_code == 503, answer.text[:300]
        error = answer.json()["error"]
        assert error["code"] == "emulator_not_ready" and error["type"] == "server_error"
        assert error["message"] == (
            "The emulator could not finish starting: OSError: the tokenizer's data file is missing. "
            "Reinstall it, then restart the server."
        )
