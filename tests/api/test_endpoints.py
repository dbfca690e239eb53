"""The other endpoints, through the SDK: retrieve, delete, cancel, input items, input tokens."""

from __future__ import annotations

import time

import openai
import pytest

from ptc_emulator.emulator.responses.usage import count
from ptc_emulator.testing.server import PTCEmulator
from tests.support import PTC_TOOLS, js

pytestmark = pytest.mark.sdk  # each endpoint's body, as the official client sends and validates it


def test_retrieve_returns_the_stored_response(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input=js("text('hi')"), tools=PTC_TOOLS)
    fetched = client.responses.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()
    assert fetched.output_text == "hi"


def test_store_false_responses_are_not_kept(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input=js("text('hi')"), tools=PTC_TOOLS, store=False)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.retrieve(created.id)
    assert caught.value.message == f"Error code: 404 - Response with id '{created.id}' not found."


def test_delete(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input=js("text('hi')"), tools=PTC_TOOLS)
    assert client.responses.delete(created.id) is None
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id=created.id, input="more", tools=PTC_TOOLS)
    assert caught.value.code == "previous_response_not_found"


def test_cancel_needs_a_background_response(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input=js("text('hi')"), tools=PTC_TOOLS)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.cancel(created.id)
    assert caught.value.message.endswith("Only responses created with background=true can be cancelled.")


def test_background_response_runs_and_can_be_cancelled(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": "slow"}, "turns": [{"message": "done", "fault": {"latency_ms": 3000}}]}
    )
    queued = client.responses.create(model="m", input="slow", background=True)
    assert queued.status == "queued" and queued.background is True
    cancelled = client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(queued.id).status == "cancelled"

    quick = client.responses.create(model="m", input=js("text('later')"), tools=PTC_TOOLS, background=True)
    deadline = time.monotonic() + 20
    while (current := client.responses.retrieve(quick.id)).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert current.status == "completed" and current.output_text == "later"
    # finished: the hosted API refuses the cancel (400 "Cannot cancel a completed response."), the
    # response unchanged; the emulator answered 200 with it, as if the cancel had been taken
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.cancel(quick.id)
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": "Cannot cancel a completed response.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert client.responses.retrieve(quick.id).status == "completed"
    # cancelling twice is idempotent: the cancelled one is answered again
    assert client.responses.cancel(queued.id).status == "cancelled"


def test_background_requires_store(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="x", background=True, store=False)
    assert caught.value.message.endswith("Background mode requires store=true.")


def test_input_items_paginate_as_the_sdk_expects(client: openai.OpenAI) -> None:
    items = [{"role": "user", "content": f"note {n}"} for n in range(45)]
    items.append({"role": "user", "content": js("text('ok')")})
    created = client.responses.create(model="m", input=items, tools=PTC_TOOLS)  # type: ignore[arg-type]
    page = client.responses.input_items.list(created.id, limit=20)
    assert len(page.data) == 20 and page.has_more
    everything = list(client.responses.input_items.list(created.id, limit=20))  # follows the cursor
    assert len(everything) == 46
    texts = [item.content[0].text for item in everything]  # type: ignore[union-attr]
    assert texts[0].startswith("Run this") and texts[-1] == "note 0"  # desc by default
    ascending = list(client.responses.input_items.list(created.id, order="asc", limit=7))
    assert [i.id for i in ascending] == [i.id for i in reversed(everything)]
    assert all(i.id and i.type == "message" and i.role == "user" for i in ascending)  # type: ignore[union-attr]


def test_input_tokens_count(client: openai.OpenAI) -> None:
    counted = client.responses.input_tokens.count(model="m", input="hello world")
    assert counted.input_tokens == 2 == count("hello world")
    with_instructions = client.responses.input_tokens.count(model="m", input="hello world", instructions="Be brief.")
    assert with_instructions.input_tokens == 2 + count("Be brief.")


def test_usage_is_reported(client: openai.OpenAI) -> None:
    response = client.responses.create(model="m", input=js("text('hello world')"))
    assert response.usage is not None
    assert response.usage.output_tokens == count(
        "Programmatic tool calling is not enabled for this request (add the "
        "programmatic_tool_calling tool), so the program was not run."
    )
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


def test_unknown_routes_and_methods_speak_openai(ptc_emulator: PTCEmulator) -> None:
    import httpx

    reply = httpx.get(f"{ptc_emulator.base_url}/nothing")
    assert reply.status_code == 404
    assert reply.json()["error"]["message"] == "Invalid URL (GET /v1/nothing)"
    reply = httpx.put(f"{ptc_emulator.base_url}/responses")
    assert reply.status_code == 405
    assert set(reply.json()["error"]) == {"message", "type", "param", "code"}
    assert reply.headers["x-request-id"].startswith("req_")
