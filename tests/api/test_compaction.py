"""Compaction through the official client: `client.responses.compact(...)` returns the user
messages and one opaque, signed `compaction` item; replayed (store:false) or reached by
`previous_response_id`, that item stands for the conversation it compacted, so the scripted model
plays on as if nothing was compacted; a changed item is refused in OpenAI's error envelope."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import CompactedResponse, ResponseCompactionItem

from ptc_emulator.testing.server import PTCEmulator
from tests.api.api_support import PTC_TOOLS
from tests.support import ClientVersion

pytestmark = pytest.mark.sdk  # responses.compact and its item, as the official client sends and validates them

LOOKUP: dict[str, Any] = {
    "type": "function",
    "name": "lookup",
    "description": "looks a city's weather up",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SCENARIO = {
    "name": "weather-then-answer",
    "match": {"input": "^weather in (?P<city>\\w+)$"},
    "turns": [
        {"call": {"name": "lookup", "arguments": {"city": "{{ city }}"}}},
        {"message": "It is {{ output.sky }} in {{ city }}."},
    ],
}
PAUSED = {
    "name": "paused-at-compaction",
    "match": {"input": "^add twice$"},
    "turns": [
        {
            "program": "const a = await tools.add({a: 1, b: 2});\n"
            "const b = await tools.add({a: a.value, b: 10});\ntext(`sum=${b.value}`);"
        },
        {"message": "The program said {{ result }}."},
    ],
}


def dumped(items: list[Any]) -> list[dict[str, Any]]:
    """Items as a client replays them (a compacted user message is not the model's literal: no warning)."""
    return [item.model_dump(mode="json", exclude_none=True, warnings=False) for item in items]


def first_turn(client: openai.OpenAI, **options: Any) -> list[dict[str, Any]]:
    """The weather conversation up to its tool output: what gets compacted."""
    first = client.responses.create(model="gpt-5.4", input="weather in Oslo", tools=[LOOKUP], **options)
    (call,) = [item for item in first.output if item.type == "function_call"]
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "grey"})}
    return [{"type": "message", "role": "user", "content": "weather in Oslo"}, *dumped(first.output), output]


def test_compact_returns_the_user_messages_and_one_opaque_compaction_item(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    compacted = client.responses.compact(model="gpt-5.4", input=first_turn(client, store=False))
    assert isinstance(compacted, CompactedResponse)
    assert compacted.object == "response.compaction" and isinstance(compacted.created_at, int)
    *users, last = compacted.output
    assert [(u.type, getattr(u, "role", None)) for u in users] == [("message", "user")]
    assert isinstance(last, ResponseCompactionItem) and last.id
    assert "Oslo" not in last.encrypted_content and "grey" not in last.encrypted_content  # sealed, not readable
    assert compacted.usage.input_tokens > 0


def test_a_store_false_continuation_from_the_compaction_item_plays_on(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    ptc_emulator.add_scenario(SCENARIO)
    compacted = client.responses.compact(model="gpt-5.4", input=first_turn(client, store=False))
    window = dumped(compacted.output)
    answer = client.responses.create(model="gpt-5.4", input=window, tools=[LOOKUP], store=False)
    assert answer.output_text == "It is grey in Oslo."  # the tool output is read from the sealed window
    # The compacted window is smaller to a hosted model's context than the items it stands for.
    full = client.responses.create(model="gpt-5.4", input=first_turn(client, store=False), tools=[LOOKUP])
    assert answer.usage is not None and full.usage is not None
    assert answer.usage.input_tokens < full.usage.input_tokens


def test_a_stored_continuation_reaches_the_compaction_item_by_previous_response_id(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    ptc_emulator.add_scenario(SCENARIO)
    first = client.responses.create(model="gpt-5.4", input="weather in Oslo", tools=[LOOKUP])
    (call,) = [item for item in first.output if item.type == "function_call"]
    compacted = client.responses.compact(model="gpt-5.4", previous_response_id=first.id)
    # A new chain from the compacted window (stored), continued by id with only the new output.
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "blue"})}
    restart = client.responses.create(model="gpt-5.4", input=[*dumped(compacted.output), output], tools=[LOOKUP])
    assert restart.output_text == "It is blue in Oslo."
    items = client.responses.input_items.list(restart.id, order="asc").data
    assert [item.type for item in items] == ["message", "compaction", "function_call_output"]  # stored as sent
    again = client.responses.create(
        model="gpt-5.4", previous_response_id=restart.id, input="weather in Bergen", tools=[LOOKUP]
    )
    assert [item.type for item in again.output] == ["function_call"]


@pytest.mark.parametrize("store", [False, True])
def test_a_program_paused_at_compaction_time_stays_resumable(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, store: bool, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    ptc_emulator.add_scenario(PAUSED)
    first = client.responses.create(model="gpt-5.4", input="add twice", tools=PTC_TOOLS, store=store)
    (call,) = [item for item in first.output if item.type == "function_call"]
    if store:
        compacted = client.responses.compact(model="gpt-5.4", previous_response_id=first.id)
    else:
        history = [{"type": "message", "role": "user", "content": "add twice"}, *dumped(first.output)]
        compacted = client.responses.compact(model="gpt-5.4", input=history)
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    items = dumped(compacted.output)
    caller = call.model_dump(mode="json")["caller"]
    for answer in (3, 13):  # two pauses: the second continues from the first's output
        output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"value": answer})}
        response = client.responses.create(
            model="gpt-5.4", input=[*items, {**output, "caller": caller}], tools=PTC_TOOLS, store=False
        )
        items = [*items, {**output, "caller": caller}, *dumped(response.output)]
        calls = [item for item in response.output if item.type == "function_call"]
        if calls:
            (call,) = calls
            caller = call.model_dump(mode="json")["caller"]
    assert response.output_text == "The program said sum=13."


@pytest.mark.parametrize("change", ["tampered", "forged"])
def test_a_changed_compaction_item_is_refused(client: openai.OpenAI, ptc_emulator: PTCEmulator, change: str) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    compacted = client.responses.compact(model="gpt-5.4", input=first_turn(client, store=False))
    window = dumped(compacted.output)
    sealed = window[-1]["encrypted_content"]
    if change == "tampered":
        window[-1]["encrypted_content"] = sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB")
    else:
        window[-1] = {"type": "compaction", "encrypted_content": "e1.bm90IGlzc3VlZCBoZXJl"}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-5.4", input=window, tools=[LOOKUP], store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "invalid_encrypted_content"
    assert error["param"] == "input[1].encrypted_content"
    assert "could not be verified" in error["message"]


def test_a_compacted_suffix_keeps_what_came_before_it(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    oslo = first_turn(client, store=False)
    done = client.responses.create(model="gpt-5.4", input=oslo, tools=[LOOKUP], store=False)
    prefix = [*oslo, *dumped(done.output)]  # a finished exchange, not compacted
    compacted = client.responses.compact(model="gpt-5.4", input=first_turn(client, store=False))  # the suffix
    with_prefix = client.responses.create(
        model="gpt-5.4", input=[*prefix, *dumped(compacted.output)], tools=[LOOKUP], store=False
    )
    alone = client.responses.create(model="gpt-5.4", input=dumped(compacted.output), tools=[LOOKUP], store=False)
    assert with_prefix.output_text == alone.output_text == "It is grey in Oslo."
    assert with_prefix.usage is not None and alone.usage is not None
    counted = client.responses.input_tokens.count(model="gpt-5.4", input=prefix)  # type: ignore[arg-type]
    assert with_prefix.usage.input_tokens - alone.usage.input_tokens == counted.input_tokens  # the prefix stays
