"""`GET /_emulator/journal` (and the figures per conversation) are made off the event loop: a full
journal is 64 MiB of bodies, and parsing, labelling and writing it out on the loop held health for
0.5-0.65 s.

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

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.journal import evaluation, grouping
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import Held, others_answered_while_held


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("journal")), store="memory", pool_size=1)
    running = EmulatorServer(settings).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("module", "name", "path"),
    [(grouping, "label", "journal"), (evaluation, "conversations", "journal/conversations")],
)
def test_the_journal_is_made_off_the_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, path: str
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        http.post("/responses", json={"model": "m", "input": "nothing matches this é"})  # one journal entry
    held = Held()
    monkeypatch.setattr(module, name, held.around(getattr(module, name)))
    root = server.base_url.removesuffix("/v1")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.get, f"{root}/_emulator/{path}", timeout=300)
        others_answered_while_held(server, held.entered, held.release, pending)
        answer = pending.result(timeout=300)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.headers["content-type"] == "application/json"
    data = answer.json()["data"]
    assert data, "the journal's entries (or their conversations) are in the answer"
    if path == "journal":
        assert any(e["request"]["input"] == "nothing matches this é" for e in data)
        assert "é".encode() in answer.content  # written as UTF-8, not escaped, as before
