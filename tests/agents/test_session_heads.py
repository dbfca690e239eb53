"""Looking for running turns and listing sessions read the sessions' small heads, not their documents.

Every replica looks for turns to take over every half lease (`Harness._running`, the callback of
`Ownership.watch`; in one process, what the start resumes), and read and parsed every session's
document to do it: transcripts, tools and items, up to 8 MiB each. Idle replicas grew to gigabytes
and stalled. Listing sessions (even `?limit=1`) read them all too. Now each session's head (its
scope, agent, metadata and whether its turn runs) is written with its document, the watcher reads
the heads alone, and a list reads the documents of its page alone. Checked by what happens: the
session documents the store hands out are recorded (memory, SQLite, PostgreSQL). A store written
before heads were kept (rows without one) still lists and resumes: each head is made once from
its document and kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage.memory import MemoryRecords
from ptc_emulator.emulator.storage.sql import SqlRecords
from tests.agents.agents_support import js
from tests.replicas.conftest import postgres_cluster, postgres_url  # noqa: F401 (the cluster's fixtures)
from tests.replicas.replicas_support import SECRET
from tests.support import in_process_http

BETA = {"OpenAI-Beta": "agents=v1"}
JSON = {**BETA, "content-type": "application/json"}
SESSION = "agent.session"
MANY = 6


def _settings(tmp_path: Path, store: str) -> Settings:
    return Settings(data_dir=tmp_path, store=store, secret=SECRET, bundled_fixtures=False)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.param)


@contextlib.contextmanager
def _loads_recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ids of the session documents every store's records hand out (`get`, `all`), in order."""
    loaded: list[str] = []
    for part in (SqlRecords, MemoryRecords):
        get, every = part.get, part.all

        def watched_get(self: Any, kind: str, record_id: str, _get: Any = get) -> Any:
            doc = _get(self, kind, record_id)
            if kind == SESSION and doc is not None:
                loaded.append(record_id)
            return doc

        def watched_all(self: Any, kind: str, _all: Any = every) -> Any:
            docs = _all(self, kind)
            if kind == SESSION:
                loaded.extend(d["session"]["id"] for d in docs)
            return docs

        monkeypatch.setattr(part, "get", watched_get)
        monkeypatch.setattr(part, "all", watched_all)
    yield loaded
    monkeypatch.undo()


async def _idle(http: httpx.AsyncClient, sid: str) -> None:
    for _ in range(600):  # a guard: the scripted turn ends at once
        status = (await http.get(f"/v1/agents/sessions/{sid}", headers=BETA)).json()["status"]
        if status in ("idle", "failed"):
            assert status == "idle"
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {sid} stayed busy")


async def _sessions(http: httpx.AsyncClient, n: int) -> list[str]:
    """`n` sessions with one finished turn each, oldest first; the last has its own metadata."""
    ids = []
    for k in range(n):
        body = {
            "environment": {"type": "none"},
            "agent": {"model": "gpt-5"},
            "input": js(f'text("hi {k}")'),
            "metadata": {"n": str(k), "last": "yes" if k == n - 1 else "no"},
        }
        created = await http.post("/v1/agents/sessions", headers=JSON, content=json.dumps(body))
        assert created.status_code == 200, created.text
        ids.append(created.json()["id"])
    for sid in ids:
        await _idle(http, sid)
    return ids


async def _list(http: httpx.AsyncClient, query: str) -> dict[str, Any]:
    listed = await http.get(f"/v1/agents/sessions?{query}", headers=BETA)
    assert listed.status_code == 200, listed.text
    body: dict[str, Any] = listed.json()
    return body


