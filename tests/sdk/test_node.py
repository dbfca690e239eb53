"""The official Node clients against the emulator: npm `openai` (each release of the matrix in
tests/node/package.json) and `@openai/agents`, running the scripts of tests/node.

Each npm `openai` runs the PTC guide's continuation loop with `store: false` (the guide's own
JavaScript) and with `previous_response_id`, a streamed loop, a loop over the Responses WebSocket,
compaction of a window with a paused program, and the loop in a conversation; where the release
has them, two WebSocket lanes at once and the Agents API's function-tool flow. `@openai/agents`
runs an Agent with function tools through its Runner: a direct function call, and programmatic
tool calling plain, streamed and over its WebSocket transport. The model is scripted here, per
test; each test checks what the script printed and what the server's journal recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import valid
from tests.sdk.node_support import MODULES, NPM_OPENAI, NpmOpenAI, dependencies, installed_version, needs_node, run_node

pytestmark = [pytest.mark.sdk, needs_node]

ClientVersion = Callable[[str, str], None]

INVENTORY = r"""
name: node-inventory
match:
  input: '(?i)compare inventory with demand for (?P<sku>sku_\w+)'
  tools: [get_inventory, get_demand]
turns:
  - program: |
      const [stock, demand] = await Promise.all([
        tools.get_inventory({ sku: {{ sku }} }),
        tools.get_demand({ sku: {{ sku }} }),
      ]);
      text(JSON.stringify({
        sku: stock.sku,
        available_units: stock.available_units,
        requested_units: demand.requested_units,
        shortage_units: Math.max(demand.requested_units - stock.available_units, 0),
      }));
  - message: >-
      {{ data.sku }}: {{ data.available_units }} available against {{ data.requested_units }} requested,
      short by {{ data.shortage_units }}.
"""
INVENTORY_ANSWER = "sku_123: 42 available against 31 requested, short by 0."
INVENTORY_OUTPUTS = {
    "get_inventory": {"sku": "sku_123", "available_units": 42},
    "get_demand": {"sku": "sku_123", "requested_units": 31},
}

ADD = r"""
name: node-add
match:
  input: '(?i)^add (?P<a>\d+) and (?P<b>\d+), then (?P<c>\d+), then (?P<d>\d+)'
  tools: [add]
turns:
  - program: |
      const a = await tools.add({ a: Number({{ a }}), b: Number({{ b }}) });
      const b = await tools.add({ a, b: Number({{ c }}) });
      const c = await tools.add({ a: b, b: Number({{ d }}) });
      text(`total: ${c}`);
  - message: "{{ result }}"
"""

CUSTOMER_PROGRAM = r"""
name: node-customer-program
match:
  input: '(?i)customer (?P<customer_id>\w+)'
  tools: [get_customer]
turns:
  - program: |
      const found = await tools.get_customer({ customer_id: {{ customer_id }} });
      text(JSON.stringify({ customer_id: {{ customer_id }}, name: found.customer.name, plan: found.customer.plan }));
  - message: "Customer {{ data.customer_id }}: {{ data.name }}, {{ data.plan }} plan."
"""
CUSTOMER_PROGRAM_ANSWER = "Customer 123: Example Customer, pro plan."  # not the bundled demo's words
CUSTOMER_DIRECT = r"""
name: node-customer-direct
match:
  input: '(?i)customer (?P<customer_id>\w+)'
  tools: [get_customer]
turns:
  - call: { name: get_customer, arguments: { customer_id: "{{ customer_id }}" } }
  - message: "Customer {{ customer_id }} is {{ output.customer.name }}, on the {{ output.customer.plan }} plan."
"""
CUSTOMER_ANSWER = "Customer 123 is Example Customer, on the pro plan."
CUSTOMER = {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}

WITH_LANES = [sdk for sdk in NPM_OPENAI if sdk.lanes]
WITH_AGENTS_API = [sdk for sdk in NPM_OPENAI if sdk.agents_api]


def run(
    emulator: PTCEmulator, client_version: ClientVersion, script: str, sdk: NpmOpenAI | str = "openai", **env: str
) -> Any:
    """What `script` printed (one line of JSON, or the text when it is not JSON), run with `sdk`;
    the version that ran is noted for the run's summary."""
    done = run_node(script, {**emulator.env, **env}, sdk=str(sdk))
    client_version("npm openai", done.version)
    try:
        return done.json()
    except json.JSONDecodeError:
        return done.stdout.strip()


