"""The seed's inventory loop, written by the model upstream, through the Agents SDK's Runner and
the npm client (the guide's JavaScript loop, as tests/node has it)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from agents import Agent, ProgrammaticToolCallingTool, RunConfig, Runner, function_tool, set_tracing_disabled

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import FakeUpstream, echo, needs_node, program, run_node
from tests.support import runner_model

COMPARE = """const [inv, dem] = await Promise.all([
  tools.get_inventory({ sku: "sku_123" }),
  tools.get_demand({ sku: "sku_123" }),
]);
text(`${inv.sku}: ${inv.available_units} available, ${dem.requested_units} requested`);"""
EXPECTED = "sku_123: 42 available, 31 requested"


@function_tool(allowed_callers=["programmatic"])
def get_inventory(sku: str) -> str:
    """Return an object with sku (string) and available_units (number)."""
    return json.dumps({"sku": sku, "available_units": 42})


@function_tool(allowed_callers=["programmatic"])
def get_demand(sku: str) -> str:
    """Return an object with sku (string) and requested_units (number)."""
    return json.dumps({"sku": sku, "requested_units": 31})


@pytest.fixture(params=["chat", "responses"])
def emulator(any_server: Callable[..., EmulatorServer], request: pytest.FixtureRequest) -> Iterator[PTCEmulator]:
    """An emulator whose model upstream speaks each protocol in turn."""
    set_tracing_disabled(True)  # nothing may leave this machine
    found = PTCEmulator(any_server(model_upstream_api=request.param).base_url)
    yield found
    found.close()


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_the_agents_sdk_runner(emulator: PTCEmulator, upstream: FakeUpstream, store: bool | None) -> None:
    from agents import ModelSettings

    upstream.reply(program(COMPARE), echo())
    agent = Agent(
        name="inventory",
        instructions="Compare inventory with demand.",
        model=runner_model(emulator),
        model_settings=ModelSettings(store=store),
        tools=[ProgrammaticToolCallingTool(), get_inventory, get_demand],
    )
    result = await Runner.run(
        agent, "Compare inventory with demand for sku_123.", run_config=RunConfig(tracing_disabled=True)
    )
    assert result.final_output == EXPECTED
    told = upstream.requests[0]
    if "messages" in told:
        assert told["messages"][0] == {"role": "system", "content": "Compare inventory with demand."}
    else:
        assert told["instructions"] == "Compare inventory with demand."
    assert [e["status"] for e in emulator.journal] == [200, 200]


@needs_node
@pytest.mark.sdk
def test_the_npm_client(
    emulator: PTCEmulator, upstream: FakeUpstream, client_version: Callable[[str, str], None]
) -> None:
    upstream.reply(program(COMPARE), echo())
    done = run_node("seed_loop.mjs", emulator.base_url)
    client_version("npm openai", done.version)
    assert done.stdout.strip() == EXPECTED
    assert len(upstream.requests) == 2