@pytest.mark.anyio
async def test_the_watcher_and_a_list_read_no_document_beyond_the_page(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_http(_settings(tmp_path, store)) as (http, app):
        ids = await _sessions(http, MANY)
        harness = app.state.emulator.agents
        with _loads_recorded(monkeypatch) as loaded:
            assert await asyncio.to_thread(harness._running) == []
            watched = list(loaded)
            first = await _list(http, "limit=1")
            paged = list(loaded)
            second = await _list(http, f"limit=2&after={ids[-1]}")
            chosen = await _list(http, "metadata[last]=yes")
            oldest = await _list(http, "order=asc&limit=1")
        everything = await _list(http, "limit=100")

    assert watched == [], "the watcher's round read session documents"
    assert paged == [ids[-1]], "a list of one read more documents than its page"
    assert loaded == [ids[-1], ids[-2], ids[-3], ids[-1], ids[0]]
    assert [s["id"] for s in first["data"]] == [ids[-1]] and first["has_more"] is True
    assert [s["id"] for s in second["data"]] == [ids[-2], ids[-3]] and second["has_more"] is True
    assert [s["id"] for s in chosen["data"]] == [ids[-1]] and chosen["has_more"] is False
    assert [s["id"] for s in oldest["data"]] == [ids[0]]
    assert [s["id"] for s in everything["data"]] == ids[::-1] and everything["has_more"] is False
    assert first["data"][0]["metadata"] == {"n": str(MANY - 1), "last": "yes"}
    assert first["data"][0]["status"] == "idle"


@contextlib.contextmanager
def _read_from_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What every store hands its callers from where it keeps them, as text: each row a SQL store's
    statements return (SQLite, PostgreSQL), each JSON text the memory store parses."""
    from ptc_emulator.emulator.storage import memory, pgpool, sqlite

    read: list[str] = []
    for tx in (sqlite._Tx, pgpool._Tx):
        for name in ("one", "rows"):
            used = getattr(tx, name)

            def recorded(self: Any, *args: Any, _used: Any = used) -> Any:
                got = _used(self, *args)
                read.extend(map(repr, got if isinstance(got, list) else [got]))
                return got

            monkeypatch.setattr(tx, name, recorded)

    def loads(text: str, _loads: Any = memory._loads) -> Any:
        read.append(text)
        return _loads(text)

    monkeypatch.setattr(memory, "_loads", loads)
    yield read
    monkeypatch.undo()


@pytest.mark.anyio
async def test_the_watch_reads_no_head_and_a_list_of_one_no_other_sessions_metadata(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch for turns to take over (none runs here) reads nothing of any session; a list of
    one reads the metadata of its page's session alone, and a list chosen by metadata reads none
    but the chosen one's (before, both read every session's head, metadata and all: 9 KiB each,
    most of a second per round at 20,000 sessions)."""
    async with in_process_http(_settings(tmp_path, store)) as (http, app):
        ids = await _sessions(http, MANY)
        marks = {sid: f"MARK{n}:" for n, sid in enumerate(ids)}
        for sid, mark in marks.items():
            body = {"metadata": {"mark": mark + "x" * 500}}
            updated = await http.post(f"/v1/agents/sessions/{sid}", headers=JSON, content=json.dumps(body))
            assert updated.status_code == 200, updated.text
        harness = app.state.emulator.agents
        with _read_from_store(monkeypatch) as read:
            assert await asyncio.to_thread(harness._running) == []
            watched = list(read)
            read.clear()
            first = await _list(http, "limit=1")
            listed = list(read)
            read.clear()
            chosen = await _list(http, f"metadata[mark]={marks[ids[2]]}{'x' * 500}")

    def seen(texts: list[str]) -> list[str]:
        return [sid for sid, mark in marks.items() if any(mark in text for text in texts)]

    assert [s["id"] for s in first["data"]] == [ids[-1]] and [s["id"] for s in chosen["data"]] == [ids[2]]
    assert not any(sid in text for text in watched for sid in ids), "the watch read sessions that do not run"
    assert seen(listed) == [ids[-1]], "a list of one read other sessions' metadata"
    assert seen(read) == [ids[2]], "a list chosen by metadata read the others'"


@pytest.mark.anyio
async def test_a_list_after_an_id_not_listed_is_refused_as_before(store: str, tmp_path: Path) -> None:
    async with in_process_http(_settings(tmp_path, store)) as (http, _):
        await _sessions(http, 2)
        listed = await http.get("/v1/agents/sessions?after=sess_nosuch", headers=BETA)
    assert listed.status_code == 400
    assert listed.json()["error"]["param"] == "after"


def _forget_heads_sqlite(tmp_path: Path, drop: bool) -> None:
    """The rows as an earlier version wrote them: no head (or no head column at all, nor the
    columns kept apart from it, nor their indexes)."""
    (found,) = tmp_path.glob("**/responses.sqlite3")
    with contextlib.closing(sqlite3.connect(found)) as db:
        if drop:
            for index in ("records_running", "records_unheaded", "records_chosen"):
                db.execute(f"DROP INDEX {index}")
            for column in ("scope", "agent_id", "running", "head"):
                db.execute(f"ALTER TABLE records DROP COLUMN {column}")
        else:
            db.execute("UPDATE records SET head = NULL")
        db.commit()


@pytest.mark.anyio
@pytest.mark.parametrize("drop", [False, True], ids=["null-heads", "no-head-column"])
async def test_a_sqlite_store_written_before_heads_lists_and_keeps_them(
    drop: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start (looking for turns to resume) makes the missing heads, once."""
    async with in_process_http(_settings(tmp_path, "sqlite")) as (http, _):
        ids = await _sessions(http, 3)
    _forget_heads_sqlite(tmp_path, drop)
    async with in_process_http(_settings(tmp_path, "sqlite")) as (http, app):
        with _loads_recorded(monkeypatch) as loaded:
            chosen = await _list(http, "metadata[last]=yes")
            first = await _list(http, "limit=1&order=asc")
            assert await asyncio.to_thread(app.state.emulator.agents._running) == []
    (found,) = tmp_path.glob("**/responses.sqlite3")
    with contextlib.closing(sqlite3.connect(found)) as db:
        heads = dict(db.execute("SELECT id, head FROM records WHERE kind = ?", (SESSION,)).fetchall())
    assert [s["id"] for s in chosen["data"]] == [ids[-1]]
    assert [s["id"] for s in first["data"]] == [ids[0]]
    assert loaded == [ids[-1], ids[0]], "the heads made at the start were kept"
    assert {sid: json.loads(head)["metadata"]["n"] for sid, head in heads.items()} == {
        sid: str(n) for n, sid in enumerate(ids)
    }


@pytest.mark.anyio
async def test_a_shared_store_written_before_heads_lists_and_keeps_them(
    postgres_url: str,  # noqa: F811 (the cluster's fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with in_process_http(_settings(tmp_path, postgres_url)) as (http, app):
        ids = await _sessions(http, 3)
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("UPDATE records SET head = NULL")
        with _loads_recorded(monkeypatch) as loaded:
            assert await asyncio.to_thread(app.state.emulator.agents._running) == []
            made = sorted(loaded)
            loaded.clear()
            listed = await _list(http, "limit=1")
    assert made == sorted(ids), "each head made once from its document"
    assert [s["id"] for s in listed["data"]] == [ids[-1]]
    assert loaded == [ids[-1]], "the heads made were kept"
