"""A stream whose output items break the order the SDKs' stream accumulator holds them to is not
recorded (docs/record-replay.md, "Limits"): the client live had an error, and a recording would
replay a completed answer. Each case is shown refused by the official SDK's stream too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_second_end import QUESTION, _sse, response

DELTA = {
    "type": "response.output_text.delta",
    "output_index": 0,
    "content_index": 0,
    "item_id": "msg_1",
    "delta": "right",
}
EMPTY = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
PART = {"type": "response.content_part.added", "output_index": 0, "content_index": 0, "item_id": "msg_1",
        "part": {"type": "output_text", "text": "", "annotations": []}}  # fmt: skip


def stream(*middle: dict[str, Any], end: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    said = [
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": EMPTY},
        PART,
        DELTA,
        *middle,
        {"type": "response.completed", "response": end or response("completed")},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


def renamed(item_id: str) -> dict[str, Any]:
    end = response("completed")
    end["output"] = [{**end["output"][0], "id": item_id}]
    return end


DONE = {**response("completed")["output"][0]}
BROKEN = {
    "item-changed": (
        stream(end=renamed("msg_9")),
        "Cannot complete response with unfinished output items",
        "the completed response lacks an output item the stream added and did not finish",
    ),
    "duplicate-added": (
        stream({"type": "response.output_item.added", "output_index": 0, "item": EMPTY}),
        "Duplicate response output index 0",
        "a second output item was added at output index 0",
    ),
    "done-changed": (
        stream({"type": "response.output_item.done", "output_index": 0, "item": {**DONE, "id": "msg_9"}}),
        "Completed output item identity changed",
        "the output item done at output index 0 is not the one added there",
    ),
}


@pytest.mark.parametrize(("said", "sdk", "why"), list(BROKEN.values()), ids=list(BROKEN))
def test_a_stream_the_sdk_refuses_for_its_items_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, said: list[dict[str, Any]], sdk: str, why: str
) -> None:
    """Before, only a changed response id was caught: these streams were recorded and replayed as
    `completed 'right'`, where the SDK's stream raised."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with pytest.raises(RuntimeError, match=sdk), client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    said_logs = [r.getMessage() for r in caplog.records]
    assert any(f"its stream breaks the output items' order: {why}" in m for m in said_logs), said_logs


def test_a_stream_whose_items_keep_their_order_is_recorded(tmp_path: Path) -> None:
    """The control: added, its part and delta, done with the same id, completed with it."""
    directory = tmp_path / "recordings"
    said = stream({"type": "response.output_item.done", "output_index": 0, "item": DONE})
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1


def without_part(part_type: str | None) -> list[dict[str, Any]]:
    """The stream with its content part left out (None) or of another type."""
    said = stream()
    if part_type is None:
        return [e for e in said if e["type"] != "response.content_part.added"]
    return [
        {**e, "part": {"type": part_type, part_type: ""}} if e["type"] == "response.content_part.added" else e
        for e in said
    ]


@pytest.mark.parametrize(
    ("said", "sdk", "why"),
    [
        (without_part(None), IndexError, "an output_text delta at output index 0 names a content part not added"),
        (without_part("refusal"), AssertionError, "an output_text delta at output index 0 goes into a 'refusal' part"),
    ],
    ids=["no-content-part", "text-into-refusal"],
)
def test_a_delta_the_sdk_cannot_place_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, said: list[dict[str, Any]], sdk: type, why: str
) -> None:
    """Before, a delta with no `content_part.added` before it (the SDK's accumulator raises
    IndexError) and an `output_text` delta into a refusal part (it asserts) were recorded and
    replayed as `completed 'right'`."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with pytest.raises(sdk), client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    said_logs = [r.getMessage() for r in caplog.records]
    assert any(f"its stream breaks the output items' order: {why}" in m for m in said_logs), said_logs


def test_a_response_listing_more_items_than_are_followed_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, each lifecycle event's whole output list was walked on the event loop (900,000 tiny
    items held it 2.5 s); past 2,048 items the stream is passed on whole and not recorded."""
    end = response("completed")
    end["output"] = [*end["output"], *({"type": "reasoning", "id": f"rs_{i}", "summary": []} for i in range(2_100))]
    said = stream({"type": "response.output_item.done", "output_index": 0, "item": DONE}, end=end)
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert len(events.get_final_response().output) == 2_101
    assert not list(directory.glob("*.yaml"))
    said_logs = [r.getMessage() for r in caplog.records]
    assert any("its response lists more than 2,048 output items (not looked through)" in m for m in said_logs)


def _socket_said(twice: bool) -> list[dict[str, Any]]:
    done = [{"type": "response.output_item.done", "output_index": 0, "item": DONE}]
    if twice:  # the same item done again at another index
        done.append({"type": "response.output_item.done", "output_index": 1, "item": DONE})
    said = [
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        DELTA,
        *done,
        {"type": "response.completed", "response": response("completed")},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


@pytest.mark.parametrize("twice", [True, False], ids=["done-at-two-indexes", "control"])
def test_a_socket_answer_the_sdk_session_refuses_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, twice: bool
) -> None:
    """Before, a socket's events were not checked at all: an item done at two output indexes, which
    the SDK's socket session refuses live ("conflicting output identities"), was recorded and
    replayed as `completed 'right'`."""
    import asyncio
    import json

    import openai
    from openai.lib.responses_websocket import AsyncResponsesWebSocketSession, ResponsesWebSocketLimits

    from tests.recording.test_record_hostile_upstream import ws_upstream

    LIMITS = ResponsesWebSocketLimits  # noqa: N806
    said = _socket_said(twice)

    async def answer(socket: Any) -> None:
        async for _ in socket:
            for event in said:
                await socket.send(json.dumps(event))

    async def ask(base: str) -> str:
        sdk = openai.AsyncOpenAI(base_url=base, api_key="sk-local")
        async with (
            sdk.responses.connect() as conn,
            AsyncResponsesWebSocketSession(
                conn,
                limits=LIMITS(
                    max_lanes=8,
                    max_events_per_lane=128,
                    max_events=512,
                    max_bytes_per_lane=2**24,
                    max_bytes=2**25,
                    max_response_bytes=None,
                ),
            ) as session,
        ):
            await session.default.send({"type": "response.create", **QUESTION})
            final = await asyncio.wait_for(session.default.get_final_response(), 60)
            return final.output_text

    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), ws_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        if twice:
            with pytest.raises(RuntimeError, match="conflicting output identities"):
                asyncio.run(ask(rec.server_url))
        else:
            assert asyncio.run(ask(rec.server_url)) == "right"
    assert len(list(directory.glob("*.yaml"))) == (0 if twice else 1)
    if twice:
        said_logs = [r.getMessage() for r in caplog.records]
        assert any("an output item was done at two output indexes" in m for m in said_logs), said_logs
