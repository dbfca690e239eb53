"""Matchers beyond the latest user message: the instructions (and system or developer messages),
earlier messages, tool outputs sent back, and tool_choice; each through the SDK, with the near
miss that names it when it does not match."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.scenarios_support import inventory_tools, run_agent

INVENTORY = {
    "type": "function",
    "name": "get_inventory",
    "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
}


def miss(emulator: PTCEmulator, **request: Any) -> tuple[str, list[dict[str, str]]]:
    """The 400's message, and the near misses of this test's scenarios."""
    with pytest.raises(openai.BadRequestError) as caught:
        emulator.client(max_retries=0).responses.create(**request)
    report = emulator.journal[-1]["near_miss"]
    return caught.value.message, [m for m in report["near_misses"] if m["scenario"] in _ours(emulator)]


def _ours(emulator: PTCEmulator) -> set[str]:
    return {str(s["name"]) for s in emulator.scenarios if s["scope"] == emulator.scope}


# ---- instructions ---------------------------------------------------------------------------------


CLERK = {
    "name": "clerk",
    "match": {"instructions": "(?i)you are a (?P<job>\\w+) clerk", "input": "(?i)hello"},
    "turns": [{"message": "Hello from the {{ job }} desk."}],
}


def test_instructions_match_the_request_instructions(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(CLERK)
    client = ptc_emulator.client(max_retries=0)

    answer = client.responses.create(model="m", instructions="You are a stock clerk.", input="Hello")

    assert answer.output_text == "Hello from the stock desk."


@pytest.mark.parametrize("role", ["system", "developer"])
def test_instructions_match_a_system_or_developer_message(ptc_emulator: PTCEmulator, role: str) -> None:
    ptc_emulator.add_scenario(CLERK)
    client = ptc_emulator.client(max_retries=0)
    items = [{"role": role, "content": "You are a shipping clerk."}, {"role": "user", "content": "Hello"}]

    answer = client.responses.create(model="m", instructions="Be brief.", input=items)  # type: ignore[arg-type]

    assert answer.output_text == "Hello from the shipping desk."


@pytest.mark.ptc_strict(False)
def test_instructions_that_do_not_match_are_the_near_miss(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(CLERK)

    message, [found] = miss(ptc_emulator, model="m", instructions="You are a pirate.", input="Hello")

    reason = "the instructions 'You are a pirate.' do not match /(?i)you are a (?P<job>\\w+) clerk/"
    assert found == {"scenario": "clerk", "field": "instructions", "reason": reason}
    assert f"'clerk' (instructions): {reason}" in message
    _, [none] = miss(ptc_emulator, model="m", input="Hello")
    assert none["reason"] == (
        "the request has no instructions (nor a system or developer message) to match "
        "/(?i)you are a (?P<job>\\w+) clerk/"
    )
    items = [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hello"}]
    _, [two] = miss(ptc_emulator, model="m", instructions="Be brief.", input=items)
    assert two["reason"] == (
        "none of the request's 2 instructions ('Be brief.'; 'Answer in French.') matches "
        "/(?i)you are a (?P<job>\\w+) clerk/"
    )


# ---- history ----------------------------------------------------------------------------------------


NAMED = {
    "name": "named",
    "match": {"input": "(?i)my name is (?P<name>\\w+)"},
    "turns": [{"message": "Nice to meet you, {{ name }}."}],
}
RECALL = {
    "name": "recall",
    "match": {
        "input": "(?i)what is my name",
        "history": [
            {"role": "user", "text": "(?i)my name is (?P<name>\\w+)"},
            {"role": "assistant", "text": "Nice to meet you"},
        ],
    },
    "turns": [{"message": "You are {{ name }}."}],
}


def test_history_matches_earlier_turns_of_a_previous_response_chain(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(NAMED)
    ptc_emulator.add_scenario(RECALL)
    client = ptc_emulator.client(max_retries=0)

    first = client.responses.create(model="m", input="My name is Ada.")
    second = client.responses.create(model="m", previous_response_id=first.id, input="What is my name?")

    assert (first.output_text, second.output_text) == ("Nice to meet you, Ada.", "You are Ada.")
    assert [e["scenario"] for e in ptc_emulator.journal] == ["named", "recall"]


def test_history_matches_a_replayed_conversation(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(RECALL)
    client = ptc_emulator.client(max_retries=0)
    items = [
        {"role": "user", "content": "My name is Grace."},
        {"role": "assistant", "content": "Nice to meet you, Grace."},
        {"role": "user", "content": "What is my name?"},
    ]

    answer = client.responses.create(model="m", store=False, input=items)  # type: ignore[arg-type]

    assert answer.output_text == "You are Grace."


def test_history_matches_a_conversations_items(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(RECALL)
    client = ptc_emulator.client(max_retries=0)
    said: Any = [
        {"type": "message", "role": "user", "content": "My name is Lin."},
        {"type": "message", "role": "assistant", "content": "Nice to meet you, Lin."},
    ]
    conversation = client.conversations.create(items=said)

    answer = client.responses.create(model="m", conversation=conversation.id, input="What is my name?")

    assert answer.output_text == "You are Lin."


@pytest.mark.ptc_strict(False)
def test_history_that_does_not_match_is_the_near_miss(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(RECALL)

    message, [first] = miss(ptc_emulator, model="m", input="What is my name?")

    reason = "the conversation has no earlier user message to match /(?i)my name is (?P<name>\\w+)/"
    assert first == {"scenario": "recall", "field": "history.0", "reason": reason}
    assert f"'recall' (history.0): {reason}" in message
    said = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "What is my name?"},
    ]
    _, [second] = miss(ptc_emulator, model="m", input=said)
    assert second == {
        "scenario": "recall",
        "field": "history.1",
        "reason": "the earlier assistant message 'Hi.' does not match /Nice to meet you/",
    }
    said[1:1] = [{"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hey."}]
    _, [third] = miss(ptc_emulator, model="m", input=said)
    assert third["reason"] == "none of the 2 earlier assistant messages matches /Nice to meet you/"


# ---- tool outputs -------------------------------------------------------------------------------


LOOKUP = {
    "name": "lookup",
    "match": {"input": "(?i)stock of (?P<sku>sku_\\w+)"},
    "turns": [
        {"call": {"name": "get_inventory", "arguments": {"sku": "{{ sku }}"}}},
        {"message": "{{ output.available_units }} units of {{ sku }}."},
    ],
}
LOOKUP_FAILED = {  # the same first turn; once the output says so, the model answers otherwise
    "name": "lookup-failed",
    "priority": 1,
    "match": {
        "input": "(?i)stock of (?P<sku>sku_\\w+)",
        "outputs": [{"tool": "get_inventory", "output": '"error": "(?P<why>[^"]+)"'}],
    },
    "turns": [
        {"call": {"name": "get_inventory", "arguments": {"sku": "{{ sku }}"}}},
        {"message": "The inventory service failed ({{ why }}); try again later."},
    ],
}
SOLD_OUT = {
    "name": "sold-out",
    "priority": 2,
    "match": {"input": "(?i)stock of", "outputs": [{"tool": "get_inventory", "json": {"available_units": 0}}]},
    "turns": [
        {"call": {"name": "get_inventory", "arguments": {"sku": "any"}}},
        {"message": "Sold out."},
    ],
}


def ask_stock(client: openai.OpenAI, output: str) -> str:
    first = client.responses.create(model="m", input="Stock of sku_7?", tools=[INVENTORY])  # type: ignore[list-item]
    [call] = [item for item in first.output if item.type == "function_call"]
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": output}
    final = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[answer],  # type: ignore[list-item]
        tools=[INVENTORY],  # type: ignore[list-item]
    )
    return final.output_text


@pytest.mark.ptc_strict(unused=False)  # each case plays one of the two branches
@pytest.mark.parametrize(
    ("output", "answer", "scenario"),
    [
        ('{"available_units": 4}', "4 units of sku_7.", "lookup"),
        (
            '{"error": "timeout after 30 s"}',
            "The inventory service failed (timeout after 30 s); try again later.",
            "lookup-failed",
        ),
        ('{"available_units": 0, "sku": "sku_7"}', "Sold out.", "sold-out"),
    ],
)
def test_outputs_choose_how_the_model_answers_a_tool_output(
    ptc_emulator: PTCEmulator, output: str, answer: str, scenario: str
) -> None:
    for each in (LOOKUP, LOOKUP_FAILED, SOLD_OUT):
        ptc_emulator.add_scenario(each)

    assert ask_stock(ptc_emulator.client(max_retries=0), output) == answer
    assert [e["scenario"] for e in ptc_emulator.journal] == ["lookup", scenario]


def test_outputs_see_the_outputs_of_a_programs_calls(ptc_emulator: PTCEmulator) -> None:
    """A program's calls are answered with outputs too: a scenario may branch on them."""
    program = "const s = await tools.get_inventory({ sku: 'sku_1' });\ntext(String(s.available_units));"
    ptc_emulator.add_scenario(
        {
            "name": "count",
            "match": {"input": "(?i)count"},
            "turns": [{"program": program}, {"message": "{{ result }} left."}],
        }
    )
    ptc_emulator.add_scenario(
        {
            "name": "count-none",
            "priority": 1,
            "match": {"input": "(?i)count", "outputs": [{"tool": "get_inventory", "json": {"available_units": 0}}]},
            "turns": [{"program": program}, {"message": "None left ({{ result }}): reorder."}],
        }
    )
    empty = lambda arguments, name: {"sku": arguments["sku"], "available_units": 0}  # noqa: E731

    responses = run_agent(ptc_emulator.client(max_retries=0), "Count sku_1", inventory_tools(), empty)

    assert responses[-1].output_text == "None left (0): reorder."
    assert [e["scenario"] for e in ptc_emulator.journal] == ["count", "count-none"]


