"""The responses part as the engine takes it today: `Store` is the responses part with the
conversations beside it (`Engine` and `history` annotate with it), `MemoryStore` is one in
memory (a WebSocket connection keeps its `store: false` responses in one), and `view` shows a
whole `storage.Store` that way. New code imports the parts from `storage`."""

from __future__ import annotations

from typing import Any, Protocol

from ptc_emulator.emulator.storage import protocol
from ptc_emulator.emulator.storage.memory import MemoryConversations, MemoryResponses
from ptc_emulator.emulator.storage.protocol import Conversations, Responses, StoredResponse

__all__ = ["MemoryStore", "Store", "StoredResponse", "view"]


class Store(Responses, Protocol):
    conversations: Conversations
    """The Conversations API's conversations and items, in the same place."""

    def close(self) -> None: ...


class MemoryStore(MemoryResponses):
    def __init__(self) -> None:
        super().__init__()
        self.conversations: Conversations = MemoryConversations()

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

    def get(self, response_id: str) -> StoredResponse | None:
        return self._responses.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self._responses.delete(response_id)

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        return self._responses.item(item_id)

    def count(self) -> int:
        return self._responses.count()

    def close(self) -> None:
        pass


def view(store: protocol.Store) -> Store:
    return _View(store)
