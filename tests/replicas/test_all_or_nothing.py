"""A 503 `database_busy` means nothing was done, and the store's writes never hold the event loop.

Each test holds a lock on one table from a session of its own (`_Held`) and makes the server's
limits small (`pgpool.SERVER_S`), so the write waiting on the lock is ended by the server and
answered 503; then, with the lock gone, what the store holds is read through the public surface
and the request sent again, as the SDKs retry a 503: the work is there once.

Before: a create in a conversation recorded the turn in the conversation, then stored the response
(a 503 there left the turn in, and the retry added it twice); an Agents API session's create or
event stored the session, then published its events (a 503 there left the session made, its
turn run); a scenario's add or delete was written, then its fault counts forgotten (a 503 there
over a scenario added or deleted on every replica); and a session's create waited on the store
on the event loop, so every other client of the replica waited with it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import pgpool
from tests.replicas.replicas_support import SECRET
from tests.replicas.test_pool_lanes import PTC, _Held
from tests.support import in_process_http

BETA = {"OpenAI-Beta": "agents=v1"}
SESSION = {"agent": {"model": "m"}, "environment": {"type": "none"}, "input": "y"}


def _settings(postgres_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)


def _small_limits(monkeypatch: Any) -> None:
    monkeypatch.setattr(pgpool, "DEADLINE_S", 3.0)
    monkeypatch.setattr(pgpool, "SERVER_S", 0.3)


def _busy(reply: Any) -> None:
    assert reply.status_code == 503, reply.text
    assert reply.json()["error"]["code"] == "database_busy", reply.text


async def _waiting_on(url: str, table: str) -> None:
    """Until a statement waits on the lock of `table` (a guard, not a measure)."""
    query = (
        "SELECT count(*) FROM pg_locks JOIN pg_class ON pg_class.oid = pg_locks.relation "
        "WHERE pg_class.relname = %s AND NOT pg_locks.granted"
    )
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(6000):
            (n,) = watcher.execute(query, (table,)).fetchone() or (0,)
            if n:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"no statement waited on the lock of {table}")


@pytest.mark.anyio
@pytest.mark.parametrize("table", ["responses", "items"])
async def test_a_create_in_a_conversation_answered_503_leaves_no_turn_and_its_retry_adds_it_once(
    postgres_url: str, tmp_path: Path, monkeypatch: Any, table: str
) -> None:
    _small_limits(monkeypatch)
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        made = await http.post("/v1/conversations", json={"items": []})
        assert made.status_code == 200, made.text
        conversation = made.json()["id"]
        create = {**PTC, "conversation": conversation}
        with _Held(postgres_url, table=table, mode="SHARE") as lock:
            refused = await http.post("/v1/responses", json=create)
            lock.release()
        after = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
        retried = await http.post("/v1/responses", json=create)
        items = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
    _busy(refused)
    assert after.json()["data"] == [], f"a 503 left the turn in the conversation: {after.text}"
    assert retried.status_code == 200, retried.text
    asked = [item for item in items.json()["data"] if item.get("role") == "user"]
    assert len(asked) == 1, f"the turn is in the conversation {len(asked)} times"


@pytest.mark.anyio
async def test_a_session_create_waiting_on_a_lock_leaves_the_other_clients_answered(
    postgres_url: str, tmp_path: Path
) -> None:
    """The server's limits as they are (12 s): the create waits until the lock goes, and the
    replica's other requests are answered meanwhile."""
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        with _Held(postgres_url, table="records", mode="SHARE") as lock:
            create = asyncio.ensure_future(http.post("/v1/agents/sessions", headers=BETA, json=SESSION))
            await _waiting_on(postgres_url, "records")
            models = await http.get("/v1/models")
            missing = await http.get("/nosuch")
            create_done_meanwhile = create.done()
            lock.release()
            made = await create
    assert models.status_code == 200, models.text
    assert missing.status_code == 404, missing.text
    assert not create_done_meanwhile, "the other requests were answered only once the create was"
    assert made.status_code == 200, made.text


