"""The Store contract (tests/unit/test_store_contract.py) against PostgreSQL: the same cases,
each on a fresh database of the session's throwaway cluster, and what only a shared database
has to show: a versioned schema made once however many replicas start at once, and the
database deciding between two writers of different processes.

The cases are imported from the unit file (the fast tier, which may start no server): only the
fixtures that open a store differ.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from ptc_emulator.emulator.storage import SchemaTooNew, Store, StoredConversation, StoredResponse, open_store, ping
from tests.unit.test_store_contract import (  # noqa: F401 (collected here too)
    message,
    response,
    test_a_conversation_counts_and_reads_its_newest_items_alone,
    test_a_paused_program_keeps_one_continuation,
    test_an_unfinished_response_is_replaced_once,
    test_conversation_append_at_a_version_is_checked_and_written_at_once,
    test_conversation_delete_item_removes_the_first_with_that_id,
    test_conversation_items_keep_their_order,
    test_conversations_create_get_update_delete,
    test_conversations_keep_the_scope_they_were_made_in,
    test_conversations_return_copies,
    test_counts_count_up_to_their_limit,
    test_counts_forgotten_by_prefix_and_part_count_afresh,
    test_journal_append_list_clear_by_scope,
    test_journal_keeps_its_bounds_oldest_first,
    test_leases_have_one_owner_until_released_or_expired,
    test_records_choose_the_running_and_page_by_their_heads,
    test_records_keep_a_head_beside_the_document,
    test_records_keep_what_they_choose_by_across_reopening,
    test_records_list_in_first_put_order,
    test_records_put_at_a_version_is_checked_and_written_at_once,
    test_records_put_get_delete_by_kind,
    test_records_return_copies,
    test_responses_index_their_items_by_id,
    test_responses_keep_their_scope_and_its_items_are_found_in_it_only,
    test_responses_put_get_delete,
    test_responses_put_replaces,
    test_responses_return_copies,
    test_scenarios_by_scope_and_name,
    test_scenarios_clear_one_scope_or_all,
    test_scenarios_return_copies,
    test_scenarios_version_and_changes_read_only_what_was_put_since,
)

Open = Callable[[], Store]


@pytest.fixture
def opener(postgres_url: str) -> Iterator[Open]:
    opened: list[Store] = []

    def open_() -> Store:
        store = open_store(postgres_url)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(opener: Open) -> Store:
    return opener()


@pytest.fixture
def reopen(opener: Open) -> Callable[[Store], Store]:
    """Close the store and open its database again (a server started again, or another replica)."""

    def again(store: Store) -> Store:
        store.close()
        return opener()

    return again


def _version(url: str) -> int:
    with psycopg.connect(url) as db:
        row = db.execute("SELECT version FROM ptc_schema").fetchone()
    assert row is not None
    return int(row[0])


def test_a_url_opens_a_postgresql_store_that_answers(store: Store) -> None:
    assert store.kind == "postgresql" and ping(store) is True


def test_the_schema_is_made_once_by_replicas_starting_together(postgres_url: str) -> None:
    barrier = threading.Barrier(4)
    stores: list[Store] = []
    errors: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            stores.append(open_store(postgres_url))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == [] and len(stores) == 4
        stores[0].responses.put(response("resp_1", output=["msg_1"]))
        assert all(s.responses.get("resp_1") == response("resp_1", output=["msg_1"]) for s in stores)
    finally:
        for s in stores:
            s.close()
    version = _version(postgres_url)
    again = open_store(postgres_url)  # a restart: nothing to do, nothing lost
    try:
        assert _version(postgres_url) == version >= 1
        assert again.responses.count() == 1
    finally:
        again.close()


def test_a_database_of_a_newer_schema_is_refused(postgres_url: str) -> None:
    open_store(postgres_url).close()
    with psycopg.connect(postgres_url) as db:
        db.execute("UPDATE ptc_schema SET version = version + 1")
    with pytest.raises(SchemaTooNew, match="newer than this emulator"):
        open_store(postgres_url)


def test_the_journal_is_one_for_every_replica_and_never_logged(opener: Open, postgres_url: str) -> None:
    first, second = opener(), opener()
    seqs = [first.journal.next_seq(), second.journal.next_seq(), first.journal.next_seq()]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3, "one order across replicas"
    first.journal.limit = second.journal.limit = 2
    first.journal.append("a", {"n": 1}, 10)
    second.journal.append(None, {"n": 2}, 20)
    assert first.journal.entries() == second.journal.entries() == [{"n": 1}, {"n": 2}]
    first.journal.append("a", {"n": 3}, 30)
    assert second.journal.entries() == [{"n": 2}, {"n": 3}] and second.journal.bytes == 50, "bounded across them"
    assert second.journal.clear("a") == 1 and first.journal.entries() == [{"n": 2}]
    with psycopg.connect(postgres_url) as db:
        kinds = dict(db.execute("SELECT relname, relpersistence FROM pg_class WHERE relname LIKE 'journal%%'"))
    assert kinds["journal"] == kinds["journal_totals"] == "u", "unlogged: never in the write-ahead log"


def test_an_unfinished_background_response_stays_as_it_is_when_a_replica_starts(
    store: Store, reopen: Callable[[Store], Store]
) -> None:
    """Unlike SQLite's one process, another replica may be running it: a start fails nothing."""
    store.responses.put(StoredResponse("resp_q", {**response("resp_q").response, "status": "queued"}, [], None))
    store = reopen(store)
    found = store.responses.get("resp_q")
    assert found is not None and found.response["status"] == "queued"


