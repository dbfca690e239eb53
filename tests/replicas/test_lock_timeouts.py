"""A lock held past the deadline leaves no statement of the replica behind, and its 503 means
"not done".

Before: a statement waiting on another session's lock waited until the watchdog cut its socket
(`DEADLINE_S`); the server's backend stayed blocked in the lock wait (it does not notice a lost
client there), the replica took the database for away, and its next statements, given the away
deadline, were cut too, each leaving one more backend behind, until the server refused every
connection. A write answered that 503 (`database_unavailable`) was applied once the lock went:
the backend left behind committed it.

Now the server ends the statement itself (`lock_timeout`, `statement_timeout` of every pooled
connection, `pgpool.SERVER_S`, below the deadline) and rolls it back: the 503 is `database_busy`,
and the database is not taken for away; a use the watchdog must cut is cancelled on the server
first. The deadlines are made small here; what is checked is what is left once the requests are
answered, with the lock still held: backends waiting on a lock, counted in `pg_stat_activity`."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import pgpool
from tests.replicas.replicas_support import SECRET
from tests.replicas.test_pool_lanes import PTC, _Held
from tests.support import in_process_http

WAITING_ON_LOCKS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


async def _no_backend_waits(url: str) -> int:
    """How many backends still wait on a lock, once none does (a guard of a few seconds: a backend
    cancelled ends soon after its client hears of it); the count left otherwise."""
    n = -1
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(500):
            (n,) = watcher.execute(WAITING_ON_LOCKS).fetchone() or (0,)
            if n == 0:
                return 0
            await asyncio.sleep(0.01)
    return int(n)


@pytest.mark.anyio
async def test_a_lock_held_past_the_deadline_is_a_busy_database_and_leaves_no_backend_waiting(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(pgpool, "DEADLINE_S", 3.0)
    monkeypatch.setattr(pgpool, "SERVER_S", 0.3, raising=False)  # (absent before the fix)
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, app):
        made = await http.post("/v1/responses", json=PTC)
        assert made.status_code == 200, made.text
        with _Held(postgres_url):
            creates = await asyncio.gather(*(http.post("/v1/responses", json=PTC) for _ in range(4)))
            lookup = await http.get(f"/v1/responses/{made.json()['id']}")
            left = await _no_backend_waits(postgres_url)
            away = app.state.emulator.store._db.away
        after = await http.get(f"/v1/responses/{made.json()['id']}")
    for reply in [*creates, lookup]:
        assert reply.status_code == 503, reply.text
        assert reply.json()["error"]["code"] == "database_busy", reply.text
    assert left == 0, f"{left} backends still wait on the lock after their requests were answered"
    assert away is False, "a lock wait is not a database away"
    assert after.status_code == 200, after.text


@pytest.mark.anyio
async def test_a_use_cut_by_the_watchdog_is_cancelled_on_the_server_first(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """The server's limits made longer than the deadline (a frozen server's case, reached here by
    a lock): the watchdog cuts the use, and the backend does not stay behind waiting."""
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, _app):
        # The pool's server-side limits were set as it opened (`SERVER_S`, 12 s); the deadline
        # made shorter afterwards, so the watchdog, not the server, ends the wait.
        monkeypatch.setattr(pgpool, "DEADLINE_S", 0.5)
        with _Held(postgres_url):
            cut = await http.get("/v1/responses/resp_nonesuch")
            left = await _no_backend_waits(postgres_url)
    assert cut.status_code == 503, cut.text
    assert left == 0, f"{left} backends still wait on the lock after their uses were cut"


@pytest.mark.anyio
async def test_a_delete_answered_503_under_a_lock_is_not_applied_once_the_lock_goes(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """A SHARE lock (a `CREATE INDEX`'s): reads go on, the delete waits on it."""
    monkeypatch.setattr(pgpool, "DEADLINE_S", 3.0)
    monkeypatch.setattr(pgpool, "SERVER_S", 0.3, raising=False)
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, _app):
        made = await http.post("/v1/responses", json=PTC)
        assert made.status_code == 200, made.text
        response_id = made.json()["id"]
        with _Held(postgres_url, mode="SHARE") as lock:
            read = await http.get(f"/v1/responses/{response_id}")
            deleted = await http.delete(f"/v1/responses/{response_id}")
            left = await _no_backend_waits(postgres_url)
            lock.release()
        after = await http.get(f"/v1/responses/{response_id}")
    assert read.status_code == 200, read.text
    assert deleted.status_code == 503, deleted.text
    assert deleted.json()["error"]["code"] == "database_busy", deleted.text
    assert left == 0
    assert after.status_code == 200, f"the delete answered 503 was applied: {after.text}"


