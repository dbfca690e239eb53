"""The inspector's listing and trace files are made off the event loop: a full journal is 64 MiB
of bodies, and parsing, grouping and writing it out on the loop held health for up to 2 s (60
entries of 1 MiB: the listing 0.4 s, trace.json 0.9 s, trace.html 2 s).

The server runs in this process, so the test holds the work on an event it sets. Nothing is
timed: with the work on the event loop, health got no answer until the event was set.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api import inspector
from ptc_emulator.api.inspector import trace
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import Held, others_answered_while_held


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("inspector")), store="memory", pool_size=1)
    running = EmulatorServer(settings).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("module", "name", "path"),
    [
        (inspector, "summarise", "conversations"),
        (inspector, "conversation", "conversations/c1"),
        (trace, "trace_json", "trace.json?test=t"),
        (trace, "trace_html", "trace.html?test=t"),
    ],
)
def test_the_inspector_works_off_the_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, path: str
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        http.post("/responses", json={"model": "m", "input": "nothing matches this"})  # one journal entry
    held = Held()
    monkeypatch.setattr(module, name, held.around(getattr(module, name)))
    root = server.base_url.removesuffix("/v1")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.get, f"{root}/_emulator/inspector/{path}", timeout=300)
        others_answered_while_held(server, held.entered, held.release, pending)
        assert pending.result(timeout=300).status_code == 200
