"""A request's conversation so far: stored history, replayed items, item references.

Stored responses keep their input items and output as returned; a conversation is rebuilt by
walking `previous_response_id` back to its start. A connection may add a store of its own (the
WebSocket mode keeps its `store: false` responses for the life of the socket), looked up first.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import Cache
from ptc_emulator.emulator.errors import NotFound
from ptc_emulator.emulator.history import replayed
from ptc_emulator.emulator.history.cursor import DERIVED, Cursor, Extension, retained
from ptc_emulator.emulator.release import release
from ptc_emulator.emulator.storage import ConnectionStore, ResponseStore, StoredResponse, visible
from ptc_emulator.emulator.tools.kinds import ITEMS
from ptc_emulator.emulator.wire.items import (
    InputItem,
    Item,
    ItemReference,
    Message,
    ReasoningItem,
    dump,
    of_type,
)
from ptc_emulator.emulator.wire.pages import page
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus

__all__ = ["MAX_CONTEXT_ITEMS", "Chains", "History", "Room", "as_input", "as_response_item", "not_found"]

MAX_CONTEXT_ITEMS = 200_000
"""The most items a response's context may hold: its input, and the history of its `conversation`
or `previous_response_id` chain before it. No hosted model could read more: the largest context
window is some 1.05 M tokens, and an item costs several tokens beyond its text, so 200,000 items of
one token each are past every window already. It is also the length the server is known to handle
well (a 200,000-item create: docs/server-cpu.md); past it nothing bounded a request's work, for a
conversation grows by every create's input and output (three creates of 400,000 messages made 1.2
M items, and each later request on it took a minute and held every other client for seconds).
Past it a request is refused (`context_length_exceeded`), or, with `truncation: "auto"`, its
history's oldest items are dropped. Counted before a history is read: a conversation's from its
store (`Conversations.holds_over`), a chain's record by record as it is walked back."""


@dataclass(frozen=True)
class Room:
    """How many items of history a request's context has room for (`items`), and whether the
    oldest are dropped past it (`truncation: "auto"`) or the request refused."""

    items: int
    truncate: bool

    @staticmethod
    def of(request: CreateRequest | CountTokensRequest | CompactRequest) -> Room:
        """The room the request's input leaves (its items counted from the body, an
        `item_reference` as the one item it stands for); an input past the bound alone is refused,
        whatever its `truncation` (only a history's items are dropped)."""
        given = request.input
        count = 0 if given is None else 1 if isinstance(given, str) else len(given)
        if count > MAX_CONTEXT_ITEMS:
            raise messages.context_length_exceeded()
        return Room(MAX_CONTEXT_ITEMS - count, getattr(request, "truncation", None) == "auto")

    def over(self) -> None:
        """A history past the room, refused unless its oldest items are dropped."""
        if not self.truncate:
            raise messages.context_length_exceeded()


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    return TypeAdapter(InputItem)


@dataclass
class _Chain:
    """A `previous_response_id` chain read back."""

    items: list[Item]
    found: Cursor | None
    """The cursor of its longest part one was kept for (`items` begins with the cursor's items)."""
    shareable: bool
    """No item the engine changes after validation: a cursor may hold them."""
    socket: ConnectionStore | None
    """The connection's own store it was wholly read from, if it was."""
    revision: int


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


def as_response_item(item: Item, ids: Callable[[str], str], sealed_id: str | None = None) -> dict[str, Any]:
    """An input item as `input_items.list` returns it: with an id and a status. A reasoning item
    sent without an id (the Agents SDK replays them so) is stored with the id its sealed content
    was issued for (`sealed_id`, which its checks go by), or else a new one: never with "", which
    no listing, retrieval or deletion could tell from another."""
    data = dump(item)
    if isinstance(item, ReasoningItem):
        if not item.id:
            data["id"] = sealed_id or ids("rs")
    elif isinstance(item, Message):
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


