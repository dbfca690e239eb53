"""A lock on one table holds up only the requests that need that table.

A replica's pool has 8 connections. With another session holding the `responses` table (a schema
migration's lock, an `ALTER`, a `VACUUM FULL`), `store: true` creates each took a connection and
waited on the lock: the pool was theirs, so `/v1/models` (it reads the scenarios only), a
`store: false` create and the admin API waited the pool's 10 s and got a 503 saying the database
does not answer. Now each part of the store (its tables) holds at most `size - KEPT_FREE`
connections; the others always find one. A request that does give up waiting for a connection
while the database answers is told the connections are all busy (`database_busy`).

Checked by what happens, not by how long it takes: the lock is held until the test lets it go,
and the requests blocked on it are counted in `pg_locks`."""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ptc_emulator.api import app as app_module
from ptc_emulator.api.settings import Settings
from ptc_emulator.api.workers import Workers
from ptc_emulator.emulator.storage import pgpool
from tests.replicas.replicas_support import SECRET
from tests.support import in_process_http

PTC = {"model": "m", "input": "Run this:\n```js\ntext('x')\n```", "tools": [{"type": "programmatic_tool_calling"}]}

WAITING = (
    "SELECT count(*) FROM pg_locks JOIN pg_class ON pg_class.oid = pg_locks.relation "
    "WHERE pg_class.relname = 'responses' AND NOT pg_locks.granted"
)


class _Held:
    """`LOCK TABLE responses` (or `table` in `mode`) from a session of its own, in a thread, until
    `release()`."""

    def __init__(self, url: str, table: str = "responses", mode: str = "ACCESS EXCLUSIVE") -> None:
        self._url, self._table, self._mode = url, table, mode
        self._locked, self._go = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        with psycopg.connect(self._url) as holder:
            holder.execute(f"LOCK TABLE {self._table} IN {self._mode} MODE")
            self._locked.set()
            self._go.wait(120)  # (a guard; released by the test)
            holder.rollback()

    def __enter__(self) -> _Held:
        self._thread.start()
        assert self._locked.wait(30)
        return self

    def release(self) -> None:
        self._go.set()

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._thread.join(30)


async def _blocked_on_the_lock(url: str, at_least: int) -> int:
    """Wait until `at_least` sessions wait on the lock of `responses` (a guard, not a measure)."""
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(6000):
            (n,) = watcher.execute(WAITING).fetchone() or (0,)
            if n >= at_least:
                return int(n)
            await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {at_least} statements waited on the lock")


def _responses_share(app: Any) -> int:
    """How many connections the creates may hold: the responses part's share (the whole pool
    before the parts had shares)."""
    store = app.state.emulator.store
    part = store.responses._db
    return int(getattr(part, "share", getattr(part, "size", 8)))