@pytest.mark.ptc_strict(False)
def test_outputs_that_do_not_match_are_the_near_miss(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(LOOKUP_FAILED)
    ptc_emulator.add_scenario(SOLD_OUT)

    message, misses = miss(ptc_emulator, model="m", input="Stock of sku_7?", tools=[INVENTORY])

    assert misses == [
        {
            "scenario": "sold-out",
            "field": "outputs.0",
            "reason": "no get_inventory output has come back since the latest user message",
        },
        {
            "scenario": "lookup-failed",
            "field": "outputs.0",
            "reason": "no get_inventory output has come back since the latest user message",
        },
    ]
    assert "'sold-out' (outputs.0): no get_inventory output has come back since the latest user message" in message
    call = {"type": "function_call", "call_id": "call_1", "name": "get_inventory", "arguments": '{"sku": "sku_7"}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": '{"available_units": 3}'}
    items = [{"role": "user", "content": "Stock of sku_7?"}, call, output]
    _, misses = miss(ptc_emulator, model="m", input=items, tools=[INVENTORY])
    assert [m["reason"] for m in misses] == [
        'no get_inventory output since the latest user message has {"available_units": 0} '
        "(the latest: '{\"available_units\": 3}')",
        'no get_inventory output since the latest user message matches /"error": "(?P<why>[^"]+)"/ '
        "(the latest: '{\"available_units\": 3}')",
    ]


# ---- tool_choice ----------------------------------------------------------------------------------


def test_tool_choice_chooses_the_scenario(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"name": "chat", "match": {"input": "(?i)stock"}, "turns": [{"message": "Ask me."}]})
    ptc_emulator.add_scenario(
        {
            "name": "forced",
            "priority": 1,
            "match": {"input": "(?i)stock", "tool_choice": {"type": "function", "name": "get_inventory"}},
            "turns": [{"call": {"name": "get_inventory", "arguments": {"sku": "sku_1"}}}, {"message": "ok"}],
        }
    )
    ptc_emulator.add_scenario(
        {
            "name": "must-call",
            "priority": 1,
            "match": {"input": "(?i)stock", "tool_choice": "required"},
            "turns": [{"call": {"name": "get_inventory", "arguments": {"sku": "sku_2"}}}, {"message": "ok"}],
        }
    )
    client = ptc_emulator.client(max_retries=0)
    tools: Any = [INVENTORY]

    chat = client.responses.create(model="m", input="stock?", tools=tools)
    forced = client.responses.create(
        model="m", input="stock?", tools=tools, tool_choice={"type": "function", "name": "get_inventory"}
    )
    required = client.responses.create(model="m", input="stock?", tools=tools, tool_choice="required")

    assert chat.output_text == "Ask me."
    assert [json.loads(r.output[0].arguments)["sku"] for r in (forced, required)] == ["sku_1", "sku_2"]  # type: ignore[union-attr]
    assert [e["scenario"] for e in ptc_emulator.journal] == ["chat", "forced", "must-call"]


@pytest.mark.ptc_strict(False)
def test_tool_choice_that_does_not_match_is_the_near_miss(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "forced",
            "match": {"tool_choice": {"type": "function", "name": "get_inventory"}},
            "turns": [{"message": "x"}],
        }
    )
    ptc_emulator.add_scenario({"name": "must-call", "match": {"tool_choice": "required"}, "turns": [{"message": "x"}]})

    message, misses = miss(ptc_emulator, model="m", input="stock?", tools=[INVENTORY], tool_choice="none")

    assert sorted((m["scenario"], m["reason"]) for m in misses) == [
        ("forced", 'tool_choice is \'none\', not {"type": "function", "name": "get_inventory"}'),
        ("must-call", "tool_choice is 'none', not 'required'"),
    ]
    assert "(tool_choice): tool_choice is 'none', not" in message
    _, misses = miss(ptc_emulator, model="m", input="stock?", tools=[INVENTORY])
    assert ("must-call", "tool_choice is 'auto', not 'required'") in [(m["scenario"], m["reason"]) for m in misses]
