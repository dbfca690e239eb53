"""The responses part as the engine reads it: `ResponseStore` is the responses part with the
conversations beside it (a continuation reads both), and `view` shows a whole `storage.Store`
that way.

`ConnectionStore` is a WebSocket connection's own cache of its `store: false` responses: never
shared, gone with the connection, so it keeps the records it is given (no copies), and a paused
program's one continuation is decided under its lock. Since every step of a socket's loop
continues the one before, it also counts the changes that could make a conversation read back
from it stale (`revision`: the history's cursors of its chains hold while it stays the same), so
a step's work does not grow with the conversation."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ptc_emulator.emulator.storage import protocol
from ptc_emulator.emulator.storage.memory import FREEING, UNFINISHED, MemoryConversations, item_ids
from ptc_emulator.emulator.storage.protocol import Conversations, Responses, StoredResponse, Turn

__all__ = ["ConnectionStore", "ResponseStore", "view"]


class ResponseStore(Responses, Protocol):
    conversations: Conversations
    """The Conversations API's conversations and items, in the same place."""

    def close(self) -> None: ...


class ConnectionStore:
    def __init__(self) -> None:
        self._responses: dict[str, StoredResponse] = {}
        self._items: dict[str, tuple[str, dict[str, Any], str | None]] = {}
        self._continuations: dict[str, tuple[str, str]] = {}
        """By paused response id: the response that resumed its program, and its digest."""
        self.revision = 0
        """Counts the finished records replaced and the records deleted: what was read back from
        this store holds while it stays the same."""
        self._lock = threading.Lock()
        self._conversations = MemoryConversations()
        self.conversations: Conversations = self._conversations

    def put(self, record: StoredResponse) -> None:
        with self._lock:
            self._put(record)

    def put_continuation(self, record: StoredResponse, digest: str) -> str | None:
        with self._lock:
            return self._put_continuation(record, digest)

    def _put_continuation(self, record: StoredResponse, digest: str | None) -> str | None:
        paused = record.previous_response_id
        if digest is not None and paused is not None and record.id not in self._responses:
            kept = self._taken(paused)
            if kept is not None:
                return kept[0]
            self._continuations[paused] = (record.id, digest)
        self._put(record)
        return None

    def put_with_turn(self, record: StoredResponse, turn: Turn, digest: str | None = None) -> str | None:
        """With the connection's own conversations (the server's store keeps the server's)."""

        def keep() -> str | None:
            with self._lock:
                return self._put_continuation(record, digest)

        return self._conversations.with_turn(turn, keep)

    def continuation(self, response_id: str) -> tuple[str, str] | None:
        with self._lock:
            return self._taken(response_id)

    def replace_unfinished(self, record: StoredResponse) -> bool:
        with self._lock:
            kept = self._responses.get(record.id)
            if kept is None or kept.response.get("status") not in UNFINISHED:
                return False
            self._put(record)
            return True

    def _taken(self, paused: str) -> tuple[str, str] | None:
        kept = self._continuations.get(paused)
        if kept is None:
            return None
        record = self._responses.get(kept[0])
        if record is None or record.response.get("status") in FREEING:
            return None
        return kept

    def _put(self, record: StoredResponse) -> None:
        old = self._responses.get(record.id)
        if old is not None and old.response.get("status") not in UNFINISHED:  # a chain may have been read from it
            self.revision += 1
        self._responses[record.id] = record
        for item_id, item in item_ids(record):
            self._items[item_id] = (record.id, item, record.scope)

    def get(self, response_id: str) -> StoredResponse | None:
        return self._responses.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            record = self._responses.pop(response_id, None)
            if record is None:
                return False
            self.revision += 1
            for item_id, _ in item_ids(record):
                if self._items.get(item_id, ("",))[0] == response_id:
                    del self._items[item_id]
            return True

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        found = self._items.get(item_id)
        return (found[0], found[1]) if found is not None else None

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        found = self._items.get(item_id)
        return (found[0], found[1]) if found is not None and found[2] == scope else None

    def count(self) -> int:
        return len(self._responses)

    def close(self) -> None:
        pass


class _View:
    """A whole store's responses and conversations, as one `Store`; closing it closes nothing
    (the whole store is closed by whoever opened it)."""

    def __init__(self, store: protocol.Store) -> None:
        self._responses = store.responses
        self.conversations = store.conversations

    def put(self, record: StoredResponse) -> None:
        self._responses.put(record)

    def put_continuation(self, record: StoredResponse, digest: str) -> str | None:
        return self._responses.put_continuation(record, digest)

    def put_with_turn(self, record: StoredResponse, turn: Turn, digest: str | None = None) -> str | None:
        return self._responses.put_with_turn(record, turn, digest)

    def continuation(self, response_id: str) -> tuple[str, str] | None:
        return self._responses.continuation(response_id)

    def replace_unfinished(self, record: StoredResponse) -> bool:
        return self._responses.replace_unfinished(record)

    def get(self, response_id: str) -> StoredResponse | None:
        return self._responses.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self._responses.delete(response_id)

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        return self._responses.item(item_id)

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        return self._responses.item_in(scope, item_id)

    def count(self) -> int:
        return self._responses.count()

    def close(self) -> None:
        pass


def view(store: protocol.Store) -> ResponseStore:
    return _View(store)
