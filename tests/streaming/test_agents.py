"""The OpenAI Agents SDK's streamed Runner over SSE and over its WebSocket transport (whose
`response.create` frames carry `"stream": true`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import ClientVersion

agents = pytest.importorskip("agents", reason="openai-agents is not installed")
from agents.models.openai_responses import OpenAIResponsesModel, OpenAIResponsesWSModel  # noqa: E402

pytestmark = pytest.mark.sdk  # the Agents SDK's streamed Runner over both of its transports

EXPECTED = "sku_123: 7 units available against 9 requested, so the shortage is 2 units."


@agents.function_tool(allowed_callers=["programmatic"])
def get_inventory(sku: str) -> str:
    """Return an object with sku and available_units."""
    return json.dumps({"sku": sku, "available_units": 7})


@agents.function_tool(allowed_callers=["programmatic"])
def get_demand(sku: str) -> str:
    """Return an object with sku and requested_units."""
    return json.dumps({"sku": sku, "requested_units": 9})


async def _run(emulator: PTCEmulator, transport: Any) -> tuple[str, list[str]]:
    client = emulator.async_client(max_retries=0)
    model = transport(model="emulated", openai_client=client)
    try:
        return await _stream(model)
    finally:
        await model.close()
        await client.close()


async def _stream(model: Any) -> tuple[str, list[str]]:
    agent = agents.Agent(
        name="inventory",
        instructions="Use code to call tools.",
        model=model,
        tools=[agents.ProgrammaticToolCallingTool(), get_inventory, get_demand],
    )
    result = agents.Runner.run_streamed(
        agent, "Compare inventory with demand for sku_123.", run_config=agents.RunConfig(tracing_disabled=True)
    )
    kinds = [event.type async for event in result.stream_events()]
    return str(result.final_output), kinds


@pytest.mark.parametrize("transport", [OpenAIResponsesModel, OpenAIResponsesWSModel], ids=["sse", "websocket"])
def test_streamed_runner(ptc_emulator: PTCEmulator, transport: Any, client_version: ClientVersion) -> None:
    client_version("openai-agents", agents.__version__)
    answer, kinds = asyncio.run(_run(ptc_emulator, transport))
    assert answer == EXPECTED
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert [e["status"] for e in ptc_emulator.journal] == [200, 200], "two responses, in this test's scope"
