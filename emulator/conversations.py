"""The Conversations API: conversations and their items, kept in the same store as responses.

A conversation is an ordered list of items with ids. `responses.create(conversation=...)` reads
it as the history before the request's input (as `previous_response_id` reads a chain) and,
once the response is finished, appends the request's input items and the response's output
items to it, `program` and `program_output` included. A paused program therefore continues
through the conversation exactly as through `previous_response_id`: the next request sends the
tool outputs and names the conversation.

Storage is `ConversationStore` (memory or the responses' SQLite file, see `store.py`); the rules
and the wire shapes are `Conversations`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field, field_validator, model_validator

from .errors import InvalidRequest, NotFound
from .items import InputItem, Item, ItemReference, WireModel
from .pages import listing, page
from .request import check_json, check_metadata

__all__ = [
    "MAX_ITEMS_PER_REQUEST",
    "ConversationCreate",
    "ConversationStore",
    "ConversationUpdate",
    "Conversations",
    "ItemsCreate",
    "MemoryConversations",
    "SqliteConversations",
    "StoredConversation",
    "conversation_id",
]

MAX_ITEMS_PER_REQUEST = 20
"""Items one create (of a conversation or of its items) may carry, as the hosted API allows."""


def conversation_id(value: Any) -> str | None:
    """The id in a request's `conversation` field: a string, or `{"id": ...}`."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    raise InvalidRequest(
        "Invalid type for 'conversation': expected a conversation id string or an object {\"id\": ...}.",
        param="conversation",
        code="invalid_type",
    )


class _Body(WireModel):
    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        check_json(value)  # NaN, the infinities and lone surrogates: JSON carries them, a reply cannot
        return value


class ConversationCreate(_Body):
    """`POST /v1/conversations`."""

    items: list[InputItem] | None = Field(default=None, max_length=MAX_ITEMS_PER_REQUEST)
    metadata: dict[str, str] | None = None

    _metadata = field_validator("metadata")(check_metadata)


class ConversationUpdate(_Body):
    """`POST /v1/conversations/{id}`: the metadata is required (null clears it)."""

    metadata: dict[str, str] | None

    _metadata = field_validator("metadata")(check_metadata)


class ItemsCreate(_Body):
    """`POST /v1/conversations/{id}/items`."""

    items: list[InputItem] = Field(max_length=MAX_ITEMS_PER_REQUEST)


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


class Conversations:
    """The endpoints' rules and shapes over a `ConversationStore`.

    `as_item` turns a validated input item into a conversation item (with an id and a status);
    `resolve` turns an `item_reference` into the stored item it names; `as_input` reads a stored
    item back as an input item. They come from `history.py`, which owns those conversions."""

    def __init__(
        self,
        store: ConversationStore,
        *,
        ids: Callable[[str], str],
        clock: Callable[[], float],
        as_item: Callable[[Item], dict[str, Any]],
        resolve: Callable[[str, str], Item],
        as_input: Callable[[dict[str, Any]], Item],
    ) -> None:
        self.store = store
        self.ids = ids
        self.clock = clock
        self._as_item = as_item
        self._resolve = resolve
        self._as_input = as_input

    # ---- conversations --------------------------------------------------------------------------

    def create(self, body: ConversationCreate) -> dict[str, Any]:
        items = self._new_items(body.items or [])
        record = StoredConversation(self.ids("conv"), int(self.clock()), dict(body.metadata or {}))
        self.store.create(record, items)
        return record.body()

    def retrieve(self, conversation_id: str) -> dict[str, Any]:
        return self.stored(conversation_id).body()

    def update(self, conversation_id: str, body: ConversationUpdate) -> dict[str, Any]:
        record = self.stored(conversation_id)
        updated = StoredConversation(record.id, record.created_at, dict(body.metadata or {}))
        if not self.store.update(updated):
            raise _not_found(conversation_id)
        return updated.body()

    def delete(self, conversation_id: str) -> dict[str, Any]:
        if not self.store.delete(conversation_id):
            raise _not_found(conversation_id)
        return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}

    def stored(self, conversation_id: str, param: str | None = None) -> StoredConversation:
        record = self.store.get(conversation_id)
        if record is None:
            raise _not_found(conversation_id, param)
        return record

    # ---- items ----------------------------------------------------------------------------------

    def add_items(self, conversation_id: str, body: ItemsCreate) -> dict[str, Any]:
        self.stored(conversation_id)
        items = self._new_items(body.items)
        if not self.store.append(conversation_id, items):
            raise _not_found(conversation_id)
        return listing(items)

    def list_items(
        self, conversation_id: str, *, after: str | None = None, limit: int = 20, order: str = "desc"
    ) -> dict[str, Any]:
        self.stored(conversation_id)
        return page(
            self.store.items(conversation_id),
            after=after,
            limit=limit,
            order=order,
            missing=f"No item with id '{{after}}' in conversation '{conversation_id}'.",
        )

    def get_item(self, conversation_id: str, item_id: str) -> dict[str, Any]:
        self.stored(conversation_id)
        found = next((item for item in self.store.items(conversation_id) if item.get("id") == item_id), None)
        if found is None:
            raise _item_not_found(conversation_id, item_id)
        return found

    def delete_item(self, conversation_id: str, item_id: str) -> dict[str, Any]:
        record = self.stored(conversation_id)
        if not self.store.delete_item(conversation_id, item_id):
            raise _item_not_found(conversation_id, item_id)
        return record.body()

    # ---- responses.create(conversation=...) -----------------------------------------------------

    def history(self, conversation_id: str) -> list[Item]:
        """The conversation's items as a request's history, oldest first."""
        self.stored(conversation_id, param="conversation")
        return [self._as_input(raw) for raw in self.store.items(conversation_id)]

    def record(self, conversation_id: str, input_items: list[dict[str, Any]], output: list[dict[str, Any]]) -> None:
        """Append a finished response's input and output items (a deleted conversation keeps nothing)."""
        self.store.append(conversation_id, [*input_items, *output])

    def _new_items(self, items: list[Any]) -> list[dict[str, Any]]:
        made = []
        for index, item in enumerate(items):
            if isinstance(item, ItemReference):
                item = self._resolve(item.id, f"items[{index}].id")
            data = self._as_item(item)
            data.setdefault("id", self.ids("item"))
            made.append(data)
        return made


def _not_found(conversation_id: str, param: str | None = None) -> NotFound:
    return NotFound(f"Conversation with id '{conversation_id}' not found.", param=param)


def _item_not_found(conversation_id: str, item_id: str) -> NotFound:
    return NotFound(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.")
