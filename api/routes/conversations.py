"""The `/v1/conversations` endpoints. Routes only translate; `emulator.conversations` decides."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from ptc_emulator.api.bodies import BodyRoute
from ptc_emulator.api.context import Include, Limit, Order, engine_of, scope_of
from ptc_emulator.emulator.conversations.service import (
    ConversationCreate,
    Conversations,
    ConversationUpdate,
    ItemsCreate,
)
from ptc_emulator.emulator.release import release

__all__ = ["router"]

router = APIRouter(prefix="/v1/conversations", route_class=BodyRoute)


def _conversations(request: Request) -> Conversations:
    return engine_of(request).conversations


@router.post("")
async def create_conversation(body: ConversationCreate, request: Request) -> dict[str, Any]:
    conversations, scope = _conversations(request), scope_of(request.headers, None)
    try:
        # In a worker thread, as `create_items`: up to 20 items of any length each, made stored items.
        return await asyncio.to_thread(conversations.create, body, scope)
    finally:
        _release(body.items)


def _release(items: list[Any] | None) -> None:
    """An item's long content (200,000 parts) freed off the event loop, as a create's long input."""
    for item in items or ():
        release(getattr(item, "content", None))


@router.get("/{conversation_id}")
async def retrieve_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
    return _conversations(request).retrieve(conversation_id, scope_of(request.headers, None))


@router.post("/{conversation_id}")
async def update_conversation(conversation_id: str, body: ConversationUpdate, request: Request) -> dict[str, Any]:
    return _conversations(request).update(conversation_id, body, scope_of(request.headers, None))


@router.delete("/{conversation_id}")
async def delete_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
    return _conversations(request).delete(conversation_id, scope_of(request.headers, None))


@router.post("/{conversation_id}/items")
async def create_items(
    conversation_id: str,
    body: ItemsCreate,
    request: Request,
    include: Include = None,
) -> dict[str, Any]:
    conversations, scope = _conversations(request), scope_of(request.headers, None)
    try:
        # In a worker thread, as `list_items`: the new items' ids are held against every kept item's.
        return await asyncio.to_thread(conversations.add_items, conversation_id, body, scope)
    finally:
        _release(body.items)


@router.get("/{conversation_id}/items")
async def list_items(
    conversation_id: str,
    request: Request,
    after: str | None = None,
    limit: Limit = 20,
    order: Order = "desc",
    include: Include = None,
) -> dict[str, Any]:
    scope, conversations = scope_of(request.headers, None), _conversations(request)
    # In a worker thread: a long conversation's items take their time to read (200,000: a second
    # or more), which no other client waits on there.
    return await asyncio.to_thread(
        conversations.list_items, conversation_id, after=after, limit=limit, order=order, scope=scope
    )


@router.get("/{conversation_id}/items/{item_id}")
async def retrieve_item(
    conversation_id: str,
    item_id: str,
    request: Request,
    include: Include = None,
) -> dict[str, Any]:
    conversations = _conversations(request)  # in a worker thread, as `list_items`
    return await asyncio.to_thread(conversations.get_item, conversation_id, item_id, scope_of(request.headers, None))


@router.delete("/{conversation_id}/items/{item_id}")
async def delete_item(conversation_id: str, item_id: str, request: Request) -> dict[str, Any]:
    return _conversations(request).delete_item(conversation_id, item_id, scope_of(request.headers, None))
