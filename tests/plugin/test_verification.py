"""Verification with the fixture: `assert_called(name, times, args=, route=)` counts the tool calls
made directly and by programs, `assert_requests(times, instructions=, ...)` the requests of a kind;
a failure's message shows what happened instead, the test's requests numbered from 1."""

from __future__ import annotations

import json
import re
from typing import Any

import openai
import pytest

from ptc_emulator.testing.assertions import JournalEntry, ToolCall
from ptc_emulator.testing.server import PTCEmulator

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_inventory",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "allowed_callers": ["programmatic", "direct"],
    },
    {"type": "programmatic_tool_calling"},
]
RESTOCK = {  # two calls by a program, then one direct call, then the answer
    "name": "restock",
    "match": {"input": "(?i)restock (?P<sku>sku_\\w+)"},
    "turns": [
        {
            "program": "const a = await tools.get_inventory({ sku: {{ sku }} });\n"
            "const b = await tools.get_inventory({ sku: 'sku_9' });\n"
            "text(String(a.units + b.units));"
        },
        {"call": {"name": "get_inventory", "arguments": {"sku": "{{ sku }}"}}},
        {"message": "Restocked {{ sku }}."},
    ],
}
CLERK = {
    "name": "clerk",
    "match": {"input": "(?i)hello", "instructions": "(?i)clerk"},
    "turns": [{"message": "Hello from the desk."}],
}


def agent(client: openai.OpenAI, question: str, instructions: str | None = None) -> str:
    """A store:false loop answering every call with 3 units."""
    items: list[Any] = [{"role": "user", "content": question}]
    while True:
        extra = {"instructions": instructions} if instructions else {}
        response = client.responses.create(model="gpt-test", store=False, input=items, tools=TOOLS, **extra)
        items += [i.model_dump(exclude_none=True) for i in response.output]
        calls = [i for i in response.output if i.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"units": 3})}
            if call.caller is not None and call.caller.type == "program":
                output["caller"] = call.caller.model_dump()
            items.append(output)


