"""Mistakes named where they happen: a program calling a tool programs may not call, and a
scenario's paused program continued with other tools, get the precise message, not a TypeError
or a no_scenario_matched."""

from __future__ import annotations

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator

PTC = {"type": "programmatic_tool_calling"}


def tool(name: str, callers: list[str] | None) -> dict[str, object]:
    declared: dict[str, object] = {"type": "function", "name": name, "parameters": {"type": "object"}}
    if callers is not None:
        declared["allowed_callers"] = callers
    return declared


def program_output(response: object) -> tuple[str, str]:
    [out] = [i for i in response.output if i.type == "program_output"]  # type: ignore[attr-defined]
    return out.status, out.result


@pytest.mark.parametrize(("callers", "shown"), [(None, 'not set (["direct"])'), (["direct"], '["direct"]')])
def test_a_direct_only_tool_called_from_a_program_is_named(
    client: openai.OpenAI, callers: list[str] | None, shown: str
) -> None:
    code = "const stock = await tools.get_inventory({ sku: 'sku_1' });\ntext(JSON.stringify(stock));"
    response = client.responses.create(
        model="gpt-test", input=f"```js\n{code}\n```", tools=[tool("get_inventory", callers), PTC]
    )

    status, result = program_output(response)
    assert status == "incomplete"
    assert result.startswith(
        "runtime: the program called tools.get_inventory, which a program may not call: its allowed_callers is "
        f'{shown}; a program may call only tools whose allowed_callers include "programmatic" (line 1)'
    )
    assert "is not a function" not in result


def test_a_tool_the_request_does_not_declare_is_named(client: openai.OpenAI) -> None:
    code = "await tools.get_demand({});"
    response = client.responses.create(
        model="gpt-test", input=f"```js\n{code}\n```", tools=[tool("get_inventory", ["programmatic"]), PTC]
    )

    status, result = program_output(response)
    assert status == "incomplete"
    assert result.startswith(
        "runtime: the program called tools.get_demand, which is no tool of this request (a program may call: "
        "get_inventory) (line 1)"
    )


PAUSING = {
    "name": "pausing",
    "match": {"input": "(?i)stock of (?P<sku>\\w+)", "tools": ["get_inventory"]},
    "turns": [
        {"program": "const s = await tools.get_inventory({ sku: {{ sku }} });\ntext(JSON.stringify(s));"},
        {"message": "{{ result }}"},
    ],
}


@pytest.mark.parametrize("scenario", [True, False], ids=["scenario", "inline"])
def test_a_paused_program_continued_with_other_tools(
    ptc_emulator: PTCEmulator, client: openai.OpenAI, scenario: bool
) -> None:
    tools = [tool("get_inventory", ["programmatic"]), PTC]
    if scenario:
        ptc_emulator.add_scenario(PAUSING)
        question = "What is the stock of sku_1?"
    else:
        question = "```js\nconst s = await tools.get_inventory({ sku: 'sku_1' });\ntext(JSON.stringify(s));\n```"
    first = client.responses.create(model="gpt-test", input=question, tools=tools)  # type: ignore[arg-type]
    [call] = [i for i in first.output if i.type == "function_call"]
    output = {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": "{}",
        "caller": call.caller.model_dump(),
    }

    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", previous_response_id=first.id, input=[output])  # type: ignore[list-item]

    program = next(i for i in first.output if i.type == "program")
    assert caught.value.message.endswith(
        f"The tools a program may call changed while program {program.call_id} was running: it started with "
        "['get_inventory'], this request allows []."
    )
