"""The model upstream's text streamed as it arrives: the fake upstream holds each text piece back
until the test has seen the delta of the one before (`Gate`), so a client that sees a delta only
once the upstream's turn has finished fails here. What the client accumulates from the events is
the final response, and (`store: true`) the stored one; SSE and WebSocket mode alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import INVENTORY_CODE, INVENTORY_TOOLS, FakeUpstream, Gate, streamed

PIECES = ("Every", " SKU", " is", " well", " stocked.")


@pytest.fixture(params=["chat", "responses"])
def live_sdk(any_server: Callable[..., EmulatorServer], request: pytest.FixtureRequest) -> Iterator[openai.OpenAI]:
    """The official SDK on an emulator whose (streaming) model upstream speaks each protocol."""
    emulator = PTCEmulator(any_server(model_upstream_api=request.param).base_url)
    with emulator.client(max_retries=0) as client:
        yield client
    emulator.close()


def _watch(events: Iterator[Any], gate: Gate) -> tuple[list[Any], list[tuple[str, int]]]:
    """Every event, and each text delta with the text pieces the upstream had sent when it came;
    each delta opens the gate for the next piece."""
    seen: list[Any] = []
    deltas: list[tuple[str, int]] = []
    for event in events:
        seen.append(event)
        if event.type == "response.output_text.delta":
            deltas.append((event.delta, gate.sent))
            gate.release()
    return seen, deltas


def _dump(model: Any) -> dict[str, Any]:
    """An SDK object as JSON data (the SDK's parsed types warn when dumped as their base types)."""
    return dict(model.model_dump(mode="json", exclude_none=True, warnings=False))


def _accumulated(events: list[Any]) -> list[dict[str, Any]]:
    """The output a client builds from the events (as the SDK's accumulator does), checking the
    numbering and that every event names the item it belongs to."""
    dumped = [_dump(e) for e in events]
    numbers = [e["sequence_number"] for e in dumped]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    output: list[dict[str, Any]] = []
    for event in dumped:
        kind = event["type"]
        if kind == "response.output_item.added":
            assert event["output_index"] == len(output)
            output.append(event["item"])
        elif kind == "response.content_part.added":
            output[event["output_index"]]["content"].append(event["part"])
        elif kind == "response.output_text.delta":
            item = output[event["output_index"]]
            assert event["item_id"] == item["id"]
            item["content"][event["content_index"]]["text"] += event["delta"]
        elif kind == "response.output_text.done":
            part = output[event["output_index"]]["content"][event["content_index"]]
            assert part["text"] == event["text"]  # the deltas make up the text
        elif kind == "response.output_item.done":
            assert output[event["output_index"]].get("id") == event["item"].get("id")
            output[event["output_index"]] = event["item"]
    return output


@pytest.mark.parametrize("store", [True, False])
def test_each_delta_reaches_the_client_before_the_upstream_sends_the_next(
    live_sdk: openai.OpenAI, upstream: FakeUpstream, store: bool
) -> None:
    sdk = live_sdk
    gate = Gate()
    upstream.reply(streamed(*PIECES, gate=gate))
    with sdk.responses.stream(model="m", input="Anything low?", tools=INVENTORY_TOOLS, store=store) as stream:
        events, deltas = _watch(stream, gate)
        final = stream.get_final_response()
    assert deltas == [(piece, n) for n, piece in enumerate(PIECES, 1)]
    assert final.output_text == "".join(PIECES)
    assert _accumulated(events) == [_dump(item) for item in final.output]
    assert [e.type for e in events][-1] == "response.completed"
    if store:
        assert _dump(sdk.responses.retrieve(final.id)) == _dump(final)


def test_commentary_before_a_program_streams_too(live_sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    sdk = live_sdk
    gate = Gate()
    upstream.reply(streamed("Let me", " check", " the stock.", gate=gate, code=INVENTORY_CODE, reasoning="Count."))
    with sdk.responses.stream(model="m", input="Which SKUs are low?", tools=INVENTORY_TOOLS) as stream:
        events, deltas = _watch(stream, gate)
        final = stream.get_final_response()
    assert deltas == [("Let me", 1), (" check", 2), (" the stock.", 3)]
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "message", "program", "function_call", "function_call", "function_call"]
    message = final.output[1]
    assert message.type == "message" and message.phase == "commentary"
    assert message.content[0].type == "output_text" and message.content[0].text == "Let me check the stock."
    assert _accumulated(events) == [_dump(item) for item in final.output]
    assert _dump(sdk.responses.retrieve(final.id)) == _dump(final)


@pytest.mark.parametrize("how", ["error", "break"])
def test_an_upstream_that_fails_mid_stream_ends_it_with_an_error_event(
    live_sdk: openai.OpenAI, upstream: FakeUpstream, how: str
) -> None:
    sdk = live_sdk
    gate = Gate()
    upstream.reply(streamed("Every", " SKU", gate=gate, then=how))
    with sdk.responses.stream(model="m", input="Anything low?", tools=INVENTORY_TOOLS) as stream:
        events, deltas = _watch(stream, gate)
        with pytest.raises(RuntimeError, match="response.completed"):
            stream.get_final_response()
    assert deltas == [("Every", 1), (" SKU", 2)]
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-1] == "error" and kinds.count("response.output_text.delta") == 2
    error = _dump(events[-1])
    assert error["code"] == "upstream_error" and error["sequence_number"] == len(events) - 1
    assert "mid-stream" in error["message"] or "broke off" in error["message"]
    assert len(upstream.requests) == 1  # what was told is not taken back by a retry


@pytest.mark.parametrize("store", [True, False])
def test_websocket_mode_streams_the_deltas_as_they_come(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, store: bool
) -> None:
    gate = Gate()
    upstream.reply(streamed(*PIECES, gate=gate))
    emulator = PTCEmulator(any_server().base_url)

    def until_done(connection: Any) -> Iterator[Any]:
        for event in connection:
            yield event
            if event.type in ("response.completed", "response.failed", "error"):
                return

    with emulator.client(max_retries=0).responses.connect() as connection:
        connection.response.create(model="m", input="Anything low?", tools=INVENTORY_TOOLS, store=store)
        events, deltas = _watch(until_done(connection), gate)
    assert deltas == [(piece, n) for n, piece in enumerate(PIECES, 1)]
    done = events[-1]
    assert done.type == "response.completed"
    assert _accumulated(events) == [_dump(item) for item in done.response.output]
    if store:
        with emulator.client(max_retries=0) as sdk:
            assert _dump(sdk.responses.retrieve(done.response.id)) == _dump(done.response)
    emulator.close()


def test_a_responses_upstream_that_answers_whole_is_read_whole(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    upstream.streams = False  # it ignores `stream: true`
    upstream.reply(streamed(*PIECES))
    emulator = PTCEmulator(any_server(model_upstream_api="responses").base_url)
    with emulator.client(max_retries=0) as sdk, sdk.responses.stream(model="m", input="Anything low?") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert upstream.requests[0]["stream"] is True
    assert text == final.output_text == "".join(PIECES)
    emulator.close()


def test_a_responses_upstream_whose_completed_event_has_no_output_is_read_from_its_items(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    upstream.completed_output = False
    upstream.reply(streamed("Checking.", code=INVENTORY_CODE))
    emulator = PTCEmulator(any_server(model_upstream_api="responses").base_url)
    with emulator.client(max_retries=0) as sdk:
        first = sdk.responses.create(model="m", input="Which SKUs are low?", tools=INVENTORY_TOOLS)
    assert [item.type for item in first.output] == ["message", "program", *["function_call"] * 3]
    emulator.close()
