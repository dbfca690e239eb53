"""`reasoning:` works on every scenario turn kind, as on program and call turns: the response
carries a reasoning item (with `encrypted_content` when it is included, or with store:false)
before the turn's first item, and a store:false replay of it is accepted."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import validating_client


@pytest.mark.parametrize(
    ("turn", "kinds"),
    [
        ({"message": "The answer.", "reasoning": "Recall the answer."}, ["reasoning", "message"]),
        ({"refusal": "I cannot help with that.", "reasoning": "That is not allowed."}, ["reasoning", "message"]),
    ],
    ids=["message", "refusal"],
)
def test_a_turn_with_reasoning_emits_it_first(
    ptc_emulator: PTCEmulator, turn: dict[str, Any], kinds: list[str]
) -> None:
    ptc_emulator.add_scenario({"name": "thought", "match": {"input": "^think"}, "turns": [turn]})
    client = validating_client(ptc_emulator, max_retries=0)
    response = client.responses.create(model="m", input="think", store=False, include=["reasoning.encrypted_content"])
    assert [i.type for i in response.output] == kinds
    reasoning = response.output[0]
    assert reasoning.summary[0].text == turn["reasoning"] and reasoning.encrypted_content
    # the conversation replays whole, reasoning included, and goes on
    ptc_emulator.add_scenario({"name": "more", "match": {"input": "^more$"}, "turns": [{"message": "More."}]})
    items = [{"role": "user", "content": "think"}, *(i.model_dump(exclude_none=True) for i in response.output)]
    again = client.responses.create(model="m", input=[*items, {"role": "user", "content": "more"}], store=False)
    assert again.output_text == "More."


CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
ADD = {"type": "function", "name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}
MCP_TOOL = {
    "type": "mcp",
    "server_label": "docs_server",
    "server_url": "https://docs.example/mcp",
    "require_approval": "never",
}
HOSTED = {
    "code_interpreter": [{"code": "sum", "logs": "6\n"}],
    "mcp_servers": {
        "docs_server": {"tools": [{"name": "lookup", "input_schema": {"type": "object"}, "output": "three pages"}]}
    },
}


def test_reasoning_on_server_side_turns_replays_without_its_ids(ptc_emulator: PTCEmulator) -> None:
    """The Agents SDK's code interpreter run: store:false, reasoning included, and the reasoning
    items replayed without their ids (its `reasoning_item_id_policy="omit"`)."""
    ptc_emulator.add_scenario(
        {
            "name": "hosted_thoughts",
            "match": {"input": "^compute"},
            "hosted": HOSTED,
            "turns": [
                {"code_interpreter": {"code": "print(sum([1, 2, 3]))"}, "reasoning": "Let Python add them."},
                {"mcp": {"server_label": "docs_server", "name": "lookup"}, "reasoning": "Check the docs."},
                {"call": {"name": "add", "arguments": {"a": 6}}, "reasoning": "Now the client's tool."},
                {"message": "Done: {{ output }}.", "reasoning": "Report."},
            ],
        }
    )
    client = validating_client(ptc_emulator, max_retries=0)
    tools: list[Any] = [CODE_TOOL, MCP_TOOL, ADD]
    include: list[Any] = ["reasoning.encrypted_content"]
    first = client.responses.create(model="m", input="compute", tools=tools, store=False, include=include)
    kinds = [i.type for i in first.output]
    # the MCP listing comes first, as the hosted API lists a server before the model acts
    assert kinds == [
        "mcp_list_tools",
        "reasoning",
        "code_interpreter_call",
        "reasoning",
        "mcp_call",
        "reasoning",
        "function_call",
    ]
    replayed = []
    for item in first.output:
        data = item.model_dump(exclude_none=True)
        if data["type"] == "reasoning":
            data.pop("id")  # as the Agents SDK replays them
        replayed.append(data)
    call = next(i for i in first.output if i.type == "function_call")
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "7"}
    final = client.responses.create(
        model="m",
        input=[{"role": "user", "content": "compute"}, *replayed, output],
        tools=tools,
        store=False,
        include=include,
    )
    assert final.output_text == "Done: 7."
    # a reasoning item that is missing altogether is still refused
    without = [i for i in replayed if not (i["type"] == "reasoning" and i["summary"][0]["text"] == "Check the docs.")]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="m", input=[{"role": "user", "content": "compute"}, *without, output], tools=tools, store=False
        )
    assert "without its required 'reasoning' item" in caught.value.message
