"""Requests with long work in worker threads do not hold the others' short hops behind them.

A store write, a long read and a large schema's check each run in a worker thread of the event
loop's default executor (`asyncio.to_thread`). asyncio's default pool is min(32, cores + 4)
threads, six on two cores: six requests each holding a thread for seconds kept every other
client's store write waiting. The test holds more threads than that default on an event (as long
work would) and asks for a stored create meanwhile; the server's own pool answers it. Nothing is
timed: the create is answered while the threads are still held, then they are let go.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.app import WORKER_THREADS
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

HELD = 16
"""More than asyncio's default pool on any machine with up to twelve cores, fewer than the server's."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("workers")), pool_size=1)
    running = EmulatorServer(settings).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_stored_create_is_answered_while_many_worker_threads_are_held(server: EmulatorServer) -> None:
    assert HELD < WORKER_THREADS
    assert server.loop is not None
    release = threading.Event()
    started = threading.Semaphore(0)

    def long_work() -> None:
        started.release()
        release.wait(300)

    async def hold() -> list[asyncio.Future[None]]:
        return [asyncio.ensure_future(asyncio.to_thread(long_work)) for _ in range(HELD)]

    held = asyncio.run_coroutine_threadsafe(hold(), server.loop).result(60)
    try:
        for _ in range(HELD):  # every held task has its own thread, running
            assert started.acquire(timeout=60)
        body = {"model": "m", "input": program_message("text('stored')"), "tools": PTC_TOOLS, "store": True}
        answer = httpx.post(f"{server.base_url}/responses", json=body, timeout=60)
        assert answer.status_code == 200, answer.text[:500]
        stored = httpx.get(f"{server.base_url}/responses/{answer.json()['id']}", timeout=60)
        assert stored.status_code == 200, stored.text[:500]
        assert not any(task.done() for task in held)  # answered while all were still held
    finally:
        release.set()
