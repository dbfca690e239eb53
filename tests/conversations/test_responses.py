"""`conversation` on responses.create: the conversation is the history, and a finished response's input
and output items are appended to it, programs included; a paused program resumes through it. Then
the Agents SDK 0.24 Runner with `OpenAIConversationsSession()` and with `conversation_id=`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.version import __version__ as agents_version

from ptc_emulator.emulator.responses.usage import count
from ptc_emulator.testing.server import PTCEmulator
from tests.conversations.conversations_support import async_conversations_client
from tests.support import PTC_TOOLS, ClientVersion, answer_all, arithmetic, js

pytestmark = pytest.mark.sdk  # conversations through the official client and the Agents SDK's sessions

ADD = "const x = await tools.add({a: 2, b: 3}); text(String(x));"


def kinds(client: openai.OpenAI, conversation: str) -> list[str]:
    return [item.type for item in client.conversations.items.list(conversation, order="asc", limit=100)]


@pytest.mark.parametrize("conversation", ["id", "object"])
def test_a_refused_item_of_the_conversation_is_named_by_the_conversation(
    conversations_sdk: openai.OpenAI, conversation: str
) -> None:
    """A request that continues a conversation sent no `previous_response_id`: an item of the
    conversation it is refused for is named by `conversation`, the parameter that brought it."""
    paused = conversations_sdk.responses.create(model="m", input=js(ADD), tools=PTC_TOOLS, store=False)
    program, call = paused.output
    forged = {**program.model_dump(exclude_none=True), "code": "text('forged')"}
    conv = conversations_sdk.conversations.create(
        items=[{"role": "user", "content": js(ADD)}, forged, call.model_dump(exclude_none=True)]  # type: ignore[list-item]
    )
    given = conv.id if conversation == "id" else {"id": conv.id}
    with pytest.raises(openai.BadRequestError) as caught:
        conversations_sdk.responses.create(
            model="m", conversation=given, input=answer_all(paused, arithmetic), tools=PTC_TOOLS
        )
    assert caught.value.code == "invalid_fingerprint"
    assert caught.value.body["param"] == "conversation.code"  # type: ignore[index]


def test_a_program_pauses_and_resumes_through_the_conversation(
    conversations_sdk: openai.OpenAI, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    conv = conversations_sdk.conversations.create(items=[{"role": "developer", "content": "Use programs."}])

    paused = conversations_sdk.responses.create(model="m", conversation=conv.id, input=js(ADD), tools=PTC_TOOLS)
    assert [i.type for i in paused.output] == ["program", "function_call"]
    assert paused.conversation is not None and paused.conversation.id == conv.id
    assert paused.previous_response_id is None
    assert kinds(conversations_sdk, conv.id) == ["message", "message", "program", "function_call"]

    # Only the tool output is sent: the conversation holds the program, as previous_response_id would.
    done = conversations_sdk.responses.create(
        model="m", conversation={"id": conv.id}, input=answer_all(paused, arithmetic), tools=PTC_TOOLS
    )
    assert [i.type for i in done.output] == ["program_output", "message"]
    assert done.output_text == "5"
    items = list(conversations_sdk.conversations.items.list(conv.id, order="asc", limit=100))
    assert [i.type for i in items] == [
        "message",
        "message",
        "program",
        "function_call",
        "function_call_output",
        "program_output",
        "message",
    ]
    call, output = items[3], items[4]
    assert call.caller is not None and call.caller.caller_id == paused.output[0].call_id  # type: ignore[union-attr]
    assert output.caller is not None and output.caller.caller_id == paused.output[0].call_id  # type: ignore[union-attr]
    assert {i.id for i in items} >= {i.id for i in [*paused.output, *done.output]}  # the ids as returned

    # The next user turn sees the whole conversation and appends to it.
    again = conversations_sdk.responses.create(
        model="m", conversation=conv.id, input=js("text('again');"), tools=PTC_TOOLS
    )
    assert again.output_text == "again"
    assert len(kinds(conversations_sdk, conv.id)) == 7 + 1 + 3


def test_a_refused_request_appends_nothing(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create()
    paused = conversations_sdk.responses.create(model="m", conversation=conv.id, input=js(ADD), tools=PTC_TOOLS)
    before = kinds(conversations_sdk, conv.id)
    with pytest.raises(openai.BadRequestError) as caught:
        conversations_sdk.responses.create(
            model="m", conversation=conv.id, input="hello", tools=PTC_TOOLS
        )  # no tool output
    assert "No tool output found" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        conversations_sdk.responses.create(
            model="m", conversation=conv.id, previous_response_id=paused.id, input=answer_all(paused, arithmetic)
        )
    assert caught.value.body["param"] == "conversation"  # type: ignore[index]
    assert kinds(conversations_sdk, conv.id) == before


def test_an_unknown_or_deleted_conversation_is_not_found(conversations_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        conversations_sdk.responses.create(model="m", conversation="conv_missing", input=js(ADD), tools=PTC_TOOLS)
    assert caught.value.body["param"] == "conversation"  # type: ignore[index]
    conv = conversations_sdk.conversations.create()
    paused = conversations_sdk.responses.create(model="m", conversation=conv.id, input=js(ADD), tools=PTC_TOOLS)
    conversations_sdk.conversations.delete(conv.id)
    with pytest.raises(openai.NotFoundError):
        conversations_sdk.responses.create(
            model="m", conversation=conv.id, input=answer_all(paused, arithmetic), tools=PTC_TOOLS
        )


def test_a_streamed_response_is_appended_when_it_finishes(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create()
    with conversations_sdk.responses.stream(model="m", conversation=conv.id, input=js(ADD), tools=PTC_TOOLS) as stream:
        paused = stream.get_final_response()
    with conversations_sdk.responses.stream(
        model="m", conversation=conv.id, input=answer_all(paused, arithmetic), tools=PTC_TOOLS
    ) as stream:
        done = stream.get_final_response()
    assert done.output_text == "5"
    assert kinds(conversations_sdk, conv.id)[-2:] == ["program_output", "message"]


def test_input_tokens_count_reads_the_conversation(conversations_sdk: openai.OpenAI) -> None:
    conv = conversations_sdk.conversations.create()
    paused = conversations_sdk.responses.create(model="m", conversation=conv.id, input=js(ADD), tools=PTC_TOOLS)
    outputs = answer_all(paused, arithmetic)
    counted = conversations_sdk.responses.input_tokens.count(
        model="m", conversation=conv.id, input=outputs, tools=PTC_TOOLS
    )  # type: ignore[arg-type]
    done = conversations_sdk.responses.create(model="m", conversation=conv.id, input=outputs, tools=PTC_TOOLS)
    assert done.usage is not None
    program_output = done.output[0]
    assert program_output.type == "program_output"
    # The response also read its own program_output before writing the message.
    assert done.usage.input_tokens == counted.input_tokens + count(program_output.result)


# ---- the Agents SDK ---------------------------------------------------------------------------------

QUESTION = "Compare inventory with demand for {sku}."
EXPECTED = "{sku}: 42 units available against 31 requested, so the shortage is 0 units."
calls: list[str] = []


@function_tool(allowed_callers=["programmatic"])
def get_inventory(sku: str) -> str:
    """Return an object with sku (string) and available_units (number)."""
    calls.append(f"get_inventory:{sku}")
    return json.dumps({"sku": sku, "available_units": 42})


@function_tool(allowed_callers=["programmatic"])
def get_demand(sku: str) -> str:
    """Return an object with sku (string) and requested_units (number)."""
    calls.append(f"get_demand:{sku}")
    return json.dumps({"sku": sku, "requested_units": 31})


@pytest.fixture
def agents_client(ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[openai.AsyncOpenAI]:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)  # nothing may leave this machine
    calls.clear()
    yield async_conversations_client(ptc_emulator)


def inventory_agent(client: openai.AsyncOpenAI) -> Agent:
    return Agent(
        name="inventory",
        instructions="Use a program to compare inventory with demand.",
        model=OpenAIResponsesModel(model="gpt-6-astra", openai_client=client),
        tools=[ProgrammaticToolCallingTool(), get_inventory, get_demand],
    )


async def conversation_kinds(client: openai.AsyncOpenAI, conversation: str) -> list[str]:
    return [item.type async for item in client.conversations.items.list(conversation, order="asc")]


ONE_RUN = [
    "message",
    "program",
    "function_call",
    "function_call",
    "function_call_output",
    "function_call_output",
    "program_output",
    "message",
]


@pytest.mark.anyio
async def test_agents_runner_with_an_openai_conversations_session(
    ptc_emulator: PTCEmulator, agents_client: openai.AsyncOpenAI, client_version: ClientVersion
) -> None:
    client_version("openai-agents", agents_version)
    agent = inventory_agent(agents_client)
    session = OpenAIConversationsSession(openai_client=agents_client)
    config = RunConfig(tracing_disabled=True)
    for sku in ("sku_123", "sku_456"):
        result = await Runner.run(agent, QUESTION.format(sku=sku), session=session, run_config=config)
        assert result.final_output == EXPECTED.format(sku=sku)
    assert sorted(calls) == sorted(f"{t}:{s}" for t in ("get_inventory", "get_demand") for s in ("sku_123", "sku_456"))
    assert session.session_id.startswith("conv_")
    assert await conversation_kinds(agents_client, session.session_id) == ONE_RUN * 2
    responses = [e for e in ptc_emulator.journal if e["path"] == "/v1/responses"]
    assert [e["status"] for e in responses] == [200] * 4
    # The session replays its items: the second run's first request carries the first run whole.
    assert len(responses[2]["request"]["input"]) == len(ONE_RUN) + 1


@pytest.mark.anyio
async def test_agents_runner_with_a_conversation_id(
    ptc_emulator: PTCEmulator, agents_client: openai.AsyncOpenAI, client_version: ClientVersion
) -> None:
    client_version("openai-agents", agents_version)
    agent = inventory_agent(agents_client)
    conv = await agents_client.conversations.create()
    config = RunConfig(tracing_disabled=True)
    for sku in ("sku_123", "sku_456"):
        result = await Runner.run(agent, QUESTION.format(sku=sku), conversation_id=conv.id, run_config=config)
        assert result.final_output == EXPECTED.format(sku=sku)
    assert len(calls) == 4
    assert await conversation_kinds(agents_client, conv.id) == ONE_RUN * 2
    responses = [e for e in ptc_emulator.journal if e["path"] == "/v1/responses"]
    assert [e["status"] for e in responses] == [200] * 4
    assert all(e["request"]["conversation"] == conv.id for e in responses)
    # The Runner sends only what is new; the conversation holds the rest.
    assert [[i.get("type", "message") for i in e["request"]["input"]] for e in responses] == [
        ["message"],
        ["function_call_output", "function_call_output"],
    ] * 2
    assert {e["conversation"] for e in responses} == {conv.id}
