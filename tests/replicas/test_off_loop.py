"""A shared database's waits stay off the event loop, and health's look at it stays within
health's own wait.

With the database slow (0.3 s a round trip) and 200 creates in flight, every client of a replica,
`/nosuch` and health too, waited up to a minute: the journal's number and write, and a background
response's lease and queued record, were database round trips made on the event loop's thread.
Health's count, after its ping, waited on a table lock for 15 s and answered in the general
error envelope. Both are checked here by what happens, not by how long it takes: which thread
used a connection, and what health answers while a lock is held."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import pgpool
from tests.replicas.replicas_support import SECRET
from tests.support import in_process_http

PTC = {"model": "m", "input": "Run this:\n```js\ntext('x')\n```", "tools": [{"type": "programmatic_tool_calling"}]}


@pytest.mark.anyio
async def test_no_connection_of_a_shared_database_is_used_on_the_event_loop(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    on_loop: list[str] = []
    loop_thread: threading.Thread | None = None
    used = pgpool.Pool.connection

    @contextlib.contextmanager
    def watched(self: pgpool.Pool, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if threading.current_thread() is loop_thread:
            on_loop.append("".join(traceback.format_stack(limit=12)))
        with used(self, *args, **kwargs) as db:
            yield db

    async with in_process_http(settings) as (http, _):
        loop_thread = threading.current_thread()  # (the app's startup may read the store: not counted)
        monkeypatch.setattr(pgpool.Pool, "connection", watched)
        made = await asyncio.gather(*[http.post("/v1/responses", json=PTC) for _ in range(4)])
        assert [m.status_code for m in made] == [200] * 4
        streamed = await http.post("/v1/responses", json={**PTC, "stream": True})
        assert streamed.status_code == 200
        queued = await http.post("/v1/responses", json={**PTC, "background": True})
        assert queued.status_code == 200 and queued.json()["status"] in ("queued", "in_progress", "completed")
        for _ in range(600):  # a guard: it finishes at once
            got = await http.get(f"/v1/responses/{queued.json()['id']}")
            if got.json()["status"] == "completed":
                break
            await asyncio.sleep(0.05)
        assert got.json()["status"] == "completed"
        journal = (await http.get("/_emulator/journal")).json()["data"]
        ids = {m.json()["id"] for m in made} | {queued.json()["id"]}
        assert ids <= {e["response_id"] for e in journal}, "every answered create is in the journal"
        seqs = [e["seq"] for e in journal]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and min(seqs) > 0
    assert on_loop == [], "uses of a database connection on the event loop's thread:\n" + "\n".join(on_loop)


@pytest.mark.anyio
async def test_health_answers_its_own_503_while_a_lock_holds_the_responses_table(
    postgres_url: str, tmp_path: Path
) -> None:
    """The database answers `SELECT 1`, but another session holds the responses table: health's
    count gives up under its statement and lock timeouts (health's wait), and health answers its
    own body; once the lock goes, 200 again."""
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (_, app):
        plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
        async with plain:  # health's 503 is its own body, not the envelope the checking client expects
            assert (await plain.get("/_emulator/health")).status_code == 200
            with psycopg.connect(postgres_url) as holder:
                holder.execute("LOCK TABLE responses IN ACCESS EXCLUSIVE MODE")
                held = await plain.get("/_emulator/health")
                assert (await plain.get("/nosuch")).status_code == 404
                holder.rollback()
            assert held.status_code == 503, held.text
            assert held.json() == {"status": "unavailable", "store": "postgresql", "database": "unreachable"}
            again = await plain.get("/_emulator/health")
            assert again.status_code == 200 and again.json()["database"] == "ok"


@pytest.mark.anyio
async def test_requests_at_once_share_the_read_of_the_scenarios(postgres_url: str, tmp_path: Path) -> None:
    """Before each `/v1/` request a replica makes its run-time scenarios the store's rows. Each
    request read every row itself: with the database slow, 200 creates in flight made 200 reads,
    and `/v1/models` waited behind them. Twenty requests arriving while one read is held back
    now share one more read (the one that begins after they arrived), not twenty."""
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        shared = app.state.emulator.shared
        store = app.state.emulator.store
        held, reads, arrived = threading.Event(), [], []
        listed = store.scenarios.version  # (a read begins with the version)

        def slow_list(*args: Any, **kwargs: Any) -> Any:
            reads.append(1)
            held.wait(120)  # (a guard; released below)
            return listed(*args, **kwargs)

        refresh = shared.refresh

        async def counted(**kwargs: Any) -> None:
            arrived.append(1)
            await refresh(**kwargs)

        store.scenarios.version = slow_list
        shared.refresh = counted
        try:
            first = asyncio.ensure_future(http.get("/v1/models"))
            for _ in range(6000):  # until the first read waits (a guard, not a measure)
                if reads:
                    break
                await asyncio.sleep(0.01)
            rest = [asyncio.ensure_future(http.get("/v1/models")) for _ in range(20)]
            for _ in range(6000):
                if len(arrived) == 21:
                    break
                await asyncio.sleep(0.01)
            held.set()
            answers = await asyncio.gather(first, *rest)
        finally:
            held.set()
            del store.scenarios.version
            del shared.refresh
        assert [a.status_code for a in answers] == [200] * 21
        assert len(reads) == 2, f"{len(reads)} reads of the scenarios for 21 requests at once"


@pytest.mark.anyio
async def test_healths_count_is_ended_by_the_server_before_its_deadline(postgres_url: str, tmp_path: Path) -> None:
    """Health's count held by a lock: its server-side statement and lock timeout is below its
    use's deadline, so the server ends it (it answered: the database is not taken for away), not
    the watchdog. Before, both were health's 1 s, and under load the watchdog sometimes cut it
    first and took the database for away (the next requests got the away wait and deadline).
    Read from what the count asked for: the deadline of its use and the limits it set."""
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (_, app):
        store = app.state.emulator.store
        pool = store._db
        uses: list[tuple[float, list[str]]] = []  # (its deadline, the limits it set), each use
        opened = pool.connection

        class _Recorded:
            def __init__(self, db: Any, limits: list[str]) -> None:
                self._db, self._limits = db, limits

            def __getattr__(self, name: str) -> Any:
                return getattr(self._db, name)

            def execute(self, sql: Any, parameters: Any = ()) -> Any:
                if b"statement_timeout" in bytes(sql):
                    self._limits.extend(parameters)
                return self._db.execute(sql, parameters)

        @contextlib.contextmanager
        def recorded(wait_s: float | None = None, deadline_s: float | None = None) -> Iterator[Any]:
            limits: list[str] = []
            uses.append((deadline_s if deadline_s is not None else pgpool.DEADLINE_S, limits))
            with opened(wait_s=wait_s, deadline_s=deadline_s) as db:
                yield _Recorded(db, limits)

        pool.connection = recorded
        try:
            with psycopg.connect(postgres_url) as holder:
                holder.execute("LOCK TABLE responses IN ACCESS EXCLUSIVE MODE")
                counted = await asyncio.to_thread(store.stored_count)
                holder.rollback()
        finally:
            del pool.connection
    assert counted is None
    counts = [(deadline, limits) for deadline, limits in uses if limits]  # (other uses may run meanwhile)
    assert len(counts) == 1, uses
    deadline, limits = counts[0]
    for limit in limits:
        assert limit.endswith("ms") and float(limit[:-2]) / 1000 < deadline, (limit, deadline)
