"""The upstream writes programs for every tool kind a program calls (a five-pause loop, a
namespace, an MCP server) and calls direct tools directly; scenarios still win where they match."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    FIVE_PAUSES,
    FakeUpstream,
    call,
    called,
    echo,
    functions_of,
    last_result,
    program,
    say,
)
from tests.tools.tools_support import DocsServer, docs_server

PTC = {"type": "programmatic_tool_calling"}
STEP = {
    "type": "function",
    "name": "step",
    "description": "Advance the counter.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "output_schema": {"type": "object", "properties": {"next": {"type": "integer"}}, "required": ["next"]},
    "allowed_callers": ["programmatic"],
}


def _output(item: Any, output: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {"type": "function_call_output", "call_id": item.call_id, "output": json.dumps(output)}
    if item.caller is not None:
        answer["caller"] = item.caller.model_dump()
    return answer


def test_a_five_pause_loop(either_sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    sdk = either_sdk
    upstream.reply(program(FIVE_PAUSES), echo("Done: "))
    response = sdk.responses.create(model="m", input="Count to five.", tools=[STEP, PTC])
    pauses = 0
    while response.output[-1].type == "function_call":
        pauses += 1
        calls = [i for i in response.output if i.type == "function_call"]
        assert len(calls) == 1 and calls[0].caller is not None
        n = json.loads(calls[0].arguments)["n"]
        response = sdk.responses.create(
            model="m", previous_response_id=response.id, input=[_output(calls[0], {"next": n + 1})], tools=[STEP, PTC]
        )
    assert pauses == 5
    assert response.output_text == "Done: n=5"
    assert len(upstream.requests) == 2  # the pauses are the program's, not the model's


SHIPPING = {
    "type": "namespace",
    "name": "shipping",
    "description": "Order tracking and delivery tools.",
    "tools": [
        {
            "type": "function",
            "name": "get_delivery_eta",
            "description": "The delivery date of an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
            "allowed_callers": ["programmatic"],
        }
    ],
}


def test_a_namespace_tool(either_sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    sdk = either_sdk
    code = "const e = await tools.shipping.get_delivery_eta({ order_id: 'A-104' });\ntext(e.eta);"
    upstream.reply(program(code), echo("ETA "))
    first = sdk.responses.create(model="m", input="When does A-104 arrive?", tools=[SHIPPING, PTC])
    fc = first.output[-1]
    assert fc.type == "function_call" and fc.namespace == "shipping" and fc.name == "get_delivery_eta"
    second = sdk.responses.create(
        model="m", previous_response_id=first.id, input=[_output(fc, {"eta": "2026-12-04"})], tools=[SHIPPING, PTC]
    )
    assert second.output_text == "ETA 2026-12-04"
    description = functions_of(upstream.requests[0])[CODE_TOOL]
    assert (
        "  shipping: {\n    /** The delivery date of an order. */\n    get_delivery_eta(args: { order_id: string; })"
        in (description)
    )


@pytest.fixture
def docs() -> Iterator[DocsServer]:
    with docs_server() as server:
        yield server


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_mcp_tool(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, docs: DocsServer, api: str
) -> None:
    server = any_server(mcp_allow_hosts=("127.0.0.1",), model_upstream_api=api)
    emulator = PTCEmulator(server.base_url)
    mcp = {
        "type": "mcp",
        "server_label": "docs",
        "server_url": docs.url,
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    upstream.reply(program("text(await tools.docs.lookup({ topic: 'ptc' }))"), echo())
    with emulator.client(max_retries=0) as sdk:
        response = sdk.responses.create(model="m", input="What do the docs say of ptc?", tools=[mcp, PTC])
    assert [i.type for i in response.output] == ["program", "program_output", "message"]
    assert response.output_text == "The docs say ptc is fine."
    assert docs.calls == [("lookup", {"topic": "ptc"})]
    description = functions_of(upstream.requests[0])[CODE_TOOL]
    assert "  docs: {\n" in description
    assert (
        "    /** Look up a topic in the docs */\n    lookup(args: { topic: string; }): Promise<unknown>;" in description
    )
    emulator.close()


ORDER = {
    "type": "function",
    "name": "get_order",
    "description": "An order by id.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}


def test_a_direct_call(either_sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    sdk = either_sdk
    upstream.reply(
        call("get_order", id="A-104"), lambda body: say(f"The order is {json.loads(last_result(body))['state']}.")
    )
    first = sdk.responses.create(model="m", input="Where is order A-104?", tools=[ORDER, PTC])
    assert [i.type for i in first.output] == ["function_call"]
    fc = first.output[0]
    assert fc.caller is None or fc.caller.type == "direct"
    assert json.loads(fc.arguments) == {"id": "A-104"}
    second = sdk.responses.create(
        model="m", previous_response_id=first.id, input=[_output(fc, {"state": "shipped"})], tools=[ORDER, PTC]
    )
    assert second.output_text == "The order is shipped."
    assert list(functions_of(upstream.requests[0])) == ["get_order", CODE_TOOL]
    assert called(upstream.requests[1]) == ["get_order"]


def test_text_beside_a_program_is_a_commentary_message(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(program("text(1 + 1)", text="Let me compute that."), echo("It is "))
    response = sdk.responses.create(model="m", input="What is 1 + 1?", tools=[PTC])
    assert [i.type for i in response.output] == ["message", "program", "program_output", "message"]
    assert response.output[0].phase == "commentary"
    assert response.output[-1].content[0].text == "It is 2"
    # The commentary and the code call go back as one assistant message.
    back = upstream.requests[1]["messages"]
    assert back[1]["content"] == "Let me compute that." and back[1]["tool_calls"][0]["function"]["name"] == CODE_TOOL


def test_a_scenario_still_wins_where_it_matches(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    emulator = PTCEmulator(any_server().base_url)
    emulator.add_scenario(
        {"name": "greeting", "match": {"input": "hello"}, "turns": [{"message": "Hi from the script."}]}
    )
    with emulator.client(max_retries=0) as sdk:
        scripted = sdk.responses.create(model="m", input="hello", tools=[PTC])
        upstream.reply(say("Hi from the model."))
        modelled = sdk.responses.create(model="m", input="something else", tools=[PTC])
    assert scripted.output_text == "Hi from the script."
    assert modelled.output_text == "Hi from the model."
    assert len(upstream.requests) == 1
    journal = emulator.journal
    assert [e.get("scenario") for e in journal[-2:]] == ["greeting", "upstream:m"] or [
        e.get("scenario") for e in journal[:2]
    ] == ["greeting", "upstream:m"]
    emulator.close()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_upstream_reasoning_is_a_reasoning_item_that_replays(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, api: str
) -> None:
    upstream.reply(program("text(await tools.step({ n: 1 }))", reasoning="Step once, then report."), echo())
    emulator = PTCEmulator(any_server(model_upstream_api=api).base_url)
    with emulator.client(max_retries=0) as sdk:
        first = sdk.responses.create(model="m", input="Step.", tools=[STEP, PTC], store=False)
        assert [i.type for i in first.output] == ["reasoning", "program", "function_call"]
        assert first.output[0].summary[0].text == "Step once, then report."
        fc = first.output[-1]
        items = [
            {"role": "user", "content": "Step."},
            *(i.model_dump(exclude_none=True) for i in first.output),
            _output(fc, {"next": 2}),
        ]
        second = sdk.responses.create(model="m", input=items, tools=[STEP, PTC], store=False)
    assert second.output_text == '{"next":2}'
    emulator.close()


@pytest.mark.parametrize(
    ("choice", "told"),
    [
        ({"type": "programmatic_tool_calling"}, {"type": "function", "function": {"name": CODE_TOOL}}),
        ({"type": "function", "name": "get_order"}, {"type": "function", "function": {"name": "get_order"}}),
        ("required", "required"),
        ("none", "none"),
        (None, "auto"),
    ],
)
def test_tool_choice_reaches_the_upstream(sdk: openai.OpenAI, upstream: FakeUpstream, choice: Any, told: Any) -> None:
    upstream.reply(say("ok"))
    extra = {"tool_choice": choice} if choice is not None else {}
    sdk.responses.create(model="m", input="Go.", tools=[ORDER, PTC], **extra)
    assert upstream.requests[0]["tool_choice"] == told