class Chains(Cache):
    """The conversation cursors of `previous_response_id` chains (`history/cursor.py`): the stored
    history's source. A request that continues a response gets its history beginning with the
    items of the cursor kept for the latest response of the chain that has one, and a new cursor
    over its whole history, which it extends and which is kept here for the next step.

    Two kinds, each by response id: the server's store's (a continuation still reads every
    record of its chain, so a response deleted since is never continued from here), bounded by
    `max_bytes` of what the cursors keep alive, the least recently used leaving first; and each
    WebSocket's own store's (a step reads only the records after the one it continues: a cursor
    holds while the store's `revision` is the one it was read at), `per_socket` for each socket,
    gone with it."""

    def __init__(self, max_bytes: int = 64 * 2**20, per_socket: int = 4) -> None:
        self.max_bytes = max_bytes
        self.per_socket = per_socket
        self.bytes = 0
        self._server: OrderedDict[str, Cursor] = OrderedDict()
        self._sockets: weakref.WeakKeyDictionary[ConnectionStore, tuple[int, OrderedDict[str, Cursor]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def find(self, response_id: str, socket: ConnectionStore | None = None) -> Cursor | None:
        """The cursor of the conversation up to and of `response_id` (of a socket's own store, or
        the server's)."""
        with self._lock:
            if socket is None:
                found = self._server.get(response_id)
                if found is not None:
                    self._server.move_to_end(response_id)
                return found
            kept = self._sockets.get(socket)
            if kept is None or kept[0] != socket.revision:
                return None
            found = kept[1].get(response_id)
            if found is not None:
                kept[1].move_to_end(response_id)
            return found

    def keep(self, response_id: str, cursor: Cursor, socket: ConnectionStore | None = None, revision: int = 0) -> bool:
        """Keep `cursor`, the conversation up to and of `response_id` (read from `socket`'s own
        records at its `revision`, or from the server's store); False if it is not kept."""
        with self._lock:
            if socket is None:
                if cursor.size > self.max_bytes:
                    return False
                old = self._server.pop(response_id, None)
                self.bytes += cursor.size - (old.size if old is not None else 0)
                self._server[response_id] = cursor
                while self.bytes > self.max_bytes:
                    self.bytes -= self._server.popitem(last=False)[1].size
                return True
            kept = self._sockets.get(socket)
            if kept is None or kept[0] != revision:
                kept = self._sockets[socket] = (revision, OrderedDict())
            kept[1][response_id] = cursor
            kept[1].move_to_end(response_id)
            while len(kept[1]) > self.per_socket:
                kept[1].popitem(last=False)
            return revision == socket.revision

    def clear(self) -> None:
        with self._lock:
            self._server.clear()
            self._sockets.clear()
            self.bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._server) + sum(len(kept) for _, kept in self._sockets.values())


class History:
    """What stored responses hold, and the sources that recognise a conversation again: the
    body reader (`bodies`, for `store: false` replays), the stored responses' validated items
    (`validated`) and the chains' cursors (`chains`). Each is a cache the engine owns."""

    def __init__(self, store: ResponseStore) -> None:
        self.store = store
        self.bodies = replayed.PrefixCache()
        """`store: false` bodies' known prefixes, validated once (`read_create`)."""
        self.validated = replayed.StoredItems()
        """Finished stored responses' items, validated once (ids are this server's own)."""
        self.chains = Chains()
        """The cursors of `previous_response_id` chains."""

    def caches(self) -> dict[str, Cache]:
        """The caches this history owns, by name (for the app's registry)."""
        return {"replayed bodies": self.bodies, "stored items": self.validated, "chains": self.chains}

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
        listed = self.seen(response_id, scope).input_items
        release(listed)  # freed a slice at a time, not in one call as this returns
        return page(
            listed,
            after=after,
            limit=limit,
            order=order,
            missing=lambda after: messages.no_input_item_after(after, response_id),
        )

    def load(
        self,
        response_id: str,
        local: ResponseStore | None = None,
        scope: str | None = None,
        room: Room | None = None,
    ) -> list[Item]:
        """The items before and of a stored response, oldest first (instructions are not carried);
        a response a request in `scope` does not see (`visible`) is as one that does not exist.
        With `room`, at most `room.items` of them (`_chain`)."""
        return self._chain(response_id, local, scope, room).items

    def continuing(
        self,
        response_id: str,
        local: ResponseStore | None = None,
        scope: str | None = None,
        room: Room | None = None,
    ) -> tuple[list[Item], Extension]:
        """`load`, for a request that continues the response: with the cursor of the longest part
        of the chain one was kept for (the items begin with its items), and a new one over these
        items, kept for the next step, which this request extends (a history cut to its room,
        `truncation: "auto"`, is neither: the next step cuts it afresh)."""
        chain = self._chain(response_id, local, scope, room)
        if not chain.shareable:
            return chain.items, Extension(chain.found)
        known = len(chain.found.items) if chain.found is not None else 0
        size = (chain.found.size if chain.found is not None else 0) + sum(
            retained(item) + DERIVED for item in chain.items[known:]
        )
        cursor = Cursor(tuple(chain.items), size)
        kept = self.chains.keep(response_id, cursor, chain.socket, chain.revision)
        return chain.items, Extension(chain.found, cursor if kept else None)

    def _chain(self, response_id: str, local: ResponseStore | None, scope: str | None, room: Room | None) -> _Chain:
        """A connection's own store (`local`, a `ConnectionStore`) is read back from only for the
        records after the latest one a cursor was kept for (the same item objects). The server's
        store is read back wholly (a record deleted since is never continued), and the items of
        the records a cursor was kept for are the cursor's.

        With `room`, the items are counted as the records are walked back, before any is
        validated: past `room.items` the walk stops, and the request is refused
        (`context_length_exceeded`), or, with `truncation: "auto"`, only the newest `room.items`
        are validated and kept (the records before are not read)."""
        socket = local if isinstance(local, ConnectionStore) else None
        revision = socket.revision if socket is not None else 0
        chain: list[StoredResponse] = []
        found: Cursor | None = None
        counted = 0
        next_id: str | None = response_id
        while next_id is not None:
            if socket is not None:
                found = self.chains.find(next_id, socket)
                if found is not None:
                    counted += len(found.items)
                    break
            record = self.record(next_id, local)
            if record is None or (next_id == response_id and not visible(record.scope, scope)):
                raise messages.previous_response_not_found(response_id)
            status = record.response.get("status")
            if status not in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
                raise messages.previous_response_unfinished(next_id, status)
            if socket is not None and socket.get(next_id) is not record:
                socket = None  # a record of the whole store: read the chain afresh each time
            if socket is None and found is None:
                found = self.chains.find(next_id)  # the records before it are still read, not their items
                if found is not None:
                    counted += len(found.items)
                    if room is not None and counted > room.items:
                        break
                    next_id = record.previous_response_id
                    continue
            if found is None:
                chain.append(record)
                counted += len(record.input_items) + len(record.response["output"])
            if room is not None and counted > room.items:
                break
            next_id = record.previous_response_id
        drop = 0
        if room is not None and counted > room.items:
            room.over()  # refused, unless the oldest items are dropped
            drop = counted - room.items
        items: list[Item] = []
        if found is not None:
            items.extend(found.items[drop:] if drop else found.items)
            drop = max(drop - len(found.items), 0)
        shareable = True
        for record in reversed(chain):  # each finished response's items, validated once
            known = self.validated.get(record.id)
            size = len(record.input_items) + len(record.response["output"])
            if drop >= size:  # (its items all dropped: not validated)
                drop -= size
                continue
            if known is None and drop:  # a record cut by the room: only its kept items validated
                items.extend(as_input(r) for r in [*record.input_items, *record.response["output"]][drop:])
                drop = 0
                continue
            if known is None:
                raw = [*record.input_items, *record.response["output"]]
                converted = [as_input(r) for r in raw]
                self.validated.put(record.id, raw, converted)
                known = tuple(converted)
                if self.validated.get(record.id) is None:  # items the engine changes: never shared
                    shareable = False
                release(raw)  # its dicts freed a slice at a time once the record goes, not in one call
            items.extend(known[drop:] if drop else known)
            drop = 0
        if room is not None and counted > room.items:  # cut: no cursor holds it, none begins it
            return _Chain(items, None, False, socket, revision)
        return _Chain(items, found, shareable, socket, revision)

    def recovered(self, items: list[Item], scope: str | None = None, room: Room | None = None) -> list[Item]:
        """What came before the replayed output of a stored response, when the input starts there.

        A client may continue by sending a stored response's output back with its tool outputs
        and no user message and no previous_response_id (the overview article's loop does); the
        items' ids find the conversation. With `room`, held to it as a chain is (`_chain`).
        """
        for item in items:
            item_id = getattr(item, "id", None)
            found = self.store.item_in(scope, item_id) if isinstance(item_id, str) else None
            if found is not None:
                record = self.stored(found[0])
                own = record.input_items
                if room is not None and len(own) > room.items:
                    room.over()
                    own = own[len(own) - room.items :]
                rest = Room(room.items - len(own), room.truncate) if room is not None else None
                prefix = self.load(record.previous_response_id, room=rest) if record.previous_response_id else []
                return [*prefix, *(as_input(raw) for raw in own)]
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
