"""The Store in one SQLite file in the data directory (`--store sqlite`, the default).

One connection, serialised by one lock, for every part; WAL, so a killed server leaves a
consistent file. Every write is one transaction: a response and its items, a conversation and
its items, appear together or not at all. The journal is the one part kept in memory (see
`protocol.JournalLog`): it holds `store: false` bodies, which never reach the disk.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptc_emulator.emulator.storage.memory import MemoryJournal, MemoryLeases, item_ids
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
    EventLog,
    JournalLog,
    Leases,
    Records,
    Responses,
    Scenarios,
    StoredConversation,
    StoredResponse,
    StoredScenario,
)

__all__ = ["INTERRUPTED", "SqliteConversations", "SqliteRecords", "SqliteResponses", "SqliteScenarios", "SqliteStore"]

INTERRUPTED = {
    "code": "server_error",
    "message": "The emulator stopped before this background response finished; create it again.",
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
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
    version INTEGER NOT NULL DEFAULT 0
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
    PRIMARY KEY (kind, id)
);
CREATE TABLE IF NOT EXISTS scenarios (
    scope_key TEXT NOT NULL,
    name TEXT NOT NULL,
    scope TEXT,
    document TEXT NOT NULL,
    PRIMARY KEY (scope_key, name)
);
"""
"""`scenarios.scope_key` is the scope as JSON (`null` for none): a primary key cannot hold NULL.
`conversations.version` grows with every change of the conversation's items (see `read`)."""

COLUMNS = (
    ("responses", "scope", "TEXT"),
    ("conversations", "version", "INTEGER NOT NULL DEFAULT 0"),
)
"""Columns a file made by an older version lacks: added when it is opened (its rows get the default)."""


