"""Health answers while every worker thread is held (issue: with a frozen database, each request
waiting on it holds a worker thread up to the connection's deadline, and health, which checked the
database in those same threads, queued behind them: 11 s with 150 requests in flight, where 2 s
are documented).

The server runs in this process; the test holds every worker thread inside a retrieve, on an event
it sets, and asks health meanwhile. Nothing is timed: with the check in the shared threads, health
gets no answer until the release (the client's 60 s timeout ends the test instead)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import WORKER_THREADS
from ptc_emulator.emulator.responses.engine import Engine
from ptc_emulator.testing.server import EmulatorServer


def test_health_answers_while_every_worker_thread_waits(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server(store="sqlite")
    entered = threading.Semaphore(0)
    release = threading.Event()
    retrieve = Engine.retrieve

    def holding(self: Engine, *args: Any, **kwargs: Any) -> Any:
        entered.release()
        assert release.wait(120), "never released"
        return retrieve(self, *args, **kwargs)

    monkeypatch.setattr(Engine, "retrieve", holding)
    root = server.base_url.removesuffix("/v1")

    def waiting(_: int) -> int:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return client.get("/responses/resp_held").status_code

    with ThreadPoolExecutor(WORKER_THREADS + 8) as clients:
        pending = [clients.submit(waiting, n) for n in range(WORKER_THREADS + 8)]
        try:
            for _ in range(WORKER_THREADS):  # every worker thread is held
                assert entered.acquire(timeout=120), "the retrieves never filled the worker threads"
            with httpx.Client(timeout=60) as http:
                health = http.get(root + "/_emulator/health")
                again = http.get(root + "/_emulator/health")
            assert not any(p.done() for p in pending), "the retrieves should still be held"
        finally:
            release.set()
        answered = [p.result(timeout=300) for p in pending]
    assert health.status_code == 200, health.text
    assert health.json()["stored_responses"] == 0
    assert again.status_code == 200, again.text
    assert answered == [404] * len(answered)
