"""`context_management: [{type: "compaction", compact_threshold}]` on create: a context that reaches
the threshold is compacted before the model's turn, the output starts with the compaction item
(streamed with `response.compaction.compacting`), and the conversation continues by the latest
response id with only new input."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.api.test_compaction import LOOKUP, SCENARIO

COMPACT_AT_ONE = [{"type": "compaction", "compact_threshold": 1}]


def test_a_context_over_the_threshold_is_compacted_and_continues_by_id(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    first = client.responses.create(
        model="gpt-5.4", input="weather in Oslo", tools=[LOOKUP], context_management=COMPACT_AT_ONE
    )
    assert [item.type for item in first.output] == ["compaction", "function_call"]
    call = first.output[1]
    assert call.type == "function_call"
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "white"})}
    second = client.responses.create(
        model="gpt-5.4",
        previous_response_id=first.id,
        input=[output],  # type: ignore[list-item]
        tools=[LOOKUP],
        context_management=COMPACT_AT_ONE,
    )
    assert second.output_text == "It is white in Oslo."
    # Under the threshold nothing is compacted.
    third = client.responses.create(
        model="gpt-5.4",
        input="weather in Rome",
        tools=[LOOKUP],
        context_management=[{"type": "compaction", "compact_threshold": 100_000}],
    )
    assert [item.type for item in third.output] == ["function_call"]


def test_the_compaction_item_streams_with_the_compacting_event(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    with client.responses.stream(
        model="gpt-5.4", input="weather in Oslo", tools=[LOOKUP], context_management=COMPACT_AT_ONE
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    compaction = final.output[0]
    assert compaction.type == "compaction"
    (compacting,) = [e for e in events if e.type == "response.compaction.compacting"]
    assert (compacting.item_id, compacting.output_index) == (compaction.id, 0)
    done = [e for e in events if e.type == "response.output_item.done" and e.output_index == 0]
    assert done[0].item.type == "compaction" and done[0].item.encrypted_content == compaction.encrypted_content


@pytest.mark.parametrize(
    ("entry", "param"),
    [
        ({"type": "truncation"}, "context_management[0].type"),
        ({"type": "compaction", "compact_threshold": "many"}, "context_management[0].compact_threshold"),
        ({"type": "compaction", "after": 3}, "context_management[0].after"),
    ],
)
def test_context_management_other_than_compaction_is_refused(
    client: openai.OpenAI, entry: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-5.4", input="hi", extra_body={"context_management": [entry]})
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == param


def test_a_compaction_trigger_compacts_the_context_and_the_chain_continues(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    first = client.responses.create(model="gpt-5.4", input="weather in Oslo", tools=[LOOKUP])
    call = first.output[0]
    assert call.type == "function_call"
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "pale"})}
    compacted = client.responses.create(
        model="gpt-5.4",
        previous_response_id=first.id,
        input=[output, {"type": "compaction_trigger"}],  # type: ignore[list-item]
        tools=[LOOKUP],
    )
    assert [item.type for item in compacted.output] == ["compaction"]  # nothing else plays
    listed = client.responses.input_items.list(compacted.id, order="asc").data
    assert [item.type for item in listed] == ["function_call_output"]  # ResponseItem has no trigger type
    answer = client.responses.create(model="gpt-5.4", previous_response_id=compacted.id, tools=[LOOKUP])
    assert answer.output_text == "It is pale in Oslo."


def test_a_compaction_trigger_must_be_the_final_input_item(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-5.4",
            input=[{"type": "compaction_trigger"}, {"type": "message", "role": "user", "content": "hi"}],  # type: ignore[list-item]
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == "input[0]" and "final input item" in body["message"]
