"""The inspector's listing and trace files are made off the event loop: a full journal is 64 MiB
of bodies, and parsing, grouping and writing it out on the loop held health for up to 2 s (60
entries of 1 MiB: the listing 0.4 s, trace.json 0.9 s, trace.html 2 s).

The server runs in this process, so the test holds the work on an event it sets. Nothing is
timed: with the work on the event loop, health got no answer until the event was set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api import inspector
from ptc_emulator.api.inspector import trace
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import collector, jsonpieces
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


class _Page(str):
    """A page that records, when it is encoded, whether that ran on an event loop's thread."""

    seen: list[bool]

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        try:
            asyncio.get_running_loop()
            self.seen.append(True)
        except RuntimeError:
            self.seen.append(False)
        return str(self).encode(encoding, errors)


@pytest.mark.parametrize(("name", "path"), [("trace_html", "trace.html?test=t"), ("trace_json", "trace.json?test=t")])
def test_a_trace_is_made_with_full_collections_held_off_and_encoded_off_the_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch, name: str, path: str
) -> None:
    """A 31 MB trace page (three maximum-size conversations) held health 0.9-1.4 s in 2 runs of 6:
    made in a worker, but its millions of objects started full collections there, each walking
    them all with the interpreter held; and the page's text was encoded to bytes on the loop. It is
    now made while full collections are held off (`collector`), and encoded in the worker. Nothing
    is timed: what the page's maker saw and where its text was encoded are recorded."""
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        http.post("/responses", json={"model": "m", "input": "nothing matches this"})  # one journal entry
    made = getattr(trace, name)
    held: list[bool] = []
    on_loop: list[bool] = []

    def recording(*args: Any, **kwargs: Any) -> str:
        held.append(collector.held())
        page = _Page(made(*args, **kwargs))
        page.seen = on_loop
        return page

    monkeypatch.setattr(trace, name, recording)
    root = server.base_url.removesuffix("/v1")
    assert httpx.get(f"{root}/_emulator/inspector/{path}", timeout=300).status_code == 200
    assert held == [True]
    assert on_loop == [False]
    assert not collector.held()  # let go once answered


def test_a_long_journal_body_is_read_a_piece_at_a_time_for_a_trace(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every entry's bodies are parsed for a trace; a long one was one `json.loads`, which holds the
    interpreter (the event loop's thread too) for the whole body, 16 MiB at most. It is now read a
    piece at a time (`jsonpieces.loads`), the other threads let in between pieces: counted, not timed."""
    items = [{"type": "message", "role": "user", "content": f"turn {n}"} for n in range(8000)]
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        http.post("/responses", json={"model": "m", "input": items, "store": False})  # a body over 256 KiB
    pauses: list[int] = []
    pause = jsonpieces.between
    monkeypatch.setattr(jsonpieces, "between", lambda: (pauses.append(1), pause())[1])
    root = server.base_url.removesuffix("/v1")
    page = httpx.get(f"{root}/_emulator/inspector/trace.json?test=t", timeout=300)
    assert page.status_code == 200
    assert "turn 7999" in page.text
    assert len(pauses) >= 2