@pytest.mark.anyio
async def test_a_create_whose_journal_entry_cannot_be_written_is_answered_as_done_and_kept_once(
    postgres_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """`journal` held in SHARE mode (a `CREATE INDEX`'s lock): a create in a conversation stores
    its response and the conversation's items, then its journal entry's write is ended by the
    server's lock timeout. Before, the reply was that 503 `database_busy` ("nothing was done") over
    a turn that was kept, and the SDK's retry of the 503 stored the turn twice. Now the entry is
    logged as not kept and the reply is the response, so the client sends it once."""
    monkeypatch.setattr(pgpool, "DEADLINE_S", 3.0)
    monkeypatch.setattr(pgpool, "SERVER_S", 0.3)
    settings = Settings(data_dir=tmp_path, store=postgres_url, secret=SECRET, bundled_fixtures=False)
    async with in_process_http(settings) as (http, _app):
        made = await http.post("/v1/conversations", json={"items": []})
        assert made.status_code == 200, made.text
        conversation = made.json()["id"]
        create = {**PTC, "conversation": conversation}
        with _Held(postgres_url, table="journal", mode="SHARE") as lock:
            reply = await http.post("/v1/responses", json=create)
            left = await _no_backend_waits(postgres_url)
            lock.release()
        if reply.status_code == 503:  # what a client (the SDKs) does with a 503: send it again
            retried = await http.post("/v1/responses", json=create)
            assert retried.status_code == 200, retried.text
        items = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
    assert items.status_code == 200, items.text
    asked = [item for item in items.json()["data"] if item.get("role") == "user"]
    assert len(asked) == 1, f"the turn is in the conversation {len(asked)} times"
    assert reply.status_code == 200, f"answered {reply.status_code} over a turn kept: {reply.text}"
    assert left == 0


def test_the_watchdogs_cancel_to_a_frozen_database_leaves_the_other_threads_running(
    postgres_cluster: Any, monkeypatch: Any
) -> None:
    """The cancel request the watchdog sends with a use it cuts waits on the server (a frozen one
    answers it only within the connection's `connect_timeout`, here 60 s); meanwhile the process's
    other threads run (here the test's own, asleep 0.5 s: it wakes while the cancel still waits).
    Before, libpq's blocking cancel held the interpreter's lock for its whole wait, so every
    thread of the replica, the event loop included, stood still until it ended. (The 60 s is a
    guard, not a measure: only 'woke at all while the cancel still waited' is asserted.)"""
    monkeypatch.setattr(pgpool, "CONNECT_S", 60)
    cluster = type(postgres_cluster)
    started = set(threading.enumerate())  # the threads themselves: an ident is reused once its thread ends
    with cluster.started() as frozen:
        db = psycopg.connect(frozen.database() + "?connect_timeout=60", autocommit=True)
        try:
            frozen.freeze()
            try:
                pgpool._cancel_and_cut(db)
                asking = [t for t in threading.enumerate() if t.name == "ptc-pg-cancel" and t not in started]
                assert len(asking) == 1, asking
                time.sleep(0.5)  # (lets the cancel reach its wait; not a measure)
                woke_while_waiting = asking[0].is_alive()
            finally:
                frozen.thaw()
            asking[0].join(120)
        finally:
            db.close()
    assert woke_while_waiting, "this thread ran only once the cancel had ended: it held every thread"
