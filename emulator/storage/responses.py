"""Where `store: true` responses live: SQLite in the data directory, or memory.

A stored response keeps the response object as returned, the input items of its request (with
ids), and its `previous_response_id`, so the whole conversation can be rebuilt by walking the
chain. Items are also indexed by id, for `item_reference` inputs. `store: false` traffic never
reaches a store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ptc_emulator.emulator.storage.conversations import ConversationStore, MemoryConversations, SqliteConversations

__all__ = ["MemoryStore", "SqliteStore", "Store", "StoredResponse"]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    previous_response_id: str | None


class Store(Protocol):
    conversations: ConversationStore
    """The Conversations API's conversations and items (`conversations.py`), in the same place."""

    def put(self, record: StoredResponse) -> None: ...

    def get(self, response_id: str) -> StoredResponse | None: ...

    def delete(self, response_id: str) -> bool: ...

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        """The stored item with this id, and the id of the response that holds it."""
        ...

    def count(self) -> int: ...

    def close(self) -> None: ...


def _item_ids(record: StoredResponse) -> Iterator[tuple[str, dict[str, Any]]]:
    for item in [*record.input_items, *record.response.get("output", [])]:
        if isinstance(item.get("id"), str):
            yield item["id"], item


class MemoryStore:
    def __init__(self) -> None:
        self._responses: dict[str, StoredResponse] = {}
        self._items: dict[str, tuple[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.conversations: ConversationStore = MemoryConversations()

    def put(self, record: StoredResponse) -> None:
        with self._lock:
            self._responses[record.id] = record
            for item_id, item in _item_ids(record):
                self._items[item_id] = (record.id, item)

    def get(self, response_id: str) -> StoredResponse | None:
        return self._responses.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            record = self._responses.pop(response_id, None)
            if record is None:
                return False
            for item_id, _ in _item_ids(record):
                if self._items.get(item_id, ("",))[0] == response_id:
                    del self._items[item_id]
            return True

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        return self._items.get(item_id)

    def count(self) -> int:
        return len(self._responses)

    def close(self) -> None:
        pass


INTERRUPTED = {
    "code": "server_error",
    "message": "The emulator stopped before this background response finished; create it again.",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_response_id TEXT,
    response TEXT NOT NULL,
    input_items TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY,
    response_id TEXT NOT NULL REFERENCES responses(id) ON DELETE CASCADE,
    item TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS items_by_response ON items(response_id);
"""


class SqliteStore:
    """One connection, serialised by a lock; WAL so a killed server leaves a consistent file.

    Every write is one transaction: a response and its items appear together or not at all.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            # A background response still queued or in progress was cut off by the previous
            # process (a kill or a crash): nothing will ever finish it, so it failed.
            self._db.execute(
                "UPDATE responses SET response = json_set(response, '$.status', 'failed', '$.error', json(?)) "
                "WHERE json_extract(response, '$.status') IN ('queued', 'in_progress')",
                (json.dumps(INTERRUPTED),),
            )
        self.conversations: ConversationStore = SqliteConversations(self._db, self._lock)

    def put(self, record: StoredResponse) -> None:
        dumps = json.dumps
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO responses (id, previous_response_id, response, input_items) "
                    "VALUES (?, ?, ?, ?)",
                    (record.id, record.previous_response_id, dumps(record.response), dumps(record.input_items)),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO items (id, response_id, item) VALUES (?, ?, ?)",
                    [(item_id, record.id, dumps(item)) for item_id, item in _item_ids(record)],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            row = self._db.execute(
                "SELECT response, input_items, previous_response_id FROM responses WHERE id = ?", (response_id,)
            ).fetchone()
        if row is None:
            return None
        return StoredResponse(response_id, json.loads(row[0]), json.loads(row[1]), row[2])

    def delete(self, response_id: str) -> bool:
        with self._lock:
            cursor = self._db.execute("DELETE FROM responses WHERE id = ?", (response_id,))
            return cursor.rowcount > 0

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            row = self._db.execute("SELECT response_id, item FROM items WHERE id = ?", (item_id,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def count(self) -> int:
        with self._lock:
            (n,) = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(n)

    def close(self) -> None:
        with self._lock:
            self._db.close()
