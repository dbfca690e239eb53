"""A request's conversation so far: stored history, replayed items, item references.

Stored responses keep their input items and output as returned; a conversation is rebuilt by
walking `previous_response_id` back to its start. A connection may add a store of its own (the
WebSocket mode keeps its `store: false` responses for the life of the socket), looked up first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import NotFound
from ptc_emulator.emulator.history import replayed
from ptc_emulator.emulator.storage import ConnectionStore, ResponseStore, StoredResponse, visible
from ptc_emulator.emulator.tools.kinds import ITEMS
from ptc_emulator.emulator.wire.items import (
    InputItem,
    Item,
    ItemReference,
    Message,
    dump,
    of_type,
)
from ptc_emulator.emulator.wire.pages import page
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus

__all__ = ["History", "as_input", "as_response_item", "not_found"]


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    return TypeAdapter(InputItem)


def not_found(response_id: str) -> NotFound:
    return messages.response_not_found(response_id)


def as_input(raw: dict[str, Any]) -> Item:
    """A stored item (input or output) as an input item (without the fields its listing added)."""
    kind = raw.get("type")
    surface = ITEMS.get(kind) if isinstance(kind, str) else None
    listed = surface.listed_only if surface is not None else ()
    data = {k: v for k, v in raw.items() if k != "created_by" and k not in listed}
    item: Item = _adapter().validate_python(data, strict=False)
    return item


_LISTED_IDS = {"compaction": "cmp", "additional_tools": "at", "configuration_update": "cfg"}


def as_response_item(item: Item, ids: Callable[[str], str]) -> dict[str, Any]:
    """An input item as `input_items.list` returns it: with an id and a status."""
    data = dump(item)
    if isinstance(item, Message):
        data.setdefault("id", ids("msg"))
        if isinstance(item.content, str):
            part = "output_text" if item.role == "assistant" else "input_text"
            extra: dict[str, Any] = {"annotations": []} if part == "output_text" else {}
            data["content"] = [{"type": part, "text": item.content, **extra}]
        data.setdefault("status", "completed")
    elif item.type in _LISTED_IDS:  # items of no tool kind that a listing shows with an id
        data.setdefault("id", ids(_LISTED_IDS[item.type]))
    else:  # a tool kind's item: as its kind lists it
        surface = ITEMS.get(item.type)
        if surface is not None and surface.listed_id is not None:
            data.setdefault("id", ids(surface.listed_id))
            for name, value in surface.listed:
                data.setdefault(name, value)
    return data


class History:
    def __init__(self, store: ResponseStore) -> None:
        self.store = store
        self.validated = replayed.StoredItems()
        """Finished stored responses' items, validated once (ids are this server's own)."""

    def record(self, response_id: str, local: ResponseStore | None = None) -> StoredResponse | None:
        found = local.get(response_id) if local is not None else None
        return found if found is not None else self.store.get(response_id)

    def stored(self, response_id: str) -> StoredResponse:
        """The stored response, whatever scope it was made in (the server's own work)."""
        record = self.store.get(response_id)
        if record is None:
            raise not_found(response_id)
        return record

    def seen(self, response_id: str, scope: str | None) -> StoredResponse:
        """The stored response, if a request in `scope` sees it (`visible`): one made in another
        scope is as one that does not exist, on every route."""
        record = self.store.get(response_id)
        if record is None or not visible(record.scope, scope):
            raise not_found(response_id)
        return record

    def input_items(
        self,
        response_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
        scope: str | None = None,
    ) -> dict[str, Any]:
        """A page of a stored response's input items (`GET /v1/responses/{id}/input_items`)."""
        return page(
            self.seen(response_id, scope).input_items,
            after=after,
            limit=limit,
            order=order,
            missing=lambda after: messages.no_input_item_after(after, response_id),
        )

    def load(self, response_id: str, local: ResponseStore | None = None, scope: str | None = None) -> list[Item]:
        """The items before and of a stored response, oldest first (instructions are not carried);
        a response a request in `scope` does not see (`visible`) is as one that does not exist.

        A connection's own store (`local`, a `ConnectionStore`) remembers the latest conversations
        read back wholly from its records, so a socket's step reads only the records after the
        one it continues (the same item objects, which the rules' pass then finds)."""
        chains = local if isinstance(local, ConnectionStore) else None
        chain: list[StoredResponse] = []
        known_before: tuple[Item, ...] = ()
        next_id: str | None = response_id
        while next_id is not None:
            remembered = chains.chain(next_id) if chains is not None else None
            if remembered is not None:
                known_before = remembered
                break
            record = self.record(next_id, local)
            if record is None or (next_id == response_id and not visible(record.scope, scope)):
                raise messages.previous_response_not_found(response_id)
            status = record.response.get("status")
            if status not in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
                raise messages.previous_response_unfinished(next_id, status)
            if chains is not None and chains.get(next_id) is not record:
                chains = None  # a record of the whole store: read the chain afresh each time
            chain.append(record)
            next_id = record.previous_response_id
        items: list[Item] = list(known_before)
        for record in reversed(chain):  # each finished response's items, validated once
            known = self.validated.get(record.id)
            if known is None:
                raw = [*record.input_items, *record.response["output"]]
                converted = [as_input(r) for r in raw]
                self.validated.put(record.id, raw, converted)
                known = tuple(converted)
                if self.validated.get(record.id) is None:  # items the engine changes: never shared
                    chains = None
            items.extend(known)
        if chains is not None:
            chains.keep_chain(response_id, tuple(items))
        return items

    def recovered(self, items: list[Item], scope: str | None = None) -> list[Item]:
        """What came before the replayed output of a stored response, when the input starts there.

        A client may continue by sending a stored response's output back with its tool outputs
        and no user message and no previous_response_id (the overview article's loop does); the
        items' ids find the conversation.
        """
        for item in items:
            item_id = getattr(item, "id", None)
            found = self.store.item_in(scope, item_id) if isinstance(item_id, str) else None
            if found is not None:
                record = self.stored(found[0])
                prefix = self.load(record.previous_response_id) if record.previous_response_id else []
                return [*prefix, *(as_input(raw) for raw in record.input_items)]
        return []

    def reference(self, item_id: str, param: str, scope: str | None = None) -> Item:
        """The stored item an `item_reference` names, as an input item: an item of a response made
        in another scope than the request's is as one that does not exist."""
        found = self.store.item_in(scope, item_id)
        if found is None:
            raise messages.item_not_found(item_id, param)
        try:
            return as_input(found[1])
        except ValidationError as e:
            raise messages.item_not_input(item_id, param) from e

    def input(
        self, request: CreateRequest | CountTokensRequest | CompactRequest, scope: str | None = None
    ) -> list[Item]:
        """This request's input items, with item references resolved (in the request's scope)."""
        if request.input is None:
            return []
        if isinstance(request.input, str):
            return [Message(role="user", content=request.input)]
        if next(of_type(request.input, ItemReference), None) is None:
            return cast(list[Item], list(request.input))
        items: list[Item] = []
        for index, item in enumerate(request.input):
            if isinstance(item, ItemReference):
                found = self.store.item_in(scope, item.id)
                if found is None:
                    raise messages.item_not_found(item.id, f"input[{index}].id")
                try:
                    item = as_input(found[1])
                except ValidationError as e:
                    raise messages.item_not_input(item.id, f"input[{index}].id") from e
            items.append(item)
        return items
