"""The Conversations API's storage: conversations and their items, in memory or in the
responses' SQLite file (`storage/responses.py` opens both on one connection)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ConversationStore", "MemoryConversations", "SqliteConversations", "StoredConversation"]


@dataclass(frozen=True, slots=True)
class StoredConversation:
    id: str
    created_at: int
    metadata: dict[str, str]

    def body(self) -> dict[str, Any]:
        return {"id": self.id, "object": "conversation", "created_at": self.created_at, "metadata": self.metadata}


class ConversationStore(Protocol):
    """Conversations and their items in order; every write is atomic."""

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None: ...

    def get(self, conversation_id: str) -> StoredConversation | None: ...

    def update(self, record: StoredConversation) -> bool: ...

    def delete(self, conversation_id: str) -> bool: ...

    def append(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        """Add items at the end; False if the conversation is gone."""
        ...

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        """Its items, oldest first."""
        ...

    def delete_item(self, conversation_id: str, item_id: str) -> bool: ...


class MemoryConversations:
    def __init__(self) -> None:
        self._conversations: dict[str, StoredConversation] = {}
        self._items: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._conversations[record.id] = record
            self._items[record.id] = list(items)

    def get(self, conversation_id: str) -> StoredConversation | None:
        return self._conversations.get(conversation_id)

    def update(self, record: StoredConversation) -> bool:
        with self._lock:
            if record.id not in self._conversations:
                return False
            self._conversations[record.id] = record
            return True

    def delete(self, conversation_id: str) -> bool:
        with self._lock:
            self._items.pop(conversation_id, None)
            return self._conversations.pop(conversation_id, None) is not None

    def append(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        with self._lock:
            if conversation_id not in self._items:
                return False
            self._items[conversation_id].extend(items)
            return True

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.get(conversation_id, ()))

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        with self._lock:
            items = self._items.get(conversation_id, [])
            index = next((i for i, item in enumerate(items) if item.get("id") == item_id), None)
            if index is None:
                return False
            del items[index]
            return True


SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_items (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX IF NOT EXISTS conversation_items_by_id ON conversation_items(conversation_id, item_id);
"""


class SqliteConversations:
    """In the responses' SQLite file, on its connection and under its lock (see `SqliteStore`)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db = db
        self._lock = lock
        with self._lock:
            self._db.executescript(SCHEMA)

    def _write(self, statements: Callable[[], bool]) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                done = statements()
                self._db.execute("COMMIT")
                return done
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _insert(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        (last,) = self._db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM conversation_items WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        self._db.executemany(
            "INSERT INTO conversation_items (conversation_id, seq, item_id, item) VALUES (?, ?, ?, ?)",
            [(conversation_id, last + n, item["id"], json.dumps(item)) for n, item in enumerate(items, 1)],
        )

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        def statements() -> bool:
            self._db.execute(
                "INSERT INTO conversations (id, created_at, metadata) VALUES (?, ?, ?)",
                (record.id, record.created_at, json.dumps(record.metadata)),
            )
            self._insert(record.id, items)
            return True

        self._write(statements)

    def get(self, conversation_id: str) -> StoredConversation | None:
        with self._lock:
            row = self._db.execute(
                "SELECT created_at, metadata FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        return StoredConversation(conversation_id, int(row[0]), json.loads(row[1])) if row else None

    def update(self, record: StoredConversation) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "UPDATE conversations SET metadata = ? WHERE id = ?", (json.dumps(record.metadata), record.id)
            )
            return cursor.rowcount > 0

    def delete(self, conversation_id: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount > 0

    def append(self, conversation_id: str, items: list[dict[str, Any]]) -> bool:
        def statements() -> bool:
            found = self._db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if found is None:
                return False
            self._insert(conversation_id, items)
            return True

        return self._write(statements)

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM conversation_items WHERE seq = (SELECT MIN(seq) FROM conversation_items "
                "WHERE conversation_id = ? AND item_id = ?) AND conversation_id = ?",
                (conversation_id, item_id, conversation_id),
            )
            return cursor.rowcount > 0
