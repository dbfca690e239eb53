"""Storing a long response never holds the event loop, nor another request's write: a record's
JSON text is made before its store's lock (or transaction) is taken, every write to the server's
store is made in a worker thread, and a health check counts the stored responses without waiting
for a write under way (SQLite: on a reading connection of its own).

The server runs in this process, so each test holds the long write on an event the test sets:
while the record's text is made, or inside the SQLite transaction. Nothing is timed (issue 38:
with a 200,000-item record written, health waited 5 to 19 s on the SQLite store's lock, on the
event loop, and every other client with it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.storage.sql import SqlResponses
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, while_held

ITEMS = 3 * jsonpieces.PIECE
"""Enough items for the record's text to be made in pieces, and its request to be finished in a
worker thread."""


def _long_create(client: httpx.Client) -> httpx.Response:
    items: list[dict[str, Any]] = [{"role": "user", "content": f"hi {n}"} for n in range(ITEMS)]
    items.append({"role": "user", "content": program_message("text('long')")})
    return client.post("/responses", json={"model": "m", "input": items, "tools": PTC_TOOLS})


def _create_with_a_client_of_its_own(server: EmulatorServer) -> httpx.Response:
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        return _long_create(client)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_long_records_text_is_made_before_the_stores_lock(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    """Held while the long record's input items are made into text: a small create is stored
    meanwhile (and health answered)."""
    server = make_server(store=store)
    dumps = jsonpieces.dumps

    def holding(value: Any) -> str:
        if isinstance(value, list) and len(value) > ITEMS:
            held.hold()
        return dumps(value)

    monkeypatch.setattr(jsonpieces, "dumps", holding)
    done = while_held(server, held, _long_create)
    assert done["output"][-1]["content"][0]["text"] == "long"


def test_health_is_answered_while_a_long_write_holds_the_sqlite_store(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held inside the SQLite transaction that writes the long record: health (its count of the
    stored responses too) and a create that stores nothing are answered meanwhile."""
    server = make_server(store="sqlite")
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        assert (
            http.post(
                "/responses", json={"model": "m", "input": program_message("text(1)"), "tools": PTC_TOOLS}
            ).status_code
            == 200
        )
    put = SqlResponses._put

    def holding(self: SqlResponses, tx: Any, record: Any, *rest: Any) -> None:
        held.hold()
        put(self, tx, record, *rest)

    monkeypatch.setattr(SqlResponses, "_put", holding)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_create_with_a_client_of_its_own, server)
        assert held.entered.wait(120), "the long create never reached its write"
        try:
            with httpx.Client(base_url=server.base_url, timeout=60) as http:
                health = http.get(server.base_url.removesuffix("/v1") + "/_emulator/health")
                unstored = http.post(
                    "/responses",
                    json={"model": "m", "input": program_message("text('small')"), "tools": PTC_TOOLS, "store": False},
                )
            assert not pending.done(), "the long create should still be held"
        finally:
            held.release.set()
        reply = pending.result(timeout=300)
    assert health.status_code == 200, health.text
    assert health.json()["stored_responses"] == 1, "the write under way is not counted yet"
    assert unstored.status_code == 200, unstored.text[:500]
    assert unstored.json()["output"][-1]["content"][0]["text"] == "small"
    assert reply.status_code == 200, reply.text[:500]
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        health = http.get(server.base_url.removesuffix("/v1") + "/_emulator/health")
    assert health.json()["stored_responses"] == 2, json.dumps(health.json())
