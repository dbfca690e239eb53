"""A five-pause loop, a namespace tool, an MCP tool and a direct call, each written by the model
upstream (either protocol), through the Agents SDK's Runner and through the npm client (the guide's
JavaScript loop over each flow, tests/node/flows.mjs). The Python SDK drives the same flows in
test_tool_kinds.py, and the seed's inventory loop through all three clients is test_clients.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from agents import (
    Agent,
    HostedMCPTool,
    ModelSettings,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
    tool_namespace,
)

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    FIVE_PAUSES,
    FakeUpstream,
    Script,
    call,
    called,
    echo,
    functions_of,
    last_result,
    needs_node,
    program,
    run_node,
    say,
)
from tests.support import runner_model
from tests.tools.tools_support import docs_server


@dataclass(frozen=True)
class Flow:
    prompt: str
    script: tuple[Script, ...]
    """What the upstream answers, turn by turn: always two turns (the pauses are the program's)."""
    expected: str
    answered: tuple[str, ...]
    """The calls the client answers, as `caller type:tool name`."""
    declares: str
    """What the code function's description declares of the flow's tools."""
    direct: tuple[str, ...] = ()
    """The functions the upstream may call directly, beside the code function."""


def _order_state(body: dict[str, Any]) -> dict[str, Any]:
    return say(f"The order is {json.loads(last_result(body))['state']}.")


FLOWS = {
    "five_pauses": Flow(
        "Count to five.",
        (program(FIVE_PAUSES), echo("Done: ")),
        "Done: n=5",
        ("program:step",) * 5,
        "step(args: { n: number; })",
    ),
    "namespace": Flow(
        "When does A-104 arrive?",
        (
            program("const e = await tools.shipping.get_delivery_eta({ order_id: 'A-104' });\ntext(e.eta);"),
            echo("ETA "),
        ),
        "ETA 2026-12-04",
        ("program:shipping.get_delivery_eta",),
        "  shipping: {\n    /** The delivery date of an order. */\n    get_delivery_eta(args: { order_id: string; })",
    ),
    "mcp": Flow(
        "What do the docs say of ptc?",
        (program("text(await tools.docs.lookup({ topic: 'ptc' }))"), echo()),
        "The docs say ptc is fine.",
        (),
        "    /** Look up a topic in the docs */\n    lookup(args: { topic: string; })",
    ),
    "direct": Flow(
        "Where is order A-104?",
        (call("get_order", id="A-104"), _order_state),
        "The order is shipped.",
        ("direct:get_order",),
        "",
        ("get_order",),
    ),
}


def _assert_told(flow: Flow, upstream: FakeUpstream) -> None:
    """The upstream was offered the flow's tools, and its second turn read back its first."""
    assert len(upstream.requests) == 2  # the pauses are the program's, not the model's
    offered = functions_of(upstream.requests[0])
    assert list(offered) == [*flow.direct, CODE_TOOL]
    assert flow.declares in offered[CODE_TOOL]
    assert called(upstream.requests[1]) == (list(flow.direct) or [CODE_TOOL])


@pytest.fixture(params=["chat", "responses"])
def emulator(any_server: Callable[..., EmulatorServer], request: pytest.FixtureRequest) -> Iterator[PTCEmulator]:
    """An emulator whose model upstream speaks each protocol in turn, allowed to reach the local MCP server."""
    set_tracing_disabled(True)  # nothing may leave this machine
    found = PTCEmulator(any_server(model_upstream_api=request.param, mcp_allow_hosts=("127.0.0.1",)).base_url)
    yield found
    found.close()


@pytest.fixture(params=list(FLOWS))
def flow_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def docs_url(flow_name: str) -> Iterator[str]:
    """The MCP server's URL for the MCP flow (no server for the others)."""
    if flow_name != "mcp":
        yield ""
        return
    with docs_server() as docs:
        yield docs.url


# The Agents SDK's tools for the flows; what each client saw is recorded here.
answered: list[str] = []


@function_tool(allowed_callers=["programmatic"])
def step(n: int) -> str:
    """Advance the counter."""
    answered.append("program:step")
    return json.dumps({"next": n + 1})


@function_tool(allowed_callers=["programmatic"])
def get_delivery_eta(order_id: str) -> str:
    """The delivery date of an order."""
    answered.append("program:shipping.get_delivery_eta")
    return json.dumps({"order_id": order_id, "eta": "2026-12-04"})


@function_tool
def get_order(id: str) -> str:
    """An order by id."""
    answered.append("direct:get_order")
    return json.dumps({"state": "shipped"})


def _agent_tools(flow_name: str, docs_url: str) -> list[Any]:
    if flow_name == "five_pauses":
        return [step]
    if flow_name == "namespace":
        return tool_namespace(
            name="shipping", description="Order tracking and delivery tools.", tools=[get_delivery_eta]
        )
    if flow_name == "mcp":
        config = {"type": "mcp", "server_label": "docs", "server_url": docs_url, "require_approval": "never"}
        return [HostedMCPTool(tool_config={**config, "allowed_callers": ["programmatic"]})]  # type: ignore[typeddict-item]
    # The SDK refuses ProgrammaticToolCallingTool() without a tool a program may call, so the
    # direct call is made beside one (the npm client offers get_order alone).
    return [get_order, step]


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_the_agents_sdk_runner(
    emulator: PTCEmulator, upstream: FakeUpstream, flow_name: str, docs_url: str, store: bool | None
) -> None:
    flow = FLOWS[flow_name]
    upstream.reply(*flow.script)
    answered.clear()
    agent = Agent(
        name=flow_name,
        instructions="Use the tools.",
        model=runner_model(emulator),
        model_settings=ModelSettings(store=store),
        tools=[ProgrammaticToolCallingTool(), *_agent_tools(flow_name, docs_url)],
    )
    result = await Runner.run(agent, flow.prompt, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == flow.expected
    assert answered == list(flow.answered)
    _assert_told(flow, upstream)
    assert [e["status"] for e in emulator.journal] == [200] * (len(flow.answered) + 1)


@needs_node
@pytest.mark.sdk
def test_the_npm_client(
    emulator: PTCEmulator,
    upstream: FakeUpstream,
    flow_name: str,
    docs_url: str,
    client_version: Callable[[str, str], None],
) -> None:
    flow = FLOWS[flow_name]
    upstream.reply(*flow.script)
    done = run_node("flows.mjs", emulator.base_url, FLOW=flow_name, DOCS_URL=docs_url)
    client_version("npm openai", done.version)
    assert done.json() == {
        "text": flow.expected,
        "requests": len(flow.answered) + 1,
        "answered": list(flow.answered),
    }
    _assert_told(flow, upstream)
