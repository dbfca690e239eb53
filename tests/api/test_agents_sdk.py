"""The OpenAI Agents SDK's Runner, with programmatic tool calling, completes runs against the emulator.

The Runner replays the whole item list every turn (no previous_response_id, no `store`), copies
each call's `caller` onto its output, and rejects program items it cannot place: a run that
completes with the right answer shows the emulator's items satisfy it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pydantic
import pytest
from agents import (
    Agent,
    ModelSettings,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.version import __version__ as agents_version

from ptc_emulator.testing.server import PTCEmulator
from tests.support import ClientVersion, js, runner_model

pytestmark = pytest.mark.sdk  # the Agents SDK's Runner accepts every response and the server every replay

EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."

calls: list[tuple[str, str]] = []


@function_tool(allowed_callers=["programmatic"])
def get_inventory(sku: str) -> str:
    """Return an object with sku (string) and available_units (number)."""
    calls.append(("get_inventory", sku))
    return json.dumps({"sku": sku, "available_units": 42})


@function_tool(allowed_callers=["programmatic"])
def get_demand(sku: str) -> str:
    """Return an object with sku (string) and requested_units (number)."""
    calls.append(("get_demand", sku))
    return json.dumps({"sku": sku, "requested_units": 31})


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # nothing may leave this machine
    calls.clear()
    yield


def agent(ptc_emulator: PTCEmulator, **settings: object) -> Agent:
    model = runner_model(ptc_emulator)
    return Agent(
        name="inventory",
        instructions="Use a program to compare inventory with demand.",
        model=model,
        model_settings=ModelSettings(**settings),  # type: ignore[arg-type]
        tools=[ProgrammaticToolCallingTool(), get_inventory, get_demand],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_completes_a_programmatic_run(
    ptc_emulator: PTCEmulator, store: bool | None, client_version: ClientVersion
) -> None:
    client_version("openai-agents", agents_version)
    result = await Runner.run(
        agent(ptc_emulator, store=store),
        "Compare inventory with demand for sku_123.",
        run_config=RunConfig(tracing_disabled=True),
    )
    assert result.final_output == EXPECTED
    assert sorted(calls) == [("get_demand", "sku_123"), ("get_inventory", "sku_123")]
    kinds = [item.type for item in result.new_items]
    assert kinds[-1] == "message_output_item"
    journal = ptc_emulator.journal
    assert [e["status"] for e in journal] == [200, 200]
    second = journal[1]["request"]
    # The Runner replayed everything itself, callers included.
    replayed = [i.get("type", "message") for i in second["input"]]
    assert replayed == [
        "message",
        "program",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert all(i["caller"]["type"] == "program" for i in second["input"] if i.get("type") == "function_call_output")
    if store is False:
        assert all(e["response"]["store"] is False for e in journal)


def test_runner_run_sync(ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    client_version("openai-agents", agents_version)
    try:
        result = Runner.run_sync(
            agent(ptc_emulator),
            "Compare inventory with demand for sku_123.",
            run_config=RunConfig(tracing_disabled=True),
        )
    finally:
        # run_sync leaves the thread's default event loop open on purpose; this test owns it.
        policy = asyncio.get_event_loop_policy()
        policy.get_event_loop().close()
        policy.set_event_loop(None)
    assert result.final_output == EXPECTED


@pytest.mark.anyio
async def test_runner_continues_by_previous_response_id(
    ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    """`auto_previous_response_id=True`: the Runner continues each response by its id and sends only
    what is new, the calls' outputs with their callers; the stored chain holds the program. A second
    run goes on from the first's last response (`previous_response_id=`)."""
    client_version("openai-agents", agents_version)
    config = RunConfig(tracing_disabled=True)
    first = await Runner.run(
        agent(ptc_emulator),
        "Compare inventory with demand for sku_123.",
        run_config=config,
        auto_previous_response_id=True,
    )
    assert first.final_output == EXPECTED
    assert sorted(calls) == [("get_demand", "sku_123"), ("get_inventory", "sku_123")]
    journal = ptc_emulator.journal
    assert [e["status"] for e in journal] == [200, 200]
    opening, resume = (e["request"] for e in journal)
    assert "previous_response_id" not in opening
    assert resume["previous_response_id"] == journal[0]["response_id"]
    assert [i["type"] for i in resume["input"]] == ["function_call_output", "function_call_output"]
    assert all(
        i["caller"] == {"type": "program", "caller_id": journal[0]["response"]["output"][0]["call_id"]}
        for i in resume["input"]
    )
    assert first.last_response_id == journal[1]["response_id"]

    calls.clear()
    second = await Runner.run(
        agent(ptc_emulator),
        "Compare inventory with demand for sku_456.",
        run_config=config,
        previous_response_id=first.last_response_id,
    )
    assert second.final_output == EXPECTED.replace("sku_123", "sku_456")
    assert sorted(calls) == [("get_demand", "sku_456"), ("get_inventory", "sku_456")]
    assert ptc_emulator.journal[2]["request"]["previous_response_id"] == first.last_response_id


class Trip(pydantic.BaseModel):
    city: str
    days: int


@pytest.mark.anyio
async def test_an_output_type_sends_a_strict_json_schema_format_that_is_taken(ptc_emulator: PTCEmulator) -> None:
    """`output_type` makes the Runner send `text.format` json_schema with `strict: true` and the
    schema it made strict-compliant: the emulator checks it (name, schema, strictness) and takes it,
    and the Runner parses the final message into the type."""
    typed = Agent(
        name="planner",
        instructions="Answer with the trip.",
        model=runner_model(ptc_emulator),
        tools=[ProgrammaticToolCallingTool(), get_inventory],
        output_type=Trip,
    )
    code = "text(JSON.stringify({city: 'Paris', days: 3}))"
    result = await Runner.run(typed, js(code), run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == Trip(city="Paris", days=3)
    sent = result.raw_responses[-1].response_id
    assert sent is not None
    echoed = await runner_model(ptc_emulator)._client.responses.retrieve(sent)
    assert echoed.text is not None and echoed.text.format.type == "json_schema"
    assert echoed.text.format.strict is True  # type: ignore[union-attr]
