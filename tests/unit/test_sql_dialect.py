"""SQL stores are an extension point: a store is one module (its `sql.Dialect`, its connection
handling, its schema, the parts from `sql.SqlParts`) plus a `register_store(StoreKind(...))` line
(docs/architecture.md, "Extending"). This module is such a store: SQLite spoken in another dialect
(numbered parameters, `?1`, `?2`) over other connection handling (a connection per call, opened
and closed, with no lock of its own: SQLite's `BEGIN IMMEDIATE` and its busy timeout order the
writers). Registered, `open_store` and `serve --store` open it by name, and the whole Store
contract (tests/unit/test_store_contract.py) passes on it, reopening included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ptc_emulator.api.cli import parse
from ptc_emulator.emulator.storage import STORES, MemoryJournal, Store, StoreKind, open_store, register_store
from ptc_emulator.emulator.storage.memory import MemoryCounts, MemoryLeases
from ptc_emulator.emulator.storage.protocol import Counts, EventLog, JournalLog, Leases
from ptc_emulator.emulator.storage.sql import Dialect, SqlParts, Statements, Tx
from ptc_emulator.emulator.storage.sqlite import SCHEMA
from tests.unit.test_store_contract import (  # noqa: F401 (collected here too)
    message,
    response,
    test_a_paused_program_keeps_one_continuation,
    test_an_unfinished_response_is_replaced_once,
    test_conversation_append_at_a_version_is_checked_and_written_at_once,
    test_conversation_delete_item_removes_the_first_with_that_id,
    test_conversation_items_keep_their_order,
    test_conversations_create_get_update_delete,
    test_conversations_return_copies,
    test_counts_count_up_to_their_limit,
    test_counts_forgotten_by_prefix_and_part_count_afresh,
    test_journal_append_list_clear_by_scope,
    test_journal_keeps_its_bounds_oldest_first,
    test_leases_have_one_owner_until_released_or_expired,
    test_records_choose_the_running_and_page_by_their_heads,
    test_records_list_in_first_put_order,
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
)

T = TypeVar("T")

# ---- the store: what a new module of emulator/storage/ would hold ------------------------------

NUMBERED = Dialect("sqlite-numbered", placeholder="?{n}", same="IS", order="rowid")


class _Tx:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self.connection.execute(sql, parameters).fetchone()

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        return self.connection.execute(sql, parameters).fetchall()

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        return self.connection.execute(sql, parameters).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.connection.executemany(sql, rows)


class _PerCall:
    """A connection per call (`sql.Connections`)."""

    dialect = NUMBERED

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA synchronous=OFF")  # a test's file: no sync to disk per commit
        return connection

    def _transaction(self, work: Callable[[Tx], T], begin: str) -> T:
        with closing(self._connect()) as connection:
            connection.execute(begin)
            try:
                done = work(_Tx(connection))
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return done

    def write(self, work: Callable[[Tx], T]) -> T:
        return self._transaction(work, "BEGIN IMMEDIATE")

    def read(self, work: Callable[[Tx], T]) -> T:
        return self._transaction(work, "BEGIN")

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        with closing(self._connect()) as connection:
            return _Tx(connection).one(sql, parameters)

    def glance(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self.one(sql, parameters)  # a connection per call never waits for a writer's lock

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with closing(self._connect()) as connection:
            return _Tx(connection).rows(sql, parameters)

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        with closing(self._connect()) as connection:
            return _Tx(connection).changed(sql, parameters)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.write(lambda tx: tx.many(sql, rows))


class NumberedStore(SqlParts):
    kind: str = "sqlite-numbered"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path)) as connection:
            # One transaction, not synced (a test's file): statement by statement, each CREATE
            # would be a commit of its own, a sync to disk each (about 0.1 s a store on a busy disk).
            connection.executescript(f"PRAGMA synchronous=OFF;\nBEGIN;\n{SCHEMA}COMMIT;\n")
        super().__init__(_PerCall(path))
        self.journal: JournalLog = MemoryJournal()
        self.leases: Leases = MemoryLeases()
        self.counts: Counts = MemoryCounts()
        self.events: EventLog | None = None
        self.shared = False

    def close(self) -> None:
        pass


def open_at(where: str, data_dir: Path | None) -> NumberedStore:
    assert data_dir is not None
    return NumberedStore(data_dir / "numbered.sqlite3")


# ---- its registration line, and the contract's fixtures ---------------------------------------


@pytest.fixture(autouse=True)
def registered() -> Iterator[StoreKind]:
    kind = register_store(StoreKind("sqlite-numbered", __name__))
    yield kind
    del STORES[kind.name]


Open = Callable[[], Store]


@pytest.fixture
def opener(tmp_path: Path) -> Iterator[Open]:
    opened: list[Store] = []

    def open_() -> Store:
        store = open_store("sqlite-numbered", tmp_path / "data")
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
    def again(store: Store) -> Store:
        store.close()
        return opener()

    return again


def test_the_registered_store_is_opened_by_name(store: Store, tmp_path: Path) -> None:
    assert isinstance(store, NumberedStore) and store.kind == "sqlite-numbered"
    assert (tmp_path / "data" / "numbered.sqlite3").is_file()
    settings, _ = parse(["serve", "--store", "sqlite-numbered"])
    assert settings.store == "sqlite-numbered"


def test_without_its_registration_line_the_store_is_unknown(registered: StoreKind) -> None:
    del STORES[registered.name]
    try:
        with pytest.raises(ValueError, match="unknown store 'sqlite-numbered': 'sqlite', 'memory' or a postgresql"):
            open_store("sqlite-numbered")
        with pytest.raises(SystemExit):
            parse(["serve", "--store", "sqlite-numbered"])
    finally:
        STORES[registered.name] = registered


def test_the_statements_are_spelled_in_the_dialect() -> None:
    statements = Statements.of(NUMBERED)
    assert statements.item_in.endswith("WHERE items.id = ?1 AND responses.scope IS ?2")
    assert statements.next_version.endswith("AND (CAST(?2 AS BIGINT) IS NULL OR version = CAST(?3 AS BIGINT))")
    assert statements.records.endswith("ORDER BY rowid")
    assert statements.claim_pause.endswith("VALUES (?1, ?2, ?3) ON CONFLICT (paused_id) DO NOTHING")