class _Db:
    """The connection and its lock, shared by the parts."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self.lock = threading.Lock()

    def write(self, statements: Callable[[sqlite3.Connection], bool], begin: str = "BEGIN IMMEDIATE") -> bool:
        """`statements` in one transaction (`BEGIN` for one that only reads)."""
        with self.lock:
            self.connection.execute(begin)
            try:
                done = statements(self.connection)
                self.connection.execute("COMMIT")
                return done
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise

    def one(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        with self.lock:
            return self.connection.execute(sql, parameters).fetchone()

    def rows(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        with self.lock:
            return self.connection.execute(sql, parameters).fetchall()

    def changed(self, sql: str, parameters: tuple[Any, ...]) -> int:
        with self.lock:
            return self.connection.execute(sql, parameters).rowcount


class SqliteResponses:
    def __init__(self, db: _Db) -> None:
        self._db = db

    def put(self, record: StoredResponse) -> None:
        self._put(record, None)

    def put_successor(self, record: StoredResponse, expected: int) -> bool:
        return self._put(record, expected)

    def _put(self, record: StoredResponse, expected: int | None) -> bool:
        dumps = json.dumps

        def statements(db: sqlite3.Connection) -> bool:
            # One IMMEDIATE transaction: no other writer stores a successor between check and write.
            if expected is not None and record.previous_response_id is not None:
                known = db.execute("SELECT 1 FROM responses WHERE id = ?", (record.id,)).fetchone()
                (n,) = db.execute(
                    "SELECT COUNT(*) FROM responses WHERE previous_response_id = ?", (record.previous_response_id,)
                ).fetchone()
                if known is None and n != expected:
                    return False
            db.execute(
                "INSERT OR REPLACE INTO responses (id, previous_response_id, response, input_items, scope) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.previous_response_id,
                    dumps(record.response),
                    dumps(record.input_items),
                    record.scope,
                ),
            )
            db.executemany(
                "INSERT OR REPLACE INTO items (id, response_id, item) VALUES (?, ?, ?)",
                [(item_id, record.id, dumps(item)) for item_id, item in item_ids(record)],
            )
            return True

        return self._db.write(statements)

    def successors(self, response_id: str) -> int:
        (n,) = self._db.one(
            "SELECT COUNT(*) FROM responses WHERE previous_response_id = ? "
            "AND json_extract(response, '$.status') NOT IN ('queued', 'in_progress')",
            (response_id,),
        )
        return int(n)

    def get(self, response_id: str) -> StoredResponse | None:
        row = self._db.one(
            "SELECT response, input_items, previous_response_id, scope FROM responses WHERE id = ?", (response_id,)
        )
        if row is None:
            return None
        return StoredResponse(response_id, json.loads(row[0]), json.loads(row[1]), row[2], row[3])

    def delete(self, response_id: str) -> bool:
        return self._db.changed("DELETE FROM responses WHERE id = ?", (response_id,)) > 0

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one("SELECT response_id, item FROM items WHERE id = ?", (item_id,))
        return (row[0], json.loads(row[1])) if row else None

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one(
            "SELECT items.response_id, items.item FROM items JOIN responses ON responses.id = items.response_id "
            "WHERE items.id = ? AND responses.scope IS ?",
            (item_id, scope),
        )
        return (row[0], json.loads(row[1])) if row else None

    def count(self) -> int:
        (n,) = self._db.one("SELECT COUNT(*) FROM responses", ())
        return int(n)


class SqliteConversations:
    def __init__(self, db: _Db) -> None:
        self._db = db

    @staticmethod
    def _insert(db: sqlite3.Connection, conversation_id: str, items: list[dict[str, Any]]) -> None:
        (last,) = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM conversation_items WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        db.executemany(
            "INSERT INTO conversation_items (conversation_id, seq, item_id, item) VALUES (?, ?, ?, ?)",
            [(conversation_id, last + n, item["id"], json.dumps(item)) for n, item in enumerate(items, 1)],
        )

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        def statements(db: sqlite3.Connection) -> bool:
            db.execute(
                "INSERT INTO conversations (id, created_at, metadata) VALUES (?, ?, ?)",
                (record.id, record.created_at, json.dumps(record.metadata)),
            )
            self._insert(db, record.id, items)
            return True

        self._db.write(statements)

    def get(self, conversation_id: str) -> StoredConversation | None:
        row = self._db.one("SELECT created_at, metadata FROM conversations WHERE id = ?", (conversation_id,))
        return StoredConversation(conversation_id, int(row[0]), json.loads(row[1])) if row else None

    def update(self, record: StoredConversation) -> bool:
        sql = "UPDATE conversations SET metadata = ? WHERE id = ?"
        return self._db.changed(sql, (json.dumps(record.metadata), record.id)) > 0

    def delete(self, conversation_id: str) -> bool:
        return self._db.changed("DELETE FROM conversations WHERE id = ?", (conversation_id,)) > 0

    def append(self, conversation_id: str, items: list[dict[str, Any]], *, expected: int | None = None) -> bool:
        def statements(db: sqlite3.Connection) -> bool:
            # One IMMEDIATE transaction: the version checked is the version written after.
            row = db.execute("SELECT version FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if row is None or (expected is not None and row[0] != expected):
                return False
            self._insert(db, conversation_id, items)
            db.execute("UPDATE conversations SET version = version + 1 WHERE id = ?", (conversation_id,))
            return True

        return self._db.write(statements)

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        sql = "SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY seq"
        return [json.loads(row[0]) for row in self._db.rows(sql, (conversation_id,))]

    def read(self, conversation_id: str) -> tuple[int, list[dict[str, Any]]] | None:
        found: list[tuple[int, list[dict[str, Any]]]] = []

        def statements(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT version FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if row is not None:
                sql = "SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY seq"
                found.append((int(row[0]), [json.loads(r[0]) for r in db.execute(sql, (conversation_id,))]))
            return True

        self._db.write(statements, begin="BEGIN")  # one snapshot of both
        return found[0] if found else None

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        sql = (
            "DELETE FROM conversation_items WHERE seq = (SELECT MIN(seq) FROM conversation_items "
            "WHERE conversation_id = ? AND item_id = ?) AND conversation_id = ?"
        )

        def statements(db: sqlite3.Connection) -> bool:
            if db.execute(sql, (conversation_id, item_id, conversation_id)).rowcount == 0:
                return False
            db.execute("UPDATE conversations SET version = version + 1 WHERE id = ?", (conversation_id,))
            return True

        return self._db.write(statements)


class SqliteRecords:
    def __init__(self, db: _Db) -> None:
        self._db = db

    def put(self, kind: str, record_id: str, document: dict[str, Any]) -> None:
        # An upsert keeps the row (and its rowid, the listing order) of an existing record.
        self._db.changed(
            "INSERT INTO records (kind, id, document) VALUES (?, ?, ?) "
            "ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document",
            (kind, record_id, json.dumps(document)),
        )

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        row = self._db.one("SELECT document FROM records WHERE kind = ? AND id = ?", (kind, record_id))
        return json.loads(row[0]) if row else None

    def delete(self, kind: str, record_id: str) -> bool:
        return self._db.changed("DELETE FROM records WHERE kind = ? AND id = ?", (kind, record_id)) > 0

    def all(self, kind: str) -> list[dict[str, Any]]:
        rows = self._db.rows("SELECT document FROM records WHERE kind = ? ORDER BY rowid", (kind,))
        return [json.loads(r[0]) for r in rows]


class SqliteScenarios:
    def __init__(self, db: _Db) -> None:
        self._db = db

    def put(self, scenario: StoredScenario) -> None:
        self._db.changed(
            "INSERT INTO scenarios (scope_key, name, scope, document) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (scope_key, name) DO UPDATE SET document = excluded.document",
            (json.dumps(scenario.scope), scenario.name, scenario.scope, json.dumps(scenario.document)),
        )

    def delete(self, scope: str | None, name: str) -> bool:
        sql = "DELETE FROM scenarios WHERE scope_key = ? AND name = ?"
        return self._db.changed(sql, (json.dumps(scope), name)) > 0

    def list(self) -> list[StoredScenario]:
        rows = self._db.rows("SELECT scope, name, document FROM scenarios ORDER BY rowid", ())
        return [StoredScenario(row[0], row[1], json.loads(row[2])) for row in rows]

    def clear(self, scope: str | None = None) -> int:
        if scope is None:
            return self._db.changed("DELETE FROM scenarios", ())
        return self._db.changed("DELETE FROM scenarios WHERE scope_key = ?", (json.dumps(scope),))


class SqliteStore:
    """Every part in `path` but the journal."""

    kind: str = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = _Db(path)
        with self._db.lock:
            db = self._db.connection
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(SCHEMA)
            for table, column, declaration in COLUMNS:
                if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            db.execute("CREATE INDEX IF NOT EXISTS responses_by_previous ON responses(previous_response_id)")
            # A background response still queued or in progress was cut off by the previous
            # process (a kill or a crash): nothing will ever finish it, so it failed.
            db.execute(
                "UPDATE responses SET response = json_set(response, '$.status', 'failed', '$.error', json(?)) "
                "WHERE json_extract(response, '$.status') IN ('queued', 'in_progress')",
                (json.dumps(INTERRUPTED),),
            )
        self.responses: Responses = SqliteResponses(self._db)
        self.conversations: Conversations = SqliteConversations(self._db)
        self.sessions: Records = SqliteRecords(self._db)
        self.scenarios: Scenarios = SqliteScenarios(self._db)
        self.journal: JournalLog = MemoryJournal()
        self.leases: Leases = MemoryLeases()  # one process owns the file
        self.events: EventLog | None = None  # one process: its harness fans events out itself
        self.shared = False

    def close(self) -> None:
        with self._db.lock:
            self._db.connection.close()
