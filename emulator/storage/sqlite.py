"""The Store in one SQLite file in the data directory (`--store sqlite`, the default): the SQL
stores' shared statements (`sql.py`) in SQLite's dialect, over one connection.

One connection, serialised by one lock, for every part (and one more that only counts the
stored responses for a health check, which reads while a write goes on); WAL, so a killed
server leaves a consistent file. Every write is one transaction, `BEGIN IMMEDIATE` (the one writer from its
start, so what it checks holds until it commits): a response and its items, a conversation and
its items, appear together or not at all. The journal is the one part kept in memory (see
`protocol.JournalLog`): it holds `store: false` bodies, which never reach the disk.

One process owns the file: before anything touches it, the store takes an exclusive lock on
`<file>.lock` beside it (`DirLock`: an OS file lock, held for the store's life and released by the
OS when the process ends, so a killed server leaves no stale lock). A second server on the same
data directory refuses to start (`DataDirHeld`) instead of failing the first one's running
background responses as a dead server's (`SqliteStore.__init__`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.storage.memory import MemoryCounts, MemoryJournal, MemoryLeases
from ptc_emulator.emulator.storage.protocol import Counts, EventLog, JournalLog, Leases, StoreUnavailable
from ptc_emulator.emulator.storage.sql import Dialect, SqlParts, Tx

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; the file goes unguarded there
    fcntl = None  # type: ignore[assignment]

__all__ = ["FILENAME", "LOCK_SUFFIX", "SQLITE", "DataDirHeld", "DirLock", "SqliteStore", "open_at"]

T = TypeVar("T")

FILENAME = "responses.sqlite3"
"""The store's file in the data directory."""

LOCK_SUFFIX = ".lock"
"""The lock file beside the store's file (`responses.sqlite3.lock`): see `DirLock`."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
    status TEXT,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL,
    scope TEXT
);
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL REFERENCES responses(id) ON DELETE CASCADE,
    item TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS items_by_response ON items(response_id);
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    scope TEXT
);
CREATE TABLE IF NOT EXISTS conversation_items (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX IF NOT EXISTS conversation_items_by_id ON conversation_items(conversation_id, item_id);
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    document TEXT NOT NULL,
    head TEXT,
    scope TEXT,
    agent_id TEXT,
    running INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, id)
);
CREATE TABLE IF NOT EXISTS continuations (
    paused_id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL REFERENCES responses(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS continuations_by_response ON continuations(response_id);
CREATE TABLE IF NOT EXISTS scenarios (
    scope_key TEXT NOT NULL,
    name TEXT NOT NULL,
    scope TEXT,
    document TEXT NOT NULL,
    revision INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope_key, name)
);
CREATE TABLE IF NOT EXISTS scenarios_version (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL);
INSERT OR IGNORE INTO scenarios_version (one, version) VALUES (1, 0);
"""
"""`scenarios.scope_key` is the scope as JSON (`null` for none): a primary key cannot hold NULL.
`scenarios_version` is one row, made larger by every write of `scenarios`, whose put gives its row that
version as its `revision` (`sql.py`).
`conversations.version` grows with every change of the conversation's items (see `read`);
`records.version` with every put of the record's document (`Records.read`).
`responses.status` is the body's status, kept beside it for the continuations (`sql.py`).
`continuations` holds the one response that resumed each paused program (its primary key decides)."""

COLUMNS = (
    ("responses", "scope", "TEXT"),
    ("responses", "status", "TEXT"),
    ("conversations", "version", "INTEGER NOT NULL DEFAULT 0"),
    ("conversations", "scope", "TEXT"),
    ("records", "head", "TEXT"),
    ("records", "scope", "TEXT"),
    ("records", "agent_id", "TEXT"),
    ("records", "running", "INTEGER NOT NULL DEFAULT 0"),
    ("records", "version", "INTEGER NOT NULL DEFAULT 0"),
    ("scenarios", "revision", "INTEGER NOT NULL DEFAULT 0"),
)
"""Columns a file made by an older version lacks: added when it is opened (its rows get the default)."""


SQLITE = Dialect("sqlite", placeholder="?", same="IS", order="rowid")
"""One connection, one writer at a time (`BEGIN IMMEDIATE`): no row or key needs a lock of its own."""


class DataDirHeld(StoreUnavailable):
    """Another process (a server still running) holds the store's file."""