def restocked(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(RESTOCK)
    assert agent(ptc_emulator.client(max_retries=0), "Please restock sku_123") == "Restocked sku_123."


REQUESTS = """\
The requests of this test and their tool calls:
  #1 POST /v1/responses 'Please restock sku_123' -> scenario 'restock' (200, program, function_call)
      get_inventory({"sku":"sku_123"}) [program]
  #2 POST /v1/responses 'Please restock sku_123' -> scenario 'restock' (200, function_call)
      get_inventory({"sku":"sku_9"}) [program]
  #3 POST /v1/responses 'Please restock sku_123' -> scenario 'restock' (200, program_output, function_call)
      get_inventory({"sku":"sku_123"}) [direct]
  #4 POST /v1/responses 'Please restock sku_123' -> scenario 'restock' (200, message)"""


def test_assert_called_counts_direct_and_program_calls(ptc_emulator: PTCEmulator) -> None:
    restocked(ptc_emulator)

    every = ptc_emulator.assert_called("get_inventory", 3)
    twice = ptc_emulator.assert_called("get_inventory", times=2, args={"sku": "sku_123"})
    by_program = ptc_emulator.assert_called("get_inventory", 2, route="program")
    directly = ptc_emulator.assert_called("get_inventory", 1, route="direct", args={"sku": "sku_123"})
    odd = ptc_emulator.assert_called("get_inventory", 1, args=lambda arguments: arguments["sku"].endswith("9"))
    ptc_emulator.assert_called("get_inventory")  # at least once
    ptc_emulator.assert_called("get_demand", 0)

    assert all(isinstance(call, ToolCall) for call in every)
    assert [c.arguments["sku"] for c in every] == ["sku_123", "sku_9", "sku_123"]
    assert [c.route for c in twice] == ["program", "direct"]
    assert [c.route for c in by_program] == ["program", "program"] and directly == [every[2]]
    assert odd == [every[1]] and odd[0].output == {"units": 3}


def test_assert_called_shows_the_calls_that_were_made_instead(ptc_emulator: PTCEmulator) -> None:
    restocked(ptc_emulator)

    with pytest.raises(AssertionError) as wrong_count:
        ptc_emulator.assert_called("get_inventory", times=1, args={"sku": "sku_123"})
    with pytest.raises(AssertionError) as wrong_args:
        ptc_emulator.assert_called("get_inventory", args={"sku": "sku_7"}, route="program")

    def in_stock(arguments: Any) -> bool:
        return False

    with pytest.raises(AssertionError) as predicate:
        ptc_emulator.assert_called("get_inventory", 2, args=in_stock)
    with pytest.raises(AssertionError) as unwanted:
        ptc_emulator.assert_called("get_inventory", 0, route="direct")
    with pytest.raises(AssertionError) as other:
        ptc_emulator.assert_called("get_demand")

    assert str(wrong_count.value) == (
        'Expected get_inventory to be called 1 time with arguments including {"sku":"sku_123"}, but it was '
        "called 2 times (3 times whatever the arguments).\n" + REQUESTS
    )
    assert str(wrong_args.value) == (
        'Expected get_inventory to be called at least once by a program with arguments including {"sku":"sku_7"}, '
        "but it was called 0 times (2 times whatever the arguments).\n" + REQUESTS
    )
    assert str(predicate.value) == (
        "Expected get_inventory to be called 2 times with arguments for which in_stock() is true, but it was "
        "called 0 times (3 times whatever the arguments).\n" + REQUESTS
    )
    assert str(unwanted.value) == (
        "Expected get_inventory not to be called directly, but it was called 1 time.\n" + REQUESTS
    )
    assert str(other.value) == "Expected get_demand to be called at least once, but it was called 0 times.\n" + REQUESTS


def test_assert_called_without_any_call_shows_the_requests(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(CLERK)
    ptc_emulator.client(max_retries=0).responses.create(model="m", instructions="You are a clerk.", input="Hello")

    with pytest.raises(AssertionError) as caught:
        ptc_emulator.assert_called("get_inventory", 2)

    assert str(caught.value) == (
        "Expected get_inventory to be called 2 times, but it was called 0 times.\n"
        "This test made no tool call. Its requests:\n"
        "  #1 POST /v1/responses 'Hello' -> scenario 'clerk' (200, message)"
    )


def test_assert_requests_counts_the_requests_of_a_kind(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(CLERK)
    restocked(ptc_emulator)
    client = ptc_emulator.client(max_retries=0)
    client.responses.create(model="m", instructions="You are a stock clerk.", input="Hello")
    items: Any = [{"role": "developer", "content": "You are a shipping clerk."}, {"role": "user", "content": "hello"}]
    client.responses.create(model="gpt-test", input=items)

    [stock] = ptc_emulator.assert_requests(1, instructions="(?i)stock clerk")
    clerks = ptc_emulator.assert_requests(2, instructions=re.compile("CLERK", re.I))
    ptc_emulator.assert_requests(4, scenario="restock", input="sku_123", model="gpt-test", status=200)
    ptc_emulator.assert_requests(1, model="m")
    ptc_emulator.assert_requests(where=lambda entry: entry.figures.program_tool_calls == 1)
    ptc_emulator.assert_requests(0, status=400)

    assert isinstance(stock, JournalEntry) and stock.request["instructions"] == "You are a stock clerk."
    assert [entry.seq for entry in clerks] == [stock.seq, ptc_emulator.entries[-1].seq]


def test_assert_requests_shows_the_requests_that_were_made_instead(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(CLERK)
    client = ptc_emulator.client(max_retries=0)
    client.responses.create(model="m", instructions="You are a stock clerk.", input="Hello")
    items: Any = [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "You are a clerk."}]
    client.responses.create(model="gpt-test", input=[*items, {"role": "user", "content": "hello again"}])

    with pytest.raises(AssertionError) as twice:
        ptc_emulator.assert_requests(1, instructions="clerk")
    with pytest.raises(AssertionError) as none:
        ptc_emulator.assert_requests(instructions="pirate", scenario="clerk")
    with pytest.raises(AssertionError) as models:
        ptc_emulator.assert_requests(0, model="gpt-.*")
    with pytest.raises(AssertionError) as count:
        ptc_emulator.assert_requests(3)

    requests = (
        "  #1 POST /v1/responses 'Hello' -> scenario 'clerk' (200, message)\n"
        "  #2 POST /v1/responses 'hello again' -> scenario 'clerk' (200, message)"
    )
    instructions = (
        "The requests of this test:\n"
        "  #1 POST /v1/responses 'Hello' -> scenario 'clerk' (200, message)\n"
        "      instructions: 'You are a stock clerk.'\n"
        "  #2 POST /v1/responses 'hello again' -> scenario 'clerk' (200, message)\n"
        "      instructions: 'Be brief.'; 'You are a clerk.'"
    )
    assert str(twice.value) == (
        "Expected exactly 1 request whose instructions match /clerk/, but 2 did (#1, #2).\n" + instructions
    )
    assert str(none.value) == (
        "Expected at least one request whose instructions match /pirate/ and answered by scenario 'clerk', "
        "but none did.\n" + instructions
    )
    assert str(models.value) == (
        "Expected no request for model /gpt-.*/, but 1 did (#2).\n"
        "The requests of this test:\n"
        "  #1 POST /v1/responses 'Hello' -> scenario 'clerk' (200, message)\n"
        "      model: 'm'\n"
        "  #2 POST /v1/responses 'hello again' -> scenario 'clerk' (200, message)\n"
        "      model: 'gpt-test'"
    )
    assert str(count.value) == "Expected exactly 3 requests, but there were 2.\nThe requests of this test:\n" + requests


def test_a_count_below_zero_or_an_unknown_route_is_a_mistake(ptc_emulator: PTCEmulator) -> None:
    with pytest.raises(ValueError, match="times is a count"):
        ptc_emulator.assert_called("get_inventory", -1)
    with pytest.raises(ValueError, match="route is 'program' or 'direct', not 'programmatic'"):
        ptc_emulator.assert_called("get_inventory", route="programmatic")
    with pytest.raises(ValueError, match="times is a count"):
        ptc_emulator.assert_requests(-2)
