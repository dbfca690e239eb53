"""A stream the SDKs' stream accumulator refuses at its start is not recorded (docs/record-replay.md,
"Limits"): one whose first event is not `response.created`, and one that sends an item's content
event (a delta, a content part, a text's `.done`) before that item's `response.output_item.added`.
The client live had an error; a recording would replay a completed answer. Each case is shown
refused by the official SDK's stream too, and the log says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_item_lifecycle import DELTA, DONE, EMPTY, PART, stream
from tests.recording.test_record_second_end import QUESTION, _sse, response

CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "add",
    "arguments": "",
    "status": "in_progress",
}
ARGS = {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": "{}"}
ITEM_DONE = {"type": "response.output_item.done", "output_index": 0, "item": DONE}


def numbered(*said: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


def first_is(kind: str) -> list[dict[str, Any]]:
    """The well-ordered stream with a lifecycle event of `kind` before its `response.created`."""
    return [{"type": kind, "response": {**response("in_progress"), "output": []}}, *stream(ITEM_DONE)]


def before_added(*early: dict[str, Any]) -> list[dict[str, Any]]:
    """The well-ordered stream with `early` between its `response.created` and the item's `added`."""
    said = stream(ITEM_DONE)
    return numbered(said[0], *early, *said[1:])


BROKEN = {
    "in-progress-first": (
        first_is("response.in_progress"),
        "Expected to have received `response.created` before `response.in_progress`",
        "its first event is 'response.in_progress', not response.created",
    ),
    "no-created": (
        numbered(*stream(ITEM_DONE)[1:]),
        "Expected to have received `response.created` before `response.output_item.added`",
        "its first event is 'response.output_item.added', not response.created",
    ),
    "text-delta-before-added": (
        before_added(DELTA),
        "before receiving its output item",
        "a response.output_text.delta event at output index 0 comes before its output item was added",
    ),
    "part-before-added": (
        before_added(PART),
        "before receiving its output item",
        "a response.content_part.added event at output index 0 comes before its output item was added",
    ),
    "arguments-delta-before-added": (
        numbered(*stream(ITEM_DONE)[:-1], ARGS, stream()[-1]),
        "before receiving its output item",
        "a response.function_call_arguments.delta event at output index 1 comes before its output item was added",
    ),
}


@pytest.mark.parametrize(("said", "sdk", "why"), list(BROKEN.values()), ids=list(BROKEN))
def test_a_stream_the_sdk_refuses_at_its_start_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, said: list[dict[str, Any]], sdk: str, why: str
) -> None:
    """Before, these streams were recorded and replayed as `completed 'right'`, where the SDK's
    stream raised."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with pytest.raises(RuntimeError, match=sdk), client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    said_logs = [r.getMessage() for r in caplog.records]
    assert any(f"its stream breaks the output items' order: {why}" in m for m in said_logs), said_logs


def test_an_item_listed_by_response_created_takes_deltas_without_added(tmp_path: Path) -> None:
    """The control: the accumulator takes the items `response.created` lists as added at their
    places, so a delta for one needs no `output_item.added`; the SDK accepts it, and so does the
    recorder."""
    created = {"type": "response.created", "response": {**response("in_progress"), "output": [EMPTY]}}
    said = numbered(created, PART, DELTA, ITEM_DONE, {"type": "response.completed", "response": response("completed")})
    directory = tmp_path / "recordings"
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1


def test_a_call_whose_arguments_stream_after_added_is_recorded(tmp_path: Path) -> None:
    """The control for the arguments' delta: after its item's `added`, the SDK accepts it."""
    end = response("completed")
    end["output"] = [{**CALL, "arguments": "{}", "status": "completed"}]
    said = numbered(
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": CALL},
        {**ARGS, "output_index": 0},
        {"type": "response.output_item.done", "output_index": 0, "item": end["output"][0]},
        {"type": "response.completed", "response": end},
    )
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with client(rec).responses.stream(**QUESTION, tools=[{"type": "function", "name": "add"}]) as events:
            assert events.get_final_response().output[0].arguments == "{}"  # type: ignore[union-attr]