class DirLock:
    """An exclusive lock (`flock`) on `<file>.lock`, held until `release` or the process's end.

    The OS drops it when the process dies, however it dies (kill -9 included), so it is never
    stale; the file itself stays and holds the last holder's process id, which only the refusal
    names. Not inherited: the sandbox's workers are spawned with exec, and Python's files close
    on exec."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + LOCK_SUFFIX)
        try:
            self._file = open(self.path, "a+", encoding="ascii")  # noqa: SIM115 - held for the store's life
        except (FileNotFoundError, NotADirectoryError) as e:  # a folder no file can be made in (`/proc/1`)
            raise sqlite3.OperationalError(f"no lock file can be made beside its file: {e.strerror}") from e
        if fcntl is None:  # pragma: no cover
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._file.seek(0)
            holder = self._file.read(32).strip()
            self._file.close()
            pid = f" (process {holder})" if holder.isdigit() else ""
            raise DataDirHeld(
                f"the data dir {path.parent.resolve()} is held by another ptc-emulator server{pid}: stop it, "
                "or give this one its own --data-dir (or PTC_EMULATOR_DATA_DIR)"
            ) from e
        self._file.truncate(0)
        self._file.write(str(os.getpid()))
        self._file.flush()

    def release(self) -> None:
        self._file.close()  # closing the one descriptor drops the lock


class _Tx:
    """The connection inside a transaction (the lock held)."""

    __slots__ = ("connection",)

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


class _Db:
    """The connection and its lock, shared by the parts (`sql.Connections`)."""

    dialect = SQLITE

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self.lock = threading.Lock()
        self._tx = _Tx(self.connection)
        self._path = path
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()

    def _transaction(self, work: Callable[[Tx], T], begin: str) -> T:
        with self.lock:
            self.connection.execute(begin)
            try:
                done = work(self._tx)
                self.connection.execute("COMMIT")
                return done
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise

    def write(self, work: Callable[[Tx], T]) -> T:
        # IMMEDIATE: the write lock from the start, so what the transaction checks stays so
        # until it commits (no other writer in between).
        return self._transaction(work, "BEGIN IMMEDIATE")

    def read(self, work: Callable[[Tx], T]) -> T:
        return self._transaction(work, "BEGIN")  # one snapshot of every table

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        with self.lock:
            return self._tx.one(sql, parameters)

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with self.lock:
            return self._tx.rows(sql, parameters)

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        with self.lock:
            return self._tx.changed(sql, parameters)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.lock:
            self._tx.many(sql, rows)

    def glance(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """On a connection of its own, which reads the last commit (WAL) without waiting for the
        one writer: a health check is answered while a long write goes on (issue 38)."""
        with self._reader_lock:
            if self._reader is None:
                self._reader = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None, timeout=30)
                self._reader.execute("PRAGMA query_only=ON")
            return self._reader.execute(sql, parameters).fetchone()

    def close(self) -> None:
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
        with self.lock:
            self.connection.close()


class SqliteStore(SqlParts):
    """Every part in `path` but the journal."""

    kind: str = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = DirLock(path)  # first: the statements below fail the rows of a process that ended
        try:
            self._db = _Db(path)
        except BaseException:
            self._lock.release()
            raise
        try:
            self._prepare()
        except BaseException:
            self.close()
            raise
        super().__init__(self._db)
        self.journal: JournalLog = MemoryJournal()
        self.leases: Leases = MemoryLeases()  # one process owns the file
        self.counts: Counts = MemoryCounts()  # (so a restart counts afresh, as the journal starts afresh)
        self.events: EventLog | None = None  # one process: its harness fans events out itself
        self.shared = False

    def _prepare(self) -> None:
        """The schema made or brought up to date; the rows of a process that ended settled."""
        with self._db.lock:
            db = self._db.connection
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(SCHEMA)
            added = set()
            for table, column, declaration in COLUMNS:
                if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                    added.add((table, column))
            if ("records", "running") in added:  # what a head holds, kept apart (`Records.running`)
                db.execute(
                    "UPDATE records SET scope = json_extract(head, '$.scope'), "
                    "agent_id = json_extract(head, '$.agent_id'), "
                    "running = COALESCE(json_extract(head, '$.running'), 0) WHERE head IS NOT NULL"
                )
            db.execute("CREATE INDEX IF NOT EXISTS responses_by_previous ON responses(previous_response_id)")
            db.execute("CREATE INDEX IF NOT EXISTS records_running ON records(kind) WHERE running")
            db.execute("CREATE INDEX IF NOT EXISTS records_unheaded ON records(kind) WHERE head IS NULL")
            db.execute("CREATE INDEX IF NOT EXISTS records_chosen ON records(kind, scope, agent_id, id)")
            # Rows an older version wrote keep their status in the body only.
            db.execute("UPDATE responses SET status = json_extract(response, '$.status') WHERE status IS NULL")
            # A background response still queued or in progress was cut off by the previous
            # process (a kill or a crash): nothing will ever finish it, so it failed. (That
            # process has ended: a running one would hold `DirLock`, and this one would not be here.)
            db.execute(
                "UPDATE responses SET status = 'failed', "
                "response = json_set(response, '$.status', 'failed', '$.error', json(?)) "
                "WHERE status IN ('queued', 'in_progress')",
                (json.dumps({"code": "server_error", "message": messages.background_interrupted()}),),
            )

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            self._lock.release()


def open_at(where: str, data_dir: Path | None) -> SqliteStore:
    """`--store sqlite`: the file `FILENAME` in `data_dir` (made if missing)."""
    if data_dir is None:
        raise ValueError("a sqlite store needs a data directory")
    return SqliteStore(data_dir / FILENAME)
