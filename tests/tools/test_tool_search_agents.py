"""The OpenAI Agents SDK's Runner completes a run with ToolSearchTool, deferred tools and PTC.

The Runner replays the whole item list every turn, tool search items included: the emulator
derives what is loaded from them, so the program of the first turn (started after the search in
the same response) and its resumption on the second see the same tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from agents import (
    Agent,
    ModelSettings,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    ToolSearchTool,
    function_tool,
    set_tracing_disabled,
    tool_namespace,
)

from ptc_emulator.testing.server import PTCEmulator
from tests.support import runner_model

pytestmark = pytest.mark.sdk  # the Agents SDK's Runner accepts tool search items

calls: list[tuple[str, str]] = []


@function_tool(defer_loading=True, allowed_callers=["programmatic"])
def get_delivery_eta(order_id: str) -> str:
    """Return the ETA for an order."""
    calls.append(("get_delivery_eta", order_id))
    return json.dumps({"order_id": order_id, "eta": "2026-12-04"})


@function_tool(defer_loading=True, allowed_callers=["programmatic"])
def get_order_weight(order_id: str) -> str:
    """Return the parcel weight of an order in kilograms."""
    calls.append(("get_order_weight", order_id))
    return json.dumps({"order_id": order_id, "kg": 3.5})


@function_tool(defer_loading=True, allowed_callers=["programmatic"])
def get_stock_price(ticker: str) -> str:
    """Return the latest stock price for a ticker symbol."""
    calls.append(("get_stock_price", ticker))
    return "1.0"


SHIPPING = tool_namespace(
    name="shipping", description="Order tracking and delivery tools.", tools=[get_delivery_eta, get_order_weight]
)

SCENARIO = {
    "name": "agents__search_then_program",
    "match": {"input": "(?i)when will order (?P<order_id>[A-Z]-\\d+) arrive"},
    "turns": [
        {"search": {"query": "delivery ETA and parcel weight for an order"}},
        {
            "program": (
                "const [e, w] = await Promise.all([\n"
                "  tools.shipping.get_delivery_eta({order_id: {{ order_id }}}),\n"
                "  tools.shipping.get_order_weight({order_id: {{ order_id }}}),\n"
                "]);\n"
                "text(JSON.stringify({order_id: e.order_id, eta: e.eta, kg: w.kg}));"
            )
        },
        {"message": "Order {{ data.order_id }} ({{ data.kg }} kg) arrives on {{ data.eta }}."},
    ],
}


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)  # nothing may leave this machine
    calls.clear()
    yield


def agent(ptc_emulator: PTCEmulator, **settings: object) -> Agent:
    model = runner_model(ptc_emulator)
    return Agent(
        name="shipping",
        instructions="Search for the shipping tools, then use a program.",
        model=model,
        model_settings=ModelSettings(**settings),  # type: ignore[arg-type]
        tools=[ToolSearchTool(), ProgrammaticToolCallingTool(), *SHIPPING, get_stock_price],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_completes_a_run_with_tool_search_and_ptc(ptc_emulator: PTCEmulator, store: bool | None) -> None:
    ptc_emulator.add_scenario(SCENARIO)
    result = await Runner.run(
        agent(ptc_emulator, store=store), "When will order A-104 arrive?", run_config=RunConfig(tracing_disabled=True)
    )
    assert result.final_output == "Order A-104 (3.5 kg) arrives on 2026-12-04."
    assert sorted(calls) == [("get_delivery_eta", "A-104"), ("get_order_weight", "A-104")]
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_search_call_item", "tool_search_output_item"]
    assert kinds[-1] == "message_output_item"
    journal = ptc_emulator.journal
    assert [e["status"] for e in journal] == [200, 200]
    first = journal[0]["request"]
    # The Runner declared the deferred tools: a namespace and a plain deferred function.
    declared = {t["type"]: t for t in first["tools"]}
    assert declared["namespace"]["name"] == "shipping"
    assert all(t["defer_loading"] for t in declared["namespace"]["tools"])
    replayed = [i.get("type", "message") for i in journal[1]["request"]["input"]]
    assert replayed[:3] == ["message", "tool_search_call", "tool_search_output"]
    loaded = journal[0]["response"]["output"][1]["tools"]
    # The stock tool shares no word with the query: BM25 left it deferred.
    assert [(t["name"], [f["name"] for f in t["tools"]]) for t in loaded] == [
        ("shipping", ["get_delivery_eta", "get_order_weight"])
    ]
