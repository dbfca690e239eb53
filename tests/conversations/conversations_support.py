"""Clients for the Conversations API tests: every body validated with the SDK's own models."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItem, ConversationItemList

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import PTCEmulator
from tests.support import adapter, validate_body, validating_hooks

_ITEM_PATH = re.compile(r"/v1/conversations/[^/]+/items/[^/]+$")
_ITEMS_PATH = re.compile(r"/v1/conversations/[^/]+/items$")
_CONVERSATION_PATH = re.compile(r"/v1/conversations(/[^/]+)?$")
validated: list[str] = []


def validate_conversation_body(method: str, path: str, status: int, body: Any) -> None:
    """Strict SDK validation of a Conversations API body; other bodies as `tests.support` does."""
    if status >= 400 or "/v1/conversations" not in path:
        validate_body(method, path, status, body)
        return
    if _ITEM_PATH.search(path):
        if method == "DELETE":
            Conversation.model_validate(body)  # deleting an item returns the conversation
        else:
            adapter(ConversationItem).validate_python(body)
    elif _ITEMS_PATH.search(path):
        assert body["object"] == "list" and isinstance(body["has_more"], bool)
        if body["data"]:
            ConversationItemList.model_validate(body)
        else:
            assert body["first_id"] is None and body["last_id"] is None
    elif _CONVERSATION_PATH.search(path):
        if method == "DELETE":
            ConversationDeletedResource.model_validate(body)
        else:
            Conversation.model_validate(body)
    else:
        raise AssertionError(f"unexpected path {path}")
    validated.append(path)


_hook, _ahook = validating_hooks(validate_conversation_body)


def conversations_client(emulator: PTCEmulator) -> openai.OpenAI:
    http = httpx.Client(event_hooks={"response": [_hook]}, timeout=60)
    client: openai.OpenAI = emulator.client(http_client=http, max_retries=0)
    return client


def async_conversations_client(emulator: PTCEmulator) -> openai.AsyncOpenAI:
    """For the Agents SDK: no pooled connections (the Runner may run on a loop of its own)."""
    http = httpx.AsyncClient(
        event_hooks={"response": [_ahook]}, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)
    )
    client: openai.AsyncOpenAI = emulator.async_client(http_client=http, max_retries=0)
    return client


@contextlib.asynccontextmanager
async def in_process(settings: Settings) -> AsyncIterator[openai.AsyncOpenAI]:
    """The app in this process through httpx's ASGI transport, as `tests.support.in_process`, with
    the Conversations API bodies validated too."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", event_hooks={"response": [_ahook]}, timeout=60
        ) as http:
            yield openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="sk-test", http_client=http, max_retries=0)
