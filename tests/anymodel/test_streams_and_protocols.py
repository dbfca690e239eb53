"""Streaming (SSE and WebSocket) of what the model upstream writes, as hosted event types; its
token counts in the journal; the inspector naming the model that wrote each program; and the same
loop against a Responses-protocol upstream and a non-streaming Chat Completions one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    INVENTORY_CODE,
    INVENTORY_TOOLS,
    FakeUpstream,
    answer_inventory,
    echo,
    fail,
    program,
    say,
)

QUESTION = "Which SKUs are low on stock?"
ANSWER = 'Low: {"low":["A-1","C-3"]}'


def _loop(sdk: openai.OpenAI) -> Any:
    first = sdk.responses.create(model="m", input=QUESTION, tools=INVENTORY_TOOLS)
    calls = [c for c in first.output if c.type == "function_call"]
    return sdk.responses.create(
        model="m", previous_response_id=first.id, input=[answer_inventory(c) for c in calls], tools=INVENTORY_TOOLS
    )


def test_sse_streams_the_upstream_text_as_hosted_events(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(program(INVENTORY_CODE), echo("Low: "))
    with sdk.responses.stream(model="m", input=QUESTION, tools=INVENTORY_TOOLS) as stream:
        added = [e.item.type for e in stream if e.type == "response.output_item.added"]
        first = stream.get_final_response()
    assert added == ["program", "function_call", "function_call", "function_call"]
    calls = [c for c in first.output if c.type == "function_call"]
    with sdk.responses.stream(
        model="m", previous_response_id=first.id, input=[answer_inventory(c) for c in calls], tools=INVENTORY_TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == ANSWER == final.output_text
    assert [e.type for e in events][-1] == "response.completed"


def test_an_upstream_failure_mid_stream_is_an_error_event(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(fail(400, "no such model"))
    with sdk.responses.stream(model="m", input=QUESTION, tools=INVENTORY_TOOLS) as stream:
        events = [e.model_dump() for e in stream]
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1]["code"] == "upstream_error" and "answered 400" in events[-1]["message"]


def test_websocket_mode(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    upstream.reply(program(INVENTORY_CODE), echo("Low: "))
    emulator = PTCEmulator(any_server().base_url)

    def read(connection: Any) -> tuple[list[Any], Any]:
        seen = []
        for event in connection:
            seen.append(event)
            if event.type in ("response.completed", "response.failed", "error"):
                return seen, event
        raise AssertionError("the socket closed")

    with emulator.client(max_retries=0).responses.connect() as connection:
        connection.response.create(model="m", input=QUESTION, tools=INVENTORY_TOOLS)
        _, done = read(connection)
        first = done.response
        calls = [c for c in first.output if c.type == "function_call"]
        connection.response.create(
            model="m", previous_response_id=first.id, input=[answer_inventory(c) for c in calls], tools=INVENTORY_TOOLS
        )
        events, done = read(connection)
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == ANSWER
    assert done.response.output[-1].content[0].text == ANSWER
    emulator.close()


def test_the_journal_counts_the_upstream_tokens_and_names_the_model(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    upstream.usage = (120, 30)
    upstream.reply(program(INVENTORY_CODE), echo("Low: "))
    emulator = PTCEmulator(any_server(model_upstream_model="qwen3-coder").base_url)
    with emulator.client(max_retries=0) as sdk:
        assert _loop(sdk).output_text == ANSWER
    journal = emulator.journal
    assert [e["scenario"] for e in journal] == ["upstream:qwen3-coder"] * 2
    assert [(e["figures"]["upstream_input_tokens"], e["figures"]["upstream_output_tokens"]) for e in journal] == [
        (120, 30),
        (120, 30),
    ]
    assert [e["figures"]["model_turns"] for e in journal] == [1, 1]
    assert journal[1]["figures"]["kept_out_bytes"] > 0  # the inventory rows went to the program only
    assert [r["model"] for r in upstream.requests] == ["qwen3-coder"] * 2
    conversations = emulator.admin.get("/inspector/conversations").json()["data"]
    assert conversations[0]["scenarios"] == ["upstream:qwen3-coder"]
    emulator.close()


@pytest.mark.parametrize("api", ["responses", "chat-plain"])
def test_the_loop_with_another_upstream_protocol(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, api: str
) -> None:
    upstream.reply(program(INVENTORY_CODE), echo("Low: "))
    options: dict[str, Any] = {"model_upstream_api": "responses"} if api == "responses" else {}
    server = any_server(**options)
    if api == "chat-plain":  # a server that does not stream: the client asks for no chunks
        import dataclasses

        from ptc_emulator.emulator.model.upstream.client import UpstreamConfig

        server_model = server.app.state.emulator.engine.model.upstream  # the Fallback's model upstream
        server_model.client.config = dataclasses.replace(server_model.client.config, stream=False)
        assert isinstance(server_model.client.config, UpstreamConfig)
    emulator = PTCEmulator(server.base_url)
    with emulator.client(max_retries=0) as sdk:
        assert _loop(sdk).output_text == ANSWER
    told, back = upstream.requests
    if api == "responses":
        assert told["store"] is False and [t["name"] for t in told["tools"]] == [CODE_TOOL]
        assert told["input"] == [{"type": "message", "role": "user", "content": QUESTION}]
        kinds = [i["type"] for i in back["input"]]
        assert kinds == ["message", "function_call", "function_call_output"]
        assert json.loads(back["input"][1]["arguments"]) == {"code": INVENTORY_CODE}
    else:
        assert "stream" not in told
    emulator.close()


def test_a_direct_answer_streams_too(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(say("Nothing to run: all is well."))
    with sdk.responses.stream(model="m", input="Anything low?", tools=INVENTORY_TOOLS) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text == "Nothing to run: all is well."


SCHEMA = {
    "type": "json_schema",
    "name": "low",
    "schema": {"type": "object", "additionalProperties": False},
    "strict": True,
}


def test_the_upstream_is_asked_with_the_configuration_in_effect(
    either_sdk: openai.OpenAI, upstream: FakeUpstream
) -> None:
    """A `configuration_update` item's effort and format, as each protocol spells them; a later
    update replaces its setting, the other holds."""
    upstream.reply(say('{"low": []}'), say('{"low": ["A-1"]}'))
    update = {"type": "configuration_update", "reasoning": {"effort": "high"}, "text": {"format": SCHEMA}}
    first = either_sdk.responses.create(model="m", input=[update, {"role": "user", "content": QUESTION}])
    assert (first.reasoning.effort, first.text.format.type) == ("high", "json_schema")  # type: ignore[union-attr]
    lower = {"type": "configuration_update", "reasoning": {"effort": "low"}}
    second = either_sdk.responses.create(
        model="m", previous_response_id=first.id, input=[lower, {"role": "user", "content": "And now?"}]
    )
    assert second.output_text == '{"low": ["A-1"]}' and second.reasoning.effort == "low"  # type: ignore[union-attr]
    asked = upstream.requests
    if "messages" in asked[0]:  # Chat Completions
        assert [(r["reasoning_effort"], r["response_format"]) for r in asked] == [
            ("high", {"type": "json_schema", "json_schema": {k: v for k, v in SCHEMA.items() if k != "type"}}),
            ("low", {"type": "json_schema", "json_schema": {k: v for k, v in SCHEMA.items() if k != "type"}}),
        ]
        assert all(m["role"] in ("system", "user", "assistant") for r in asked for m in r["messages"])
    else:
        assert [(r["reasoning"], r["text"]) for r in asked] == [
            ({"effort": "high"}, {"format": SCHEMA}),
            ({"effort": "low"}, {"format": SCHEMA}),
        ]
        assert all(i["type"] != "configuration_update" for r in asked for i in r["input"])
