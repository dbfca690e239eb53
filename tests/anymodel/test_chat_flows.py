"""The official Python SDK against an emulator whose model upstream speaks Chat Completions: the
upstream's code call becomes a `program` item whose calls reach the client with `caller`, the
program's output goes back to the upstream, and its next turn follows in the same response."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    INVENTORY_CODE,
    INVENTORY_TOOLS,
    FakeUpstream,
    answer_inventory,
    echo,
    program,
)


def test_the_seed_inventory_loop(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(program(INVENTORY_CODE), echo("Low stock: "))
    first = sdk.responses.create(model="gpt-5.5", input="Which SKUs are low on stock?", tools=INVENTORY_TOOLS)
    kinds = [item.type for item in first.output]
    assert kinds == ["program", "function_call", "function_call", "function_call"]
    assert first.output[0].code == INVENTORY_CODE
    assert first.output[0].fingerprint
    calls = first.output[1:]
    assert all(c.caller.caller_id == first.output[0].call_id for c in calls)
    assert sorted(json.loads(c.arguments)["sku"] for c in calls) == ["A-1", "B-2", "C-3"]

    second = sdk.responses.create(
        model="gpt-5.5",
        previous_response_id=first.id,
        input=[answer_inventory(c) for c in calls],
        tools=INVENTORY_TOOLS,
    )
    assert [item.type for item in second.output] == ["program_output", "message"]
    assert second.output[0].status == "completed"
    assert json.loads(second.output[0].result) == {"low": ["A-1", "C-3"]}
    assert second.output_text == 'Low stock: {"low":["A-1","C-3"]}'

    # What the upstream was told, and what it read back.
    told = upstream.requests[0]
    assert told["stream"] is True and told["stream_options"] == {"include_usage": True}
    functions = {t["function"]["name"]: t["function"] for t in told["tools"]}
    assert list(functions) == [CODE_TOOL]  # get_inventory is programmatic only
    assert (
        "get_inventory(args: { sku: string; }): Promise<{ sku: string; available_units: number; }>"
        in (functions[CODE_TOOL]["description"])
    )
    assert told["messages"] == [{"role": "user", "content": "Which SKUs are low on stock?"}]
    back = upstream.requests[1]["messages"]
    assert back[1]["tool_calls"][0]["function"]["name"] == CODE_TOOL
    assert json.loads(back[1]["tool_calls"][0]["function"]["arguments"]) == {"code": INVENTORY_CODE}
    assert back[2] == {
        "role": "tool",
        "tool_call_id": back[1]["tool_calls"][0]["id"],
        "content": '{"low":["A-1","C-3"]}',
    }


def _inventory_store_false(sdk: openai.OpenAI) -> Any:
    first = sdk.responses.create(
        model="gpt-5.5", input="Which SKUs are low on stock?", tools=INVENTORY_TOOLS, store=False
    )
    replay = [item.model_dump(exclude_none=True) for item in first.output]
    outputs = [answer_inventory(c) for c in first.output if c.type == "function_call"]
    return sdk.responses.create(
        model="gpt-5.5",
        input=[{"role": "user", "content": "Which SKUs are low on stock?"}, *replay, *outputs],
        tools=INVENTORY_TOOLS,
        store=False,
    )


def test_store_false_rebuilds_the_upstream_conversation_from_the_replayed_items(
    sdk: openai.OpenAI, upstream: FakeUpstream
) -> None:
    upstream.reply(program(INVENTORY_CODE), echo("Low: "))
    second = _inventory_store_false(sdk)
    assert second.output_text == 'Low: {"low":["A-1","C-3"]}'
    assert [m["role"] for m in upstream.requests[1]["messages"]] == ["user", "assistant", "tool"]
