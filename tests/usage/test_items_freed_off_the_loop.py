"""A large create's items are freed off the event loop once it is answered: freeing 200,000
validated items where the request's frames end held the loop 40-150 ms (`emulator/release.py`).

The server runs in this process. The test notes in which thread each input message is freed (a
finalizer set on the message class for the test) and asserts the event loop's thread freed none
of the large request's (before, it freed them all). Nothing is timed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import release
from ptc_emulator.emulator.wire import items
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

COUNT = 2 * release.LARGE


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("release")), store="memory", pool_size=1)
    running = EmulatorServer(settings).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_large_creates_items_are_freed_off_the_loop(server: EmulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.loop is not None
    loop_thread = asyncio.run_coroutine_threadsafe(_thread_name(), server.loop).result(60)
    freed: Counter[str] = Counter()

    def noted(self: object) -> None:
        if getattr(self, "content", None) == "one of many":
            freed[threading.current_thread().name] += 1

    monkeypatch.setattr(items.Message, "__del__", noted, raising=False)
    # The replayed bodies' cache would keep these items for a request that extends them (a
    # 200,000-item body is too large for it); off, they are freed once the request is answered.
    monkeypatch.setattr(server.app.state.emulator.engine.history.bodies, "max_bytes", 0)
    body = {
        "model": "m",
        "input": [{"role": "user", "content": "one of many"}] * COUNT
        + [{"role": "user", "content": program_message("text('done')")}],
        "tools": PTC_TOOLS,
        "store": False,
    }
    answer = httpx.post(f"{server.base_url}/responses", json=body, timeout=300)
    assert answer.status_code == 200, answer.text[:500]
    deadline = time.monotonic() + 120
    while sum(freed.values()) < COUNT and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sum(freed.values()) >= COUNT, freed  # every item was freed: nothing keeps them
    assert freed[loop_thread] == 0, freed
    assert freed["ptc-emulator-release"] >= COUNT, freed


async def _thread_name() -> str:
    return threading.current_thread().name