def test_two_stores_continuing_one_paused_program_at_once_keep_one(opener: Open) -> None:
    """Many replicas' stores, each putting a continuation of one paused program at the same
    instant: the primary key keeps one, and every other is told which."""
    stores = [opener() for _ in range(4)]
    stores[0].responses.put(response("resp_paused"))
    barrier = threading.Barrier(len(stores) * 4)
    answers: list[str | None] = []

    def continue_(store: Store, name: str) -> None:
        barrier.wait()  # all write at once
        answers.append(store.responses.put_continuation(response(name, previous="resp_paused"), name))

    threads = [
        threading.Thread(target=continue_, args=(store, f"resp_{n}_{i}"))
        for n, store in enumerate(stores)
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = stores[1].responses.continuation("resp_paused")
    assert kept is not None and answers.count(None) == 1
    assert sorted(a for a in answers if a is not None) == [kept[0]] * 15
    assert stores[2].responses.count() == 2, "the paused one and the one kept"


def test_counts_taken_by_many_stores_at_once_count_once_each(opener: Open) -> None:
    stores = [opener() for _ in range(3)]
    barrier = threading.Barrier(12)
    taken: list[int | None] = []

    def take(store: Store) -> None:
        barrier.wait()
        taken.append(store.counts.take("fault", 5))

    threads = [threading.Thread(target=take, args=(stores[n % 3],)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(t for t in taken if t is not None) == [0, 1, 2, 3, 4] and taken.count(None) == 7


def test_two_stores_appending_at_one_version_append_once(opener: Open) -> None:
    first, second = opener(), opener()
    first.conversations.create(StoredConversation("conv_1", 1, {}), [message("msg_1")])
    barrier = threading.Barrier(2)
    won: list[bool] = []

    def append(store: Store, item_id: str) -> None:
        version, _ = store.conversations.read("conv_1") or (-1, [])
        barrier.wait()
        won.append(store.conversations.append("conv_1", [message(item_id)], expected=version))

    threads = [threading.Thread(target=append, args=(s, n)) for s, n in ((first, "msg_a"), (second, "msg_b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False, True]
    version, items = second.conversations.read("conv_1") or (-1, [])
    assert version == 1 and len(items) == 2


def test_the_event_log_numbers_each_stream_and_notifies_every_replica(opener: Open) -> None:
    first, second = opener(), opener()
    assert first.events is not None and second.events is not None
    heard: list[str | None] = []
    woke = threading.Event()

    def notified(stream: str | None) -> None:
        heard.append(stream)
        woke.set()

    second.events.listen(notified)
    assert first.events.last("sess_a") == 0 and first.events.since("sess_a", 0) == []
    # A notification sent before the listener listens is lost; rows are not: append until heard.
    while not woke.wait(0.05):
        first.events.append("sess_warm", [{"warm": True}])
    warm = len(heard)
    also: list[str | None] = []
    second.events.listen(also.append)  # a second listener of the same process hears everything too
    first.events.append("sess_a", [{"n": 1}, {"n": 2}])
    second.events.append("sess_b", [{"n": 1}])
    first.events.append("sess_a", [None])
    first.events.signal("cancel:x")  # a notification alone: no row
    assert second.events.since("cancel:x", 0) == [] and second.events.last("cancel:x") == 0
    assert second.events.since("sess_a", 0) == [(1, {"n": 1}), (2, {"n": 2}), (3, None)]
    assert second.events.since("sess_a", 2) == [(3, None)] and second.events.last("sess_a") == 3
    assert first.events.since("sess_b", 0) == [(1, {"n": 1})]
    deadline = time.monotonic() + 30  # a guard: they arrive as the transactions commit, long before
    while len(news := [h for h in heard[warm:] if h != "sess_warm"]) < 4 or len(also) < 4:
        assert time.monotonic() < deadline, heard
        time.sleep(0.01)
    assert news == ["sess_a", "sess_b", "sess_a", "cancel:x"]
    assert [h for h in also if h != "sess_warm"] == news


def test_a_put_and_append_at_a_version_writes_both_or_neither(store: Store) -> None:
    """The session's document at the version it was read at and its events, in one transaction:
    a stale version, or a session deleted meanwhile, writes neither (nothing half written)."""
    events = store.events
    assert events is not None
    assert events.put_and_append("session", "s1", {"n": 1}, "s1", [{"e": 1}], {"running": True}) is True
    assert store.sessions.read("session", "s1") == (1, {"n": 1})
    assert events.put_and_append("session", "s1", {"n": 2}, "s1", [{"e": 2}], expected=1) is True
    assert events.put_and_append("session", "s1", {"n": "stale"}, "s1", [{"e": "stale"}], expected=1) is False
    assert store.sessions.read("session", "s1") == (2, {"n": 2})
    assert events.since("s1", 0) == [(1, {"e": 1}), (2, {"e": 2})]
    store.sessions.delete("session", "s1")
    assert events.put_and_append("session", "s1", {"n": "back"}, "s1", [{"e": "back"}], expected=2) is False
    assert store.sessions.read("session", "s1") is None and events.last("s1") == 2


def test_the_memory_and_sqlite_stores_have_no_event_log(tmp_path: Any) -> None:
    for kind in ("memory", "sqlite"):
        store = open_store(kind, tmp_path)
        assert store.events is None and store.shared is False
        store.close()


def test_a_database_of_an_older_schema_is_migrated_keeping_its_rows(postgres_url: str) -> None:
    from ptc_emulator.emulator.storage.pgschema import MIGRATIONS, VERSION

    with psycopg.connect(postgres_url) as db:  # as the first release left it: version 1
        db.execute("CREATE TABLE ptc_schema (version INTEGER NOT NULL)")
        db.execute("INSERT INTO ptc_schema VALUES (1)")
        db.execute(MIGRATIONS[0].encode())
        db.execute(
            "INSERT INTO responses (id, status, response, input_items) VALUES ('resp_old', 'completed', %s, '[]')",
            ('{"id": "resp_old", "status": "completed", "output": []}',),
        )
    store = open_store(postgres_url)
    try:
        assert _version(postgres_url) == VERSION > 1
        found = store.responses.get("resp_old")
        assert found is not None and found.response["status"] == "completed"
        store.journal.append(None, {"n": 1}, 10)
        assert store.journal.entries() == [{"n": 1}] and store.leases.claim("k", "me", 60) is True
    finally:
        store.close()


def test_a_database_of_heads_alone_gets_what_they_choose_by_from_them(postgres_url: str) -> None:
    """Migrated from version 8 (heads, nothing kept apart from them): the rows' scope, agent and
    running are taken from their heads, once; a row without a head waits for `put_head`."""
    from ptc_emulator.emulator.storage.pgschema import MIGRATIONS

    heads = [
        ("s1", {"scope": None, "agent_id": "a", "metadata": {"n": "1"}, "running": False}),
        ("s2", {"scope": "x", "agent_id": "a", "metadata": {"n": "2"}, "running": True}),
        ("s3", {"scope": None, "agent_id": "b", "metadata": {"n": "3"}, "running": True}),
        ("s4", None),
    ]
    with psycopg.connect(postgres_url) as db:
        db.execute("CREATE TABLE ptc_schema (version INTEGER NOT NULL)")
        db.execute("INSERT INTO ptc_schema VALUES (8)")
        for migration in MIGRATIONS[:8]:
            db.execute(migration.encode())
        for sid, head in heads:
            db.execute(
                "INSERT INTO records (kind, id, document, head) VALUES ('session', %s, '{}', %s)",
                (sid, json.dumps(head) if head is not None else None),
            )
    store = open_store(postgres_url)
    try:
        assert store.sessions.running("session") == ["s2", "s3"] and store.sessions.unheaded("session") == ["s4"]
        assert store.sessions.page("session", scope="x", agent_id="a", limit=5) == (["s2", "s1"], False)
        assert store.sessions.page("session", scope=None, metadata={"n": "3"}, limit=5) == (["s3"], False)
    finally:
        store.close()