@pytest.mark.anyio
async def test_a_session_create_answered_503_leaves_no_session_and_its_retry_makes_one(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    _small_limits(monkeypatch)
    body = {**SESSION, "metadata": {"try": "x"}}
    listing = {"metadata[try]": "x"}
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        with _Held(postgres_url, table="stream_events", mode="SHARE") as lock:
            refused = await http.post("/v1/agents/sessions", headers=BETA, json=body)
            lock.release()
        after = await http.get("/v1/agents/sessions", headers=BETA, params=listing)
        retried = await http.post("/v1/agents/sessions", headers=BETA, json=body)
        listed = await http.get("/v1/agents/sessions", headers=BETA, params=listing)
    _busy(refused)
    assert after.json()["data"] == [], f"a 503 left a session: {after.text}"
    assert retried.status_code == 200, retried.text
    assert len(listed.json()["data"]) == 1, listed.text


@pytest.mark.anyio
async def test_an_event_answered_503_leaves_no_turn(postgres_url: str, tmp_path: Path, monkeypatch: Any) -> None:
    _small_limits(monkeypatch)
    event = {
        "events": [
            {
                "type": "agent.session.input.message",
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}],
            }
        ]
    }
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        made = await http.post("/v1/agents/sessions", headers=BETA, json=SESSION)
        assert made.status_code == 200, made.text
        session = made.json()["id"]
        for _ in range(3000):  # its first turn over (a guard)
            seen = await http.get(f"/v1/agents/sessions/{session}", headers=BETA)
            if seen.json()["status"] != "in_progress":
                break
            await asyncio.sleep(0.01)
        turns = await http.get(f"/v1/agents/sessions/{session}/turns", headers=BETA)
        with _Held(postgres_url, table="stream_events", mode="SHARE") as lock:
            refused = await http.post(f"/v1/agents/sessions/{session}/events", headers=BETA, json=event)
            lock.release()
        after = await http.get(f"/v1/agents/sessions/{session}/turns", headers=BETA)
    _busy(refused)
    assert len(after.json()["data"]) == len(turns.json()["data"]), f"a 503 left a turn: {after.text}"


@pytest.mark.anyio
async def test_a_scenario_add_or_delete_answered_503_leaves_the_scenarios_as_they_were(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    _small_limits(monkeypatch)
    kept = {"name": "kept", "match": {"input": "^never"}, "turns": [{"message": "hi"}]}
    added = {**kept, "name": "added"}
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        assert (await http.post("/_emulator/scenarios", json=kept)).status_code == 201
        with _Held(postgres_url, table="counts", mode="SHARE") as lock:
            add = await http.post("/_emulator/scenarios", json=added)
            delete = await http.delete("/_emulator/scenarios/kept")
            lock.release()
        listed = await http.get("/_emulator/scenarios")
        with psycopg.connect(postgres_url, autocommit=True) as reader:
            stored = reader.execute("SELECT name FROM scenarios").fetchall()
    _busy(add)
    _busy(delete)
    names = {s["name"] for s in listed.json()["data"]}
    assert "added" not in names and "kept" in names, listed.text
    assert {row[0] for row in stored} == {"kept"}


@pytest.mark.anyio
async def test_the_scenarios_locked_hold_up_no_request_while_they_are_unchanged(
    postgres_url: str, tmp_path: Path
) -> None:
    """With `scenarios` locked `ACCESS EXCLUSIVE` and nothing written since the replica read
    them, a create and `/v1/models` read the scenarios' version alone (another table) and are
    answered. Before, each read every row first and waited on the lock."""
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        assert (await http.post("/v1/responses", json=PTC)).status_code == 200
        with _Held(postgres_url, table="scenarios", mode="ACCESS EXCLUSIVE") as lock:
            create = asyncio.ensure_future(http.post("/v1/responses", json={**PTC, "store": False}))
            models = asyncio.ensure_future(http.get("/v1/models"))
            done, _ = await asyncio.wait([create, models], timeout=60)  # (a guard: on the lock, 12 s then 503)
            lock.release()
            made, listed = await create, await models
    assert len(done) == 2
    assert made.status_code == 200, made.text
    assert listed.status_code == 200, listed.text


@pytest.mark.anyio
@pytest.mark.parametrize("table", ["records", "scenarios_version"])
async def test_a_table_locked_as_a_migration_locks_it_holds_up_only_the_requests_that_read_it(
    postgres_url: str, tmp_path: Path, table: str
) -> None:
    """`ACCESS EXCLUSIVE` (an `ALTER TABLE`, a `VACUUM FULL`) holds up reads too. A create reads
    the scenarios' version and the hosted scripts (rows of `records`) the replicas share, and
    waits until the lock goes; a request that reads neither is answered meanwhile, and
    `/v1/models` (it names the scenarios' models) with `records` locked. Before, every `/v1/`
    request read both first, and each waited for the server's 12 s, then got 503 `database_busy`."""
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        stored = await http.post("/v1/responses", json=PTC)
        assert stored.status_code == 200, stored.text
        with _Held(postgres_url, table=table, mode="ACCESS EXCLUSIVE") as lock:
            create = asyncio.ensure_future(http.post("/v1/responses", json={**PTC, "store": False}))
            await _waiting_on(postgres_url, table)
            others = {
                "a conversation's create": await http.post("/v1/conversations", json={"items": []}),
                "a response's retrieve": await http.get(f"/v1/responses/{stored.json()['id']}"),
                "/nosuch": await http.get("/nosuch"),
            }
            if table == "records":
                others["/v1/models"] = await http.get("/v1/models")
            create_done_meanwhile = create.done()
            lock.release()
            made = await create
    for name, reply in others.items():
        assert reply.status_code == (404 if name == "/nosuch" else 200), f"{name}: {reply.text}"
    assert not create_done_meanwhile, "the create did not wait on the lock: nothing shown"
    assert made.status_code == 200, made.text
