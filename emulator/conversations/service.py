"""The Conversations API: conversations and their items, kept in the same store as responses.

A conversation is an ordered list of items with ids. `responses.create(conversation=...)` reads
it as the history before the request's input (as `previous_response_id` reads a chain) and,
once the response is finished, appends the request's input items and the response's output
items to it, `program` and `program_output` included. A paused program therefore continues
through the conversation exactly as through `previous_response_id`: the next request sends the
tool outputs and names the conversation.

Storage is the store's conversations part (`storage.Conversations`, memory or SQLite); the rules
and the wire shapes are `Conversations`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator, model_validator

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.storage import Conversations as ConversationStore
from ptc_emulator.emulator.storage import StoredConversation, Turn, visible
from ptc_emulator.emulator.wire.items import InputItem, Item, ItemReference, WireModel
from ptc_emulator.emulator.wire.pages import listing, window
from ptc_emulator.emulator.wire.request import (
    SafetyIdentifier,
    check_json,
    check_metadata,
    metadata_few_keys,
    metadata_overfull,
)

__all__ = [
    "MAX_ITEMS_PER_REQUEST",
    "ConversationCreate",
    "ConversationUpdate",
    "Conversations",
    "ItemsCreate",
]

MAX_ITEMS_PER_REQUEST = 20
"""Items one create (of a conversation or of its items) may carry, as the hosted API allows."""


class _Body(WireModel):
    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        if metadata_overfull(value):
            return value  # refused for that, its values not walked first
        check_json(value)  # NaN, the infinities and lone surrogates: JSON carries them, a reply cannot
        return value


class ConversationCreate(_Body):
    """`POST /v1/conversations`."""

    items: list[InputItem] | None = Field(default=None, max_length=MAX_ITEMS_PER_REQUEST)
    metadata: dict[str, str] | None = None
    safety_identifier: SafetyIdentifier | None = None
    """openai 3.60: checked as on a response create (at most 128 characters). It has nothing to
    monitor here, and the Conversation object has no field that shows it."""

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _metadata = field_validator("metadata")(check_metadata)


class ConversationUpdate(_Body):
    """`POST /v1/conversations/{id}`: the metadata is required (null clears it)."""

    metadata: dict[str, str] | None

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _metadata = field_validator("metadata")(check_metadata)


class ItemsCreate(_Body):
    """`POST /v1/conversations/{id}/items`."""

    items: list[InputItem] = Field(max_length=MAX_ITEMS_PER_REQUEST)


class Conversations:
    """The endpoints' rules and shapes over a `ConversationStore`.

    `as_item` turns a validated input item into a conversation item (with an id and a status),
    or refuses it (a reasoning item's content this server did not issue), naming it by its param;
    `resolve` turns an `item_reference` into the stored item it names (in the caller's scope: an
    item of another scope's response is as a missing one); `as_input` reads a stored
    item back as an input item. They come from `history.py`, which owns those conversions."""

    def __init__(
        self,
        store: ConversationStore,
        *,
        ids: Callable[[str], str],
        clock: Callable[[], float],
        as_item: Callable[[Item, str], dict[str, Any]],
        resolve: Callable[[str, str, str | None], Item],
        as_input: Callable[[dict[str, Any]], Item],
    ) -> None:
        self.store = store
        self.ids = ids
        self.clock = clock
        self._as_item = as_item
        self._resolve = resolve
        self._as_input = as_input

    # ---- conversations --------------------------------------------------------------------------

    def create(self, body: ConversationCreate, scope: str | None = None) -> dict[str, Any]:
        items = self._new_items(body.items or [], scope)
        record = StoredConversation(self.ids("conv"), int(self.clock()), dict(body.metadata or {}), scope)
        self.store.create(record, items)
        return record.body()

    def retrieve(self, conversation_id: str, scope: str | None = None) -> dict[str, Any]:
        return self.stored(conversation_id, scope=scope).body()

    def update(self, conversation_id: str, body: ConversationUpdate, scope: str | None = None) -> dict[str, Any]:
        record = self.stored(conversation_id, scope=scope)
        updated = StoredConversation(record.id, record.created_at, dict(body.metadata or {}), record.scope)
        if not self.store.update(updated):
            raise messages.conversation_not_found(conversation_id)
        return updated.body()

    def delete(self, conversation_id: str, scope: str | None = None) -> dict[str, Any]:
        self.stored(conversation_id, scope=scope)
        if not self.store.delete(conversation_id):
            raise messages.conversation_not_found(conversation_id)
        return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}

    def stored(self, conversation_id: str, param: str | None = None, *, scope: str | None = None) -> StoredConversation:
        """The conversation, if a request in `scope` sees it (`visible`): one made in another scope
        is as one that does not exist, on every route."""
        record = self.store.get(conversation_id)
        if record is None or not visible(record.scope, scope):
            raise messages.conversation_not_found(conversation_id, param)
        return record

    # ---- items ----------------------------------------------------------------------------------

    def add_items(self, conversation_id: str, body: ItemsCreate, scope: str | None = None) -> dict[str, Any]:
        self.stored(conversation_id, scope=scope)
        items = self._new_items(body.items, scope)
        added = {item["id"]: index for index, item in enumerate(items)}

        def duplicate(ids: list[str]) -> list[int]:  # by the kept ids alone: no kept item is decoded
            for kept_id in ids:  # an id comes once in a conversation, as in a create's input
                if kept_id in added:
                    raise messages.duplicate_item_id(kept_id, f"items[{added[kept_id]}].id")
            return []

        self.store.item_page(conversation_id, duplicate)
        if not self.store.append(conversation_id, items):
            raise messages.conversation_not_found(conversation_id)
        return listing(items)

    def list_items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
        scope: str | None = None,
    ) -> dict[str, Any]:
        self.stored(conversation_id, scope=scope)
        more: list[bool] = []

        def pick(ids: list[str]) -> list[int]:  # the page's places, from the ids alone
            places, has_more = window(
                ids,
                after=after,
                limit=limit,
                order=order,
                missing=lambda after: messages.no_conversation_item_after(after, conversation_id),
            )
            more.append(has_more)
            return places

        data = self.store.item_page(conversation_id, pick)  # only the page's items are decoded
        return listing(data, has_more=more[0])

    def get_item(self, conversation_id: str, item_id: str, scope: str | None = None) -> dict[str, Any]:
        self.stored(conversation_id, scope=scope)
        # The first item with the id, decoded alone (`item_page`), not every stored one.
        found = self.store.item_page(conversation_id, lambda ids: [ids.index(item_id)] if item_id in ids else [])
        if not found:
            raise messages.conversation_item_not_found(conversation_id, item_id)
        return found[0]

    def delete_item(self, conversation_id: str, item_id: str, scope: str | None = None) -> dict[str, Any]:
        record = self.stored(conversation_id, scope=scope)
        if not self.store.delete_item(conversation_id, item_id):
            raise messages.conversation_item_not_found(conversation_id, item_id)
        return record.body()

    # ---- responses.create(conversation=...) -----------------------------------------------------

    def history(
        self, conversation_id: str, scope: str | None = None, *, room: int | None = None, truncate: bool = False
    ) -> list[Item]:
        """The conversation's items as a request's history, oldest first (`versioned_history`)."""
        return self.versioned_history(conversation_id, scope, room=room, truncate=truncate)[1]

    def versioned_history(
        self, conversation_id: str, scope: str | None = None, *, room: int | None = None, truncate: bool = False
    ) -> tuple[int, list[Item]]:
        """The conversation's items as a request's history, and the version they were read at
        (what `record` expects); a conversation the request's scope does not see is a 404.

        With `room` (the items the request's context has room for beside its input), a
        conversation of more items is found so by its store before any is read
        (`holds_over`), and refused with the hosted `context_length_exceeded`; with `truncate`
        (`truncation: "auto"`) only its newest `room` items are read and decoded instead. The read
        takes one more than `room`, so an append between the count and the read is held too."""
        self.stored(conversation_id, "conversation", scope=scope)
        if room is not None and not truncate and self.store.holds_over(conversation_id, room):
            raise messages.context_length_exceeded()
        read = self.store.read(conversation_id, last=None if room is None else room + 1)
        if read is None:
            raise messages.conversation_not_found(conversation_id, "conversation")
        version, raw = read
        if room is not None and len(raw) > room:
            if not truncate:
                raise messages.context_length_exceeded()
            raw = raw[len(raw) - room :]
        return version, [self._as_input(item) for item in raw]

    def record(
        self,
        conversation_id: str,
        input_items: list[dict[str, Any]],
        output: list[dict[str, Any]],
        *,
        expected: int | None = None,
    ) -> None:
        """Append a finished response's input and output items (a deleted conversation keeps nothing).

        With `expected` (the version its history was read at), the items are appended only if no
        other write changed the conversation since, in one atomic step of the store: of two
        continuations in flight at once, the first to finish appends, and the other is refused
        with the hosted API's `conversation_locked` error, so no item is ever appended twice."""
        self.append_turn(self.turn(conversation_id, input_items, output, expected=expected))

    @staticmethod
    def turn(
        conversation_id: str,
        input_items: list[dict[str, Any]],
        output: list[dict[str, Any]],
        *,
        expected: int | None = None,
    ) -> Turn:
        """What `record` appends: given to the store with the response, it is written in the same
        transaction (`Responses.put_with_turn`), and refused as `record` refuses it (the store's
        `TurnRefused` is the `conversation_locked` error)."""
        return Turn(conversation_id, [*input_items, *output], expected)

    def append_turn(self, turn: Turn) -> None:
        """`record`, of a turn made by `turn`."""
        if not self.store.append(turn.conversation_id, turn.items, expected=turn.expected):
            if turn.expected is not None and self.store.get(turn.conversation_id) is not None:
                raise messages.conversation_locked()

    def _new_items(self, items: list[Any], scope: str | None) -> list[dict[str, Any]]:
        made: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            if isinstance(item, ItemReference):
                item = self._resolve(item.id, f"items[{index}].id", scope)
            data = self._as_item(item, f"items[{index}]")
            data.setdefault("id", self.ids("item"))
            if any(earlier["id"] == data["id"] for earlier in made):
                raise messages.duplicate_item_id(data["id"], f"items[{index}].id")
            made.append(data)
        return made
