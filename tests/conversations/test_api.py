"""The Conversations API endpoints through openai-python, every body validated with the SDK's models,
in the SQLite store (the plugin's server) and in the memory store (in process)."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import PTCEmulator
from tests.conversations.conversations_support import in_process, validated

pytestmark = pytest.mark.sdk  # the Conversations API's bodies, validated with the official client's models


def test_create_retrieve_update_delete(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create(metadata={"topic": "inventory"})
    assert conv.id.startswith("conv_") and conv.object == "conversation"
    assert conv.metadata == {"topic": "inventory"}
    assert conversations_sdk.conversations.retrieve(conv.id) == conv

    updated = conversations_sdk.conversations.update(conv.id, metadata={"topic": "demand"})
    assert updated.metadata == {"topic": "demand"} and updated.created_at == conv.created_at
    assert conversations_sdk.conversations.retrieve(conv.id).metadata == {"topic": "demand"}

    deleted = conversations_sdk.conversations.delete(conv.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (conv.id, True, "conversation.deleted")
    with pytest.raises(openai.NotFoundError) as caught:
        conversations_sdk.conversations.retrieve(conv.id)
    assert caught.value.body["message"] == f"Conversation with id '{conv.id}' not found."  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        conversations_sdk.conversations.delete(conv.id)
    with pytest.raises(openai.NotFoundError):
        conversations_sdk.conversations.items.list(conv.id)
    assert any("/v1/conversations/" in path for path in validated)


def test_items_are_created_listed_paged_retrieved_and_deleted(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create(items=[{"role": "user", "content": "first"}])
    added = conversations_sdk.conversations.items.create(
        conv.id,
        items=[
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "second"}]},
            {"role": "user", "content": "third"},
        ],
    )
    assert [i.type for i in added.data] == ["message", "message"]
    assert added.first_id == added.data[0].id and added.last_id == added.data[1].id and added.has_more is False

    asc = [i.content[0].text for i in conversations_sdk.conversations.items.list(conv.id, order="asc")]  # type: ignore[union-attr]
    assert asc == ["first", "second", "third"]
    # The default order is newest first; pages of one follow `after` to the end.
    pages = conversations_sdk.conversations.items.list(conv.id, limit=1)
    assert pages.has_more is True
    texts = [item.content[0].text for item in pages]  # type: ignore[union-attr]  # auto-pagination
    assert texts == ["third", "second", "first"]

    middle = added.data[0]
    assert conversations_sdk.conversations.items.retrieve(middle.id, conversation_id=conv.id) == middle
    after_delete = conversations_sdk.conversations.items.delete(middle.id, conversation_id=conv.id)
    assert after_delete.id == conv.id
    asc = [i.content[0].text for i in conversations_sdk.conversations.items.list(conv.id, order="asc")]  # type: ignore[union-attr]
    assert asc == ["first", "third"]
    with pytest.raises(openai.NotFoundError):
        conversations_sdk.conversations.items.retrieve(middle.id, conversation_id=conv.id)
    with pytest.raises(openai.NotFoundError):
        conversations_sdk.conversations.items.delete(middle.id, conversation_id=conv.id)
    with pytest.raises(openai.BadRequestError) as caught:
        conversations_sdk.conversations.items.list(conv.id, after="msg_nope")
    assert caught.value.body["param"] == "after"  # type: ignore[index]


def test_an_empty_conversation_lists_nothing(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create()
    page = conversations_sdk.conversations.items.list(conv.id)
    assert page.data == [] and page.has_more is False


def test_limits_and_shapes_are_enforced(conversations_sdk: openai.OpenAI) -> None:
    too_many = [{"role": "user", "content": str(n)} for n in range(21)]
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.create(items=too_many)  # type: ignore[arg-type]
    conv = conversations_sdk.conversations.create()
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.items.create(conv.id, items=too_many)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.items.create(conv.id, items=[{"type": "no_such_item"}])  # type: ignore[list-item]
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.create(metadata={f"k{n}": "v" for n in range(17)})
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.create(extra_body={"unknown": 1})
    with pytest.raises(openai.BadRequestError):
        conversations_sdk.conversations.items.list(conv.id, limit=101)
    assert conversations_sdk.conversations.items.list(conv.id).data == []  # nothing was added by the refusals


def test_item_references_resolve_to_stored_items(conversations_sdk: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "Hi."}]})
    response = conversations_sdk.responses.create(model="m", input="hello")
    conv = conversations_sdk.conversations.create(items=[{"type": "item_reference", "id": response.output[0].id}])
    (item,) = conversations_sdk.conversations.items.list(conv.id).data
    assert item.type == "message" and item.content[0].text == "Hi."  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError) as caught:
        conversations_sdk.conversations.create(items=[{"type": "item_reference", "id": "msg_missing"}])
    assert caught.value.body["param"] == "items[0].id"  # type: ignore[index]


def test_the_memory_store_keeps_conversations_too() -> None:
    async def run() -> None:
        async with in_process(Settings(store="memory", pool_size=1)) as client:
            conv = await client.conversations.create(items=[{"role": "user", "content": "one"}])
            await client.conversations.items.create(conv.id, items=[{"role": "user", "content": "two"}])
            page = await client.conversations.items.list(conv.id, order="asc")
            assert [i.content[0].text for i in page.data] == ["one", "two"]  # type: ignore[union-attr]
            first = page.data[0].id
            await client.conversations.items.delete(first, conversation_id=conv.id)
            page = await client.conversations.items.list(conv.id)
            assert [i.content[0].text for i in page.data] == ["two"]  # type: ignore[union-attr]
            await client.conversations.delete(conv.id)
            with pytest.raises(openai.NotFoundError):
                await client.conversations.retrieve(conv.id)

    asyncio.run(run())


def test_what_json_carries_but_a_reply_cannot_is_refused(ptc_emulator: PTCEmulator) -> None:
    root = ptc_emulator.base_url
    headers = {"content-type": "application/json", "authorization": "Bearer sk-test"}
    with httpx.Client(base_url=root, headers=headers) as http:
        lone = b'{"items": [{"role": "user", "content": "\\ud800"}]}'
        reply = http.post("/conversations", content=lone)
        assert reply.status_code == 400 and set(reply.json()["error"]) == {"message", "type", "param", "code"}
        conv = http.post("/conversations", json={}).json()["id"]
        nan = (
            b'{"items": [{"type": "function_call_output", "call_id": "c", '
            b'"output": [{"type": "input_text", "text": "x", "score": NaN}]}]}'
        )
        reply = http.post(f"/conversations/{conv}/items", content=nan)
        assert reply.status_code == 400
        assert http.get(f"/conversations/{conv}/items").json()["data"] == []
