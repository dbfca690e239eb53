"""Documents that are not responses (agents, agent sessions), kept where the responses are.

A record is one JSON document under a kind and an id, listed in the order it was first put.
`SqliteRecords` writes a `records` table into the same SQLite file as `SqliteStore` (its own
connection; WAL lets both write), so a session outlives the server exactly as a stored response
does. `MemoryRecords` is its twin for `--store memory`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol

__all__ = ["MemoryRecords", "Records", "SqliteRecords"]


class Records(Protocol):
    def put(self, kind: str, record_id: str, document: dict[str, Any]) -> None: ...

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None: ...

    def delete(self, kind: str, record_id: str) -> bool: ...

    def all(self, kind: str) -> list[dict[str, Any]]:
        """Every document of a kind, oldest first."""
        ...

    def close(self) -> None: ...


class MemoryRecords:
    def __init__(self) -> None:
        self._kinds: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def put(self, kind: str, record_id: str, document: dict[str, Any]) -> None:
        text = json.dumps(document)  # a copy, as SQLite keeps one: later edits do not leak in
        with self._lock:
            self._kinds.setdefault(kind, {})[record_id] = text

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        text = self._kinds.get(kind, {}).get(record_id)
        return json.loads(text) if text is not None else None

    def delete(self, kind: str, record_id: str) -> bool:
        with self._lock:
            return self._kinds.get(kind, {}).pop(record_id, None) is not None

    def all(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            texts = list(self._kinds.get(kind, {}).values())
        return [json.loads(t) for t in texts]

    def close(self) -> None:
        pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    document TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
"""


class SqliteRecords:
    """One connection, serialised by a lock; each put is one statement, so one transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def put(self, kind: str, record_id: str, document: dict[str, Any]) -> None:
        with self._lock:
            # An upsert keeps the row (and its rowid, the listing order) of an existing record.
            self._db.execute(
                "INSERT INTO records (kind, id, document) VALUES (?, ?, ?) "
                "ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document",
                (kind, record_id, json.dumps(document)),
            )

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT document FROM records WHERE kind = ? AND id = ?", (kind, record_id)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def delete(self, kind: str, record_id: str) -> bool:
        with self._lock:
            cursor = self._db.execute("DELETE FROM records WHERE kind = ? AND id = ?", (kind, record_id))
            return cursor.rowcount > 0

    def all(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT document FROM records WHERE kind = ? ORDER BY rowid", (kind,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
