"""`additional_tools` input items (developer-role tools added mid-conversation): the tools they
carry are callable from that item on, by direct calls and by later programs, in both store modes."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.api.api_support import program_message

FORECAST: dict[str, Any] = {
    "type": "function",
    "name": "forecast",
    "description": "the sky over a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "allowed_callers": ["direct", "programmatic"],
}
ADDED = {"type": "additional_tools", "role": "developer", "tools": [FORECAST]}
SCENARIO = {
    "name": "added-forecast",
    "match": {"input": "^sky over (?P<city>\\w+)$"},
    "turns": [
        {"call": {"name": "forecast", "arguments": {"city": "{{ city }}"}}},
        {"message": "{{ city }}: {{ output.sky }}."},
    ],
}


def dumped(items: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in items]


@pytest.mark.parametrize("store", [False, True])
def test_a_tool_added_mid_conversation_is_called_directly(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, store: bool
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    ptc_emulator.add_scenario({"name": "greeting", "match": {"input": "^hello$"}, "turns": [{"message": "hi"}]})
    first = client.responses.create(model="gpt-5.4", input="hello", store=store)  # no tools yet
    history: list[Any] = [{"type": "message", "role": "user", "content": "hello"}, *dumped(first.output)]
    new: list[Any] = [ADDED, {"type": "message", "role": "user", "content": "sky over Oslo"}]
    second = client.responses.create(
        model="gpt-5.4",
        input=new if store else [*history, *new],
        previous_response_id=first.id if store else None,
        store=store,
    )
    (call,) = [item for item in second.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("forecast", {"city": "Oslo"})
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "clear"})}
    third = client.responses.create(
        model="gpt-5.4",
        input=[output] if store else [*history, *new, *dumped(second.output), output],
        previous_response_id=second.id if store else None,
        store=store,
    )
    assert third.output_text == "Oslo: clear."
    if store:
        listed = client.responses.input_items.list(second.id, order="asc").data
        assert [item.type for item in listed] == ["additional_tools", "message"]


def test_a_later_program_may_call_an_added_tool(client: openai.OpenAI) -> None:
    code = "const sky = await tools.forecast({city: 'Rome'});\ntext(`sky=${sky.sky}`);"
    items: list[Any] = [ADDED, {"type": "message", "role": "user", "content": program_message(code)}]
    first = client.responses.create(
        model="gpt-5.4", input=items, tools=[{"type": "programmatic_tool_calling"}], store=False
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "forecast"
    caller = call.model_dump(mode="json")["caller"]
    assert caller["type"] == "program"
    output = {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "blue"}', "caller": caller}
    second = client.responses.create(
        model="gpt-5.4",
        input=[*items, *dumped(first.output), output],
        tools=[{"type": "programmatic_tool_calling"}],
        store=False,
    )
    assert "sky=blue" in second.output_text


def test_additional_tools_take_only_the_developer_role(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model="gpt-5.4", input=[{**ADDED, "role": "user"}, {"type": "message", "role": "user", "content": "hi"}]
        )


def test_added_tool_definitions_count_as_input(client: openai.OpenAI) -> None:
    message = {"type": "message", "role": "user", "content": "hi"}
    plain = client.responses.input_tokens.count(model="gpt-5.4", input=[message])  # type: ignore[list-item]
    added = client.responses.input_tokens.count(model="gpt-5.4", input=[ADDED, message])  # type: ignore[list-item]
    assert added.input_tokens > plain.input_tokens + 20  # the definition's JSON, where the item stands
