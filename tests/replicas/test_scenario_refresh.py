"""What a replica's refresh of the shared scenarios reads and where it works: nothing but the
scenarios' version when nothing changed, the one row that changed otherwise, and no scenario
document compared or loaded on the event loop's thread.

Every refresh read, parsed and compared every stored document (with 20 scenarios of 1.5 MB,
each create and `/v1/models` took 6-8 s, and the comparison on the loop held every other client
of the replica over 1 s). These tests count and place that work instead of timing it: replica B's
scenarios part is wrapped to count the documents it hands out, each one recording the thread
that compares it, and the loading of a scenario from its document records its thread too.

Two replicas: two apps in this process on one PostgreSQL database (tests/replicas/test_concurrency.py).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.routes import admin
from ptc_emulator.api.settings import Settings
from tests.replicas.replicas_support import SECRET
from tests.support import in_process_http

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

Replica = tuple[httpx.AsyncClient, Any]
SCOPE = {"x-ptc-emulator-scope": "test-refresh"}


@pytest.fixture
async def two(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    def settings(n: int) -> Settings:
        return Settings(
            data_dir=tmp_path / f"r{n}", store=postgres_url, secret=SECRET, bundled_fixtures=False, pool_size=1
        )

    async with in_process_http(settings(0)) as first, in_process_http(settings(1)) as second:
        yield first, second


class Compared(dict[str, Any]):
    """A stored document that records the thread of each comparison made with it."""

    threads: list[int] = []  # noqa: RUF012 (one list for every instance: set afresh by a test)

    def __eq__(self, other: object) -> bool:
        Compared.threads.append(threading.get_ident())
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        Compared.threads.append(threading.get_ident())
        return dict.__ne__(self, other)

    __hash__ = None  # type: ignore[assignment]


class Watched:
    """A replica's scenarios part that counts the documents it hands out (whichever call reads
    them: `list`, `changes`), each a `Compared`."""

    def __init__(self, scenarios: Any) -> None:
        self.scenarios = scenarios
        self.documents = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scenarios, name)

    def _watched(self, kept: Any) -> Any:
        self.documents += 1
        document = Compared(kept.document) if isinstance(kept.document, dict) else kept.document
        return type(kept)(kept.scope, kept.name, document)

    def list(self) -> Any:
        return [self._watched(kept) for kept in self.scenarios.list()]

    def changes(self, *args: Any) -> Any:
        changes = self.scenarios.changes(*args)
        read = {key: self._watched(kept) for key, kept in changes.read.items()}
        return type(changes)(changes.version, changes.rows, read)


def scenario(name: str, text: str) -> dict[str, Any]:
    return {"name": name, "match": {"input": f"ask {name}"}, "turns": [{"message": text}]}


async def served(http: httpx.AsyncClient, name: str) -> httpx.Response:
    return await http.post("/v1/responses", json={"model": "m", "input": f"ask {name}"}, headers=SCOPE)


async def add(http: httpx.AsyncClient, name: str, text: str) -> None:
    assert (await http.post("/_emulator/scenarios", json=scenario(name, text), headers=SCOPE)).status_code == 201


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of each scenario loaded from a stored document."""
    threads: list[int] = []
    loaded = admin._loaded

    def recorded(kept: Any) -> Any:
        threads.append(threading.get_ident())
        return loaded(kept)

    monkeypatch.setattr(admin, "_loaded", recorded)
    return threads


async def test_a_refresh_with_nothing_changed_reads_no_scenario(two: tuple[Replica, Replica], loads: list[int]) -> None:
    """With the scenarios unchanged since B last read them, B's creates and `/v1/models` read
    no stored scenario and load none: the version alone is read."""
    (first, _), (second, second_app) = two
    for n in range(3):
        await add(first, f"s{n}", f"answer {n}")
    assert (await served(second, "s1")).status_code == 200  # B has read them
    store = second_app.state.emulator.store
    watched = store.scenarios = Watched(store.scenarios)
    loads.clear()
    try:
        for _ in range(3):
            assert (await second.get("/v1/models")).status_code == 200
        reply = await served(second, "s2")
        assert reply.status_code == 200, reply.text
        assert reply.json()["output"][0]["content"][0]["text"] == "answer 2"
    finally:
        store.scenarios = watched.scenarios
    assert watched.documents == 0, f"{watched.documents} stored scenarios read with none changed"
    assert loads == [], f"{len(loads)} scenarios loaded with none changed"


async def test_a_change_is_read_alone_and_never_compared_or_loaded_on_the_event_loop(
    two: tuple[Replica, Replica], loads: list[int]
) -> None:
    """A replaces one of three scenarios and deletes another: B's next request serves the new
    one and no longer the deleted one, having read the one changed document alone, and neither
    compared a stored document nor loaded a scenario on its event loop's thread."""
    (first, _), (second, second_app) = two
    loop_thread = threading.get_ident()  # the test's thread runs the apps' event loop
    for n in range(3):
        await add(first, f"s{n}", f"answer {n}")
    assert (await served(second, "s0")).status_code == 200  # B has read them
    store = second_app.state.emulator.store
    watched = store.scenarios = Watched(store.scenarios)
    Compared.threads = []
    loads.clear()
    try:
        # B reads documents from here on through `Watched`: one more read to hold them as those
        assert (await second.get("/v1/models")).status_code == 200
        before = watched.documents
        await add(first, "s1", "answer 1, replaced")
        assert (await first.delete("/_emulator/scenarios/s2", headers=SCOPE)).status_code == 200
        reply = await served(second, "s1")
        assert reply.status_code == 200, reply.text
        assert reply.json()["output"][0]["content"][0]["text"] == "answer 1, replaced"
        assert (await served(second, "s2")).status_code == 400, "deleted through A, still served by B"
        assert (await served(second, "s0")).json()["output"][0]["content"][0]["text"] == "answer 0"
    finally:
        store.scenarios = watched.scenarios
    assert loop_thread not in Compared.threads, "a stored scenario's document compared on the event loop"
    assert loads and loop_thread not in loads, "a scenario loaded from its document on the event loop"
    assert watched.documents - before == 1, f"{watched.documents - before} documents read for one change"