def routes(emulator: PTCEmulator) -> list[list[str]]:
    journal = emulator.journal
    assert all(e["status"] == 200 for e in journal), [(e["status"], e["response"]) for e in journal]
    return [e["route"] for e in journal]


def program_calls(emulator: PTCEmulator) -> dict[str, Any]:
    """The calls programs made, by tool name, with the output the client sent back."""
    return {c.name: c.output for c in emulator.calls(route="program")}


def input_types(entry: dict[str, Any]) -> list[str]:
    items = entry["request"]["input"]
    return [item.get("type", "message") for item in ([] if isinstance(items, str) else items)]


def assert_callers_kept(entry: dict[str, Any], previous: dict[str, Any]) -> None:
    """Every function_call_output of a request carries its call's `caller` unchanged."""
    callers = {i["call_id"]: i["caller"] for i in previous["response"]["output"] if i["type"] == "function_call"}
    outputs = [i for i in entry["request"]["input"] if i.get("type") == "function_call_output"]
    assert outputs and {o["call_id"]: o["caller"] for o in outputs} == callers


# ---- the matrix itself ----------------------------------------------------------------------------


def test_the_matrix_is_what_package_json_installs() -> None:
    """Every npm `openai` of package.json is in the matrix, each at an exact version."""
    openais = {
        name: spec for name, spec in dependencies().items() if name == "openai" or spec.startswith("npm:openai@")
    }
    assert set(openais) == {sdk.package for sdk in NPM_OPENAI}
    for spec in openais.values():
        version = spec.removeprefix("npm:openai@")
        assert version.count(".") == 2 and version.replace(".", "").isdigit(), f"not an exact version: {spec}"


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_the_surfaces_each_release_has(
    sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    """The matrix's table says what each release has; the release that runs says so too."""
    found = run(ptc_emulator, client_version, "surfaces.mjs", sdk)
    assert found == {"responses_websocket": True, "lanes": sdk.lanes, "agents_api": sdk.agents_api}


# ---- npm openai: the Responses API --------------------------------------------------------------------


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_the_guides_loop_with_store_false(
    sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    """The PTC guide's JavaScript continuation loop as the guide has it (seed_loop.mjs)."""
    ptc_emulator.add_scenario(INVENTORY)
    assert run(ptc_emulator, client_version, "seed_loop.mjs", sdk) == INVENTORY_ANSWER
    assert routes(ptc_emulator) == [["program", "function_call", "function_call"], ["program_output", "message"]]
    first, second = ptc_emulator.journal
    assert first["request"]["store"] is False and second["request"]["store"] is False
    # The whole window is replayed: the program (with its fingerprint), its calls, their outputs.
    assert input_types(second) == [
        "message",
        "program",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    program = second["request"]["input"][1]
    assert program["fingerprint"] == first["response"]["output"][0]["fingerprint"]
    assert_callers_kept(second, first)
    assert program_calls(ptc_emulator) == INVENTORY_OUTPUTS
    ptc_emulator.assert_all_scenarios_used()


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_the_guides_loop_with_previous_response_id(
    sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    ptc_emulator.add_scenario(INVENTORY)
    printed = run(ptc_emulator, client_version, "stored_loop.mjs", sdk)
    first, second = ptc_emulator.journal
    assert printed == {
        "text": INVENTORY_ANSWER,
        "responses": [first["response_id"], second["response_id"]],
        "previous_response_id": first["response_id"],
        "first_status": "completed",
        "input_items": ["function_call_output", "function_call_output"],
    }
    assert routes(ptc_emulator) == [["program", "function_call", "function_call"], ["program_output", "message"]]
    assert second["request"]["previous_response_id"] == first["response_id"]
    assert input_types(second) == ["function_call_output", "function_call_output"]  # only what is new
    assert_callers_kept(second, first)
    assert all(e["response"]["store"] is True for e in (first, second))
    assert program_calls(ptc_emulator) == INVENTORY_OUTPUTS


THREE_PAUSES = [["program", "function_call"], ["function_call"], ["function_call"], ["program_output", "message"]]


def three_additions(first: int, second: int, third: int, fourth: int) -> list[tuple[dict[str, int], int]]:
    """The program's three calls of `add` (each with the sum so far) and the outputs sent back."""
    total = first + second
    return [
        ({"a": first, "b": second}, total),
        ({"a": total, "b": third}, total + third),
        ({"a": total + third, "b": fourth}, total + third + fourth),
    ]


def additions(emulator: PTCEmulator, lane: str | None = None) -> list[tuple[Any, Any]]:
    """The calls of `add` programs made (on one WebSocket lane if given), with their outputs."""
    lanes = {e["seq"]: e["request"].get("stream_id") for e in emulator.journal}
    return [(c.arguments, c.output) for c in emulator.calls("add", route="program") if lane in (None, lanes[c.seq])]


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_a_streamed_loop(sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    """`responses.stream()`: the program pauses three times, each pause one streamed response."""
    ptc_emulator.add_scenario(ADD)
    printed = run(ptc_emulator, client_version, "stream_loop.mjs", sdk)
    assert printed["answer"] == "total: 113" and printed["responses"] == 4
    assert printed["events"] > 4 * 5  # created, in_progress, item added and done, completed at least
    assert routes(ptc_emulator) == THREE_PAUSES
    assert all(e["request"]["stream"] is True and e["response"]["store"] is True for e in ptc_emulator.journal)
    assert additions(ptc_emulator) == three_additions(1, 2, 10, 100)


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_a_websocket_loop(sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    """`ResponsesWS` (openai/resources/responses/ws): one socket, continued by previous_response_id."""
    ptc_emulator.add_scenario(ADD)
    printed = run(ptc_emulator, client_version, "websocket_loop.mjs", sdk)
    journal = ptc_emulator.journal
    assert printed["answer"] == "total: 113" and printed["closed"] == 1000
    assert printed["responses"] == [e["response_id"] for e in journal]
    assert routes(ptc_emulator) == THREE_PAUSES
    assert [e["method"] for e in journal] == ["WS"] * 4
    assert [e["request"].get("previous_response_id") for e in journal] == [None, *printed["responses"][:3]]
    assert additions(ptc_emulator) == three_additions(1, 2, 10, 100)


@pytest.mark.parametrize("sdk", WITH_LANES, ids=str)
def test_two_websocket_lanes_at_once(sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    """The lane helper: two loops on one socket, each on its own `stream_id`."""
    ptc_emulator.add_scenario(ADD)
    printed = run(ptc_emulator, client_version, "websocket_lanes.mjs", sdk)
    assert {lane: p["answer"] for lane, p in printed.items()} == {"lane-a": "total: 113", "lane-b": "total: 227"}
    journal = ptc_emulator.journal
    assert all(e["method"] == "WS" and e["status"] == 200 for e in journal)
    for lane, seen in printed.items():
        mine = [e for e in journal if e["request"].get("stream_id") == lane]
        assert [e["response_id"] for e in mine] == seen["responses"]
        assert [e["route"] for e in mine] == THREE_PAUSES
    assert additions(ptc_emulator, "lane-a") == three_additions(1, 2, 10, 100)
    assert additions(ptc_emulator, "lane-b") == three_additions(3, 4, 20, 200)
    assert len(journal) == 8


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_compaction_of_a_window_with_a_paused_program(
    sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    ptc_emulator.add_scenario(INVENTORY)
    printed = run(ptc_emulator, client_version, "compaction.mjs", sdk)
    assert printed["text"] == INVENTORY_ANSWER
    assert printed["object"] == "response.compaction"
    assert printed["compacted"] == ["message:user", "compaction"] and printed["sealed"] is True
    assert printed["usage"]["input_tokens"] > 0 and printed["usage"]["output_tokens"] == 0
    # The journal records the two responses (compaction is not a model turn); the second continues
    # the first's run from inside the compacted window.
    journal = ptc_emulator.journal
    assert routes(ptc_emulator) == [["program", "function_call", "function_call"], ["program_output", "message"]]
    assert journal[1]["conversation"] == journal[0]["conversation"] == journal[0]["response_id"]
    assert input_types(journal[1]) == ["message", "compaction", "function_call_output", "function_call_output"]
    assert_callers_kept(journal[1], journal[0])
    assert program_calls(ptc_emulator) == INVENTORY_OUTPUTS


@pytest.mark.parametrize("sdk", NPM_OPENAI, ids=str)
def test_a_conversation(sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    ptc_emulator.add_scenario(INVENTORY)
    printed = run(ptc_emulator, client_version, "conversation.mjs", sdk)
    conversation = printed["conversation"]
    assert printed["text"] == INVENTORY_ANSWER and printed["metadata"] == {"flow": "guide"}
    assert printed["named"] == [conversation, conversation]
    assert printed["items"] == [
        "message",
        "program",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "program_output",
        "message",
    ]
    journal = ptc_emulator.journal
    assert routes(ptc_emulator) == [["program", "function_call", "function_call"], ["program_output", "message"]]
    assert [e["conversation"] for e in journal] == [conversation, conversation]
    assert input_types(journal[1]) == ["function_call_output", "function_call_output"]
    assert program_calls(ptc_emulator) == INVENTORY_OUTPUTS


# ---- npm openai: the Agents API -------------------------------------------------------------------


@pytest.mark.parametrize("sdk", WITH_AGENTS_API, ids=str)
def test_the_agents_api_function_tool_flow(
    sdk: NpmOpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    """The Agents API guide's function-tool flow; the answer is its JavaScript code."""
    ptc_emulator.add_scenario(CUSTOMER_PROGRAM)
    printed = run(ptc_emulator, client_version, "agents_api.mjs", sdk)
    assert printed["answered"] == [{"name": "get_customer", "arguments": {"customer_id": "123"}}]
    assert printed["text"] == CUSTOMER_PROGRAM_ANSWER
    assert printed["status"] == "idle" and printed["required_actions"] == []
    assert printed["items"] == ["message", "command_execution", "function_call", "function_call_output", "message"]
    assert "agent.session.turn.completed" in printed["events"]
    # Sessions are not in the journal (it records Responses requests): the server's record of this
    # one is read back with the Python SDK, every body validated against its models.
    with ptc_emulator.client(max_retries=0) as client:
        session = valid(client.beta.agents.sessions.retrieve(printed["session"]))
        turns = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
        items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert session.status == "idle" and [t.status for t in turns] == ["completed"]
    assert session.agent.tools[0].name == "get_customer"
    program, call, output = items[1:4]
    assert "tools.get_customer" in program.command and program.status == "completed"
    assert call.arguments == {"customer_id": "123"} and json.loads(output.output) == CUSTOMER


# ---- @openai/agents --------------------------------------------------------------------------------


REPLAYED = ["message", "program", "function_call", "function_call", "function_call_output", "function_call_output"]


@pytest.mark.parametrize("flow", ["function_tool", "ptc", "ptc_stream", "ptc_websocket"])
def test_the_agents_sdk_runner(flow: str, ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    """An Agent with function tools, run by the Runner: a direct call (the Agents guide's
    get_customer), and the PTC guide's tools callable only from a program, plain, streamed and over
    the Responses WebSocket. The Runner replays the whole history, program items and callers kept."""
    ptc_emulator.add_scenario(CUSTOMER_DIRECT if flow == "function_tool" else INVENTORY)
    done = run_node("agents_runner.mjs", {**ptc_emulator.env, "FLOW": flow})
    # @openai/agents runs on the npm openai installed at the top (it has no copy of its own).
    assert not list(MODULES.glob("@openai/*/node_modules/openai"))
    client_version("npm @openai/agents", installed_version("@openai/agents"))
    client_version("npm openai", done.version)
    printed = done.json()
    journal = ptc_emulator.journal
    if flow == "function_tool":
        assert printed["output"] == CUSTOMER_ANSWER and printed["ran"] == ["get_customer:123"]
        assert printed["items"] == ["function_call", "function_call_result", "message"]
        assert routes(ptc_emulator) == [["function_call"], ["message"]]
        [asked] = ptc_emulator.calls("get_customer", route="direct")
        assert asked.arguments == {"customer_id": "123"} and asked.output == CUSTOMER
        assert input_types(journal[1]) == ["message", "function_call", "function_call_output"]
    else:
        assert printed["output"] == INVENTORY_ANSWER
        assert sorted(printed["ran"]) == ["get_demand:sku_123", "get_inventory:sku_123"]
        assert printed["items"] == [
            "program",
            "function_call",
            "function_call",
            "function_call_result",
            "function_call_result",
            "program_output",
            "message",
        ]
        assert routes(ptc_emulator) == [["program", "function_call", "function_call"], ["program_output", "message"]]
        tools = journal[0]["request"]["tools"]
        assert {"type": "programmatic_tool_calling"} in tools
        functions = [t for t in tools if t["type"] == "function"]
        assert [t["allowed_callers"] for t in functions] == [["programmatic"], ["programmatic"]]
        assert all("output_schema" in t for t in functions)
        assert input_types(journal[1]) == REPLAYED
        assert_callers_kept(journal[1], journal[0])
        assert program_calls(ptc_emulator) == INVENTORY_OUTPUTS
    assert all(e["request"]["stream"] is (flow != "function_tool" and flow != "ptc") for e in journal)
    assert {e["method"] for e in journal} == ({"WS"} if flow == "ptc_websocket" else {"POST"})
    if flow == "ptc_stream":
        assert printed["events"] > 2 * 5
    ptc_emulator.assert_all_scenarios_used()
