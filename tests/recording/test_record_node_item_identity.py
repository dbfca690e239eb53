"""A stream whose output items the Node SDK's stream accumulator (openai 7.60) refuses by their
identity is not recorded (docs/record-replay.md, "Limits"): an item with no `id` (but a
`function_call` or `custom_tool_call`), with `id: ""` (but a `computer_call`), or two items sharing
an id, even of different types. The Python SDK takes these streams; before, they were recorded,
and a JS test that raised live ("expected a non-empty output item id", "duplicate output item
identity") passed on replay. The upstream is a small server on loopback speaking SSE itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_both_sdks import _logged
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_item_lifecycle import EMPTY
from tests.recording.test_record_second_end import QUESTION, _sse, response


def _reasoned(reasoning: dict[str, Any]) -> list[dict[str, Any]]:
    """[reasoning, message 'right'], streamed as the hosted API streams it."""
    end = response("completed")
    end["output"] = [reasoning, *end["output"]]
    said = [
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.added", "output_index": 1, "item": EMPTY},
        {"type": "response.content_part.added", "output_index": 1, "content_index": 0, "item_id": "msg_1",
         "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "item_id": "msg_1",
         "delta": "right"},
        {"type": "response.output_item.done", "output_index": 1, "item": end["output"][1]},
        {"type": "response.completed", "response": end},
    ]  # fmt: skip
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


REASONING = {"type": "reasoning", "summary": []}
REFUSED = {  # the recorder's reason (the Node SDK's error)
    "reasoning-without-id": (
        REASONING,
        "its output item added at output index 0 has no id",  # expected a non-empty output item id
    ),
    "reasoning-with-empty-id": (
        {**REASONING, "id": ""},
        "its output item added at output index 0 has an id that is not a non-empty string ('')",
    ),
    "reasoning-with-null-id": (
        {**REASONING, "id": None},
        "its output item added at output index 0 has an id that is not a non-empty string ('None')",
    ),
    "reasoning-with-the-message-id": (
        {**REASONING, "id": "msg_1"},
        "two output items share the identity 'id:msg_1'",  # duplicate output item identity 'id:msg_1'
    ),
}


@pytest.mark.parametrize(("reasoning", "why"), list(REFUSED.values()), ids=list(REFUSED))
def test_a_stream_whose_item_identity_the_node_sdk_refuses_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reasoning: dict[str, Any], why: str
) -> None:
    directory = tmp_path / "recordings"
    said = _reasoned(reasoning)
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert not list(directory.glob("*.yaml"))
    assert any(f"its stream breaks the output items' order: {why}" in m for m in _logged(caplog)), _logged(caplog)


def test_a_response_listing_two_items_of_one_id_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lifecycle event's response is checked as the Node SDK checks it (each on its own)."""
    said = json.loads(json.dumps(_reasoned({**REASONING, "id": "rs_1"})))
    said[-1]["response"]["output"][0]["id"] = "msg_1"
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    assert any("its response lists two output items of the identity 'id:msg_1'" in m for m in _logged(caplog))


def test_a_stream_whose_items_have_their_own_ids_is_recorded(tmp_path: Path) -> None:
    """The control: the same stream, its reasoning with an id of its own."""
    directory = tmp_path / "recordings"
    with raw_upstream(_sse(_reasoned({**REASONING, "id": "rs_1"}))) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1