@pytest.mark.anyio
async def test_requests_that_do_not_need_a_locked_table_are_answered_while_creates_wait_on_it(
    postgres_url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        assert (await http.get("/v1/models")).status_code == 200  # the pool open, the scenarios read once
        plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
        async with plain:
            with _Held(postgres_url) as lock:
                creates = [asyncio.ensure_future(plain.post("/v1/responses", json=PTC)) for _ in range(12)]
                await _blocked_on_the_lock(postgres_url, _responses_share(app))
                models, unstored, listed = await asyncio.gather(
                    plain.get("/v1/models"),
                    plain.post("/v1/responses", json={**PTC, "store": False}),
                    plain.get("/_emulator/scenarios"),
                )
                lock.release()
                made = await asyncio.gather(*creates)
        assert models.status_code == 200, models.text
        assert unstored.status_code == 200, unstored.text
        assert unstored.json()["output"][-1]["content"][0]["text"] == "x"
        assert listed.status_code == 200, listed.text
        # The creates behind the six waiting on the lock waited for their turn: answered once it
        # went, or (on a machine slower than the pool's wait) told the connections were busy.
        for reply in made:
            assert reply.status_code == 200 or reply.json()["error"]["code"] == "database_busy", reply.text
        assert any(reply.status_code == 200 for reply in made)


@pytest.mark.anyio
async def test_a_request_that_gives_up_waiting_for_a_connection_is_told_they_are_busy(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """The database answers: the 503 says the connections are all busy, not that it is away; and
    the requests that need no locked table are answered meanwhile."""
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        assert (await http.get("/v1/models")).status_code == 200
        monkeypatch.setattr(pgpool, "WAIT_S", 0.5)  # the turn's wait: a busy 503 soon
        plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
        async with plain:
            with _Held(postgres_url) as lock:
                share = _responses_share(app)
                creates = [asyncio.ensure_future(plain.post("/v1/responses", json=PTC)) for _ in range(share + 2)]
                await _blocked_on_the_lock(postgres_url, share)
                done, _ = await asyncio.wait(creates, return_when=asyncio.FIRST_COMPLETED)
                refused = next(iter(done)).result()
                lookup = await plain.get("/v1/responses/resp_nonesuch")
                models = await plain.get("/v1/models")
                lock.release()
                await asyncio.gather(*creates)
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "database_busy"), error
        assert "database connections are all busy (waiting on other statements" in error["message"]
        assert lookup.status_code == 503 and lookup.json()["error"]["code"] == "database_busy", lookup.text
        assert models.status_code == 200, models.text
        assert app.state.emulator.store._db.away is False, "a busy pool is not a database away"


@pytest.mark.anyio
async def test_more_requests_waiting_for_a_locked_parts_turn_than_worker_threads_hold_none_of_them(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """The creates past the responses part's share wait for their turn; each is lent a spare
    thread, so with more of them than the server has worker threads, `/v1/models` (the scenarios
    part) is answered while they all still wait. Before, they held every worker thread and
    `/v1/models` waited until their turn's wait ran out (each a 503 `database_busy`)."""
    workers = 8  # more than the share (6): the six statements waiting on the lock hold six of them
    monkeypatch.setattr(app_module, "WORKER_THREADS", workers)
    monkeypatch.setattr(pgpool, "WAIT_S", 30.0)  # the turn's wait: longer than any answer here
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        assert (await http.get("/v1/models")).status_code == 200
        lane = app.state.emulator.store.responses._db
        plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
        async with plain:
            with _Held(postgres_url) as lock:
                share = _responses_share(app)
                creates = [
                    asyncio.ensure_future(plain.post("/v1/responses", json=PTC)) for _ in range(share + workers + 4)
                ]
                await _blocked_on_the_lock(postgres_url, share)
                for _ in range(2000):  # (a guard) more than the worker threads wait for a turn
                    if lane.waiting >= workers + 4:
                        break
                    await asyncio.sleep(0.01)
                waiters = lane.waiting  # (before, at most workers - share: the rest had no thread)
                models = await plain.get("/v1/models")
                still_waiting = sum(not create.done() for create in creates)
                lock.release()
                made = await asyncio.gather(*creates)
        assert waiters >= workers + 4, f"only {waiters} creates waited for a turn"
        assert models.status_code == 200, models.text
        assert still_waiting == len(creates), "/v1/models waited for the creates' turns to run out"
        assert all(reply.status_code == 200 for reply in made), [r.text for r in made if r.status_code != 200]


@pytest.mark.anyio
async def test_past_the_spare_threads_a_request_that_would_wait_for_its_turn_is_busy_at_once(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """With every spare thread lent (their cap made 2 here), the next creates that would wait for
    the locked part's turn are answered 503 `database_busy` at once, and `/v1/models` is answered
    while the lent ones still wait. Before, a waiter past the cap waited on one of the worker
    threads: the surplus was not answered until the lock went (or their turn's wait ran out), and
    enough of them took every thread from the other parts' requests."""
    workers, spare = 8, 2
    monkeypatch.setattr(app_module, "WORKER_THREADS", workers)
    monkeypatch.setattr(app_module, "Workers", functools.partial(Workers, spare=spare))
    monkeypatch.setattr(pgpool, "WAIT_S", 30.0)  # the turn's wait: longer than any answer here
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        assert (await http.get("/v1/models")).status_code == 200
        lane = app.state.emulator.store.responses._db
        plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=120)
        async with plain:
            with _Held(postgres_url) as lock:
                share = _responses_share(app)
                surplus = workers
                creates = [
                    asyncio.ensure_future(plain.post("/v1/responses", json=PTC)) for _ in range(share + spare + surplus)
                ]
                await _blocked_on_the_lock(postgres_url, share)
                for _ in range(3000):  # (a guard) the surplus answered, the lent ones waiting
                    if sum(create.done() for create in creates) >= surplus and lane.waiting >= spare:
                        break
                    await asyncio.sleep(0.01)
                refused = [create.result() for create in creates if create.done()]
                waiters = lane.waiting
                models = await plain.get("/v1/models")
                still_waiting = sum(not create.done() for create in creates)
                lock.release()
                made = await asyncio.gather(*creates)
        assert len(refused) == surplus, f"{len(refused)} creates answered while the lock was held, not {surplus}"
        for reply in refused:
            assert reply.status_code == 503, reply.text
            assert reply.json()["error"]["code"] == "database_busy", reply.text
        assert waiters == spare
        assert models.status_code == 200, models.text
        assert still_waiting == share + spare
        assert sum(reply.status_code == 200 for reply in made) == share + spare
