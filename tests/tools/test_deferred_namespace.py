"""A top-level deferred function's calls carry the synthetic namespace the hosted API gives them,
the function's own name, as the Agents SDK expects (its `examples/tools/tool_search.py` flow: the
Runner finds such a tool only by that namespace, and died with "Tool get_shipping_eta not found
in agent" without it). A replay that drops the namespace is the hosted 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import Agent, ModelSettings, RunConfig, Runner, ToolSearchTool, function_tool, set_tracing_disabled

from ptc_emulator.testing.server import PTCEmulator
from tests.support import runner_model, validating_client

asked: list[str] = []


@function_tool(defer_loading=True)
def get_shipping_eta(tracking_number: str) -> str:
    """Look up the shipping ETA for a tracking number."""
    asked.append(tracking_number)
    return json.dumps({"tracking_number": tracking_number, "eta": "2026-12-05"})


SCENARIO = {
    "name": "deferred__top_level",
    "match": {"input": "(?i)when does (?P<number>ZX\\d+) arrive"},
    "turns": [
        {"search": {"load": ["get_shipping_eta"]}},
        {"call": {"name": "get_shipping_eta", "arguments": {"tracking_number": "{{ number }}"}}},
        {"message": "It arrives on {{ output.eta }}."},
    ],
}
DEFERRED = {
    "type": "function",
    "name": "get_shipping_eta",
    "description": "Look up the shipping ETA.",
    "parameters": {"type": "object", "properties": {"tracking_number": {"type": "string"}}},
    "defer_loading": True,
}


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)
    asked.clear()
    yield


@pytest.mark.sdk
@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_the_runner_finds_and_runs_a_top_level_deferred_tool(
    ptc_emulator: PTCEmulator, store: bool | None
) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    agent = Agent(
        name="shipping",
        instructions="Find the shipping tool, then use it.",
        model=runner_model(ptc_emulator),
        model_settings=ModelSettings(store=store),
        tools=[ToolSearchTool(), get_shipping_eta],
    )
    result = await Runner.run(agent, "When does ZX123 arrive?", run_config=RunConfig(tracing_disabled=True))
    assert asked == ["ZX123"]
    assert result.final_output == "It arrives on 2026-12-05."
    outputs = [i for e in ptc_emulator.journal for i in (e["response"] or {}).get("output", [])]
    [function_call] = [i for i in outputs if i["type"] == "function_call"]
    assert function_call["name"] == "get_shipping_eta" and function_call["namespace"] == "get_shipping_eta"


def test_a_replayed_call_without_its_namespace_is_the_hosted_400(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    client = validating_client(ptc_emulator, max_retries=0)
    tools: list[Any] = [DEFERRED, {"type": "tool_search"}]
    first = client.responses.create(model="m", input="When does ZX9 arrive?", tools=tools, store=False)
    items = [
        {"role": "user", "content": "When does ZX9 arrive?"},
        *(i.model_dump(exclude_none=True) for i in first.output),
    ]
    call = next(i for i in items if i.get("type") == "function_call")
    assert call["namespace"] == "get_shipping_eta"
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": json.dumps({"eta": "soon"})}
    done = client.responses.create(model="m", input=[*items, output], tools=tools, store=False)
    assert done.output_text == "It arrives on soon."
    index = items.index(call)
    stripped = [*items[:index], {k: v for k, v in call.items() if k != "namespace"}, *items[index + 1 :], output]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=stripped, tools=tools, store=False)
    assert caught.value.message.endswith(
        "Missing namespace for function_call 'get_shipping_eta'. It does not exist in the default namespace. "
        "Round-trip the model's function_call item with its namespace field included."
    )
    assert caught.value.param == f"input[{index}].namespace"
