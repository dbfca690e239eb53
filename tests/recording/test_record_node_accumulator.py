"""A stream the Node SDK's stream accumulator (openai 7.60) raises on by where it places a part, an
annotation, a summary part or a reasoning text, or by the items a lifecycle event lists, is not
recorded (docs/record-replay.md, "Limits"); nor is one with an event that both SDKs read as empty
JSON (`data:` with nothing), nor what comes after `data: [DONE]` (neither SDK reads on). The Python
SDK takes the first kind; before, each was recorded, and a JS test that raised live (`missing
content at index 3`, `duplicate output item identity`) passed on replay. The upstream is a small
server on loopback speaking SSE itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_both_sdks import _blocks, _framed, _logged
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_item_lifecycle import DONE, EMPTY
from tests.recording.test_record_second_end import QUESTION, _sse, response

REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
TEXT_PART = {"type": "output_text", "text": "", "annotations": []}
CITATION = {"type": "url_citation", "url": "https://x.test", "title": "x", "start_index": 0, "end_index": 1}


def _said(*events: dict[str, Any], end: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """[reasoning rs_1 at 0, message msg_1 at 1 saying 'right'], `events` after the message's
    first delta, streamed as the hosted API streams it."""
    final = end or {**response("completed"), "output": [REASONING, DONE]}
    said = [
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.added", "output_index": 1, "item": EMPTY},
        {"type": "response.content_part.added", "output_index": 1, "content_index": 0, "item_id": "msg_1",
         "part": TEXT_PART},
        {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "item_id": "msg_1",
         "delta": "right"},
        *events,
        {"type": "response.output_item.done", "output_index": 1, "item": DONE},
        {"type": "response.completed", "response": final},
    ]  # fmt: skip
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


def _at(said: list[dict[str, Any]], index: int, *events: dict[str, Any]) -> list[dict[str, Any]]:
    """`said` with `events` put in before its event at `index`."""
    out = [*said[:index], *events, *said[index:]]
    return [{**event, "sequence_number": n} for n, event in enumerate(out)]


def _gap_part() -> list[dict[str, Any]]:
    """The message's first part added at content index 3 (its deltas at 0, where the Python SDK,
    which appends a part wherever it is said to go, has it)."""
    said = _said()
    said[4] = {**said[4], "content_index": 3}
    return said


def _reasoning_with(*events: dict[str, Any]) -> list[dict[str, Any]]:
    """`events` into the reasoning item, between its added and its done."""
    return _at(_said(), 2, *events)


def _relisted() -> list[dict[str, Any]]:
    """A mid-stream `response.in_progress` lists a reasoning item of the id the message then takes;
    the completed response lists only the message."""
    listed = {**response("in_progress"), "output": [{**REASONING, "id": "msg_1"}]}
    said = [e for e in _said() if e.get("item", {}).get("type") != "reasoning"]
    said.insert(1, {"type": "response.in_progress", "response": listed})
    said[-1] = {**said[-1], "response": {**response("completed"), "output": [DONE]}}
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


NODE = {  # the Node SDK's error live (openai 7.60), the recorder's reason
    "content-part-at-a-gap": (
        _gap_part(),
        "missing content at index 3",
        "a response.content_part.added event at output index 1 adds content part 3 where the next is 0",
    ),
    "summary-part-at-a-gap": (
        _reasoning_with(
            {
                "type": "response.reasoning_summary_part.added",
                "output_index": 0,
                "item_id": "rs_1",
                "summary_index": 2,
                "part": {"type": "summary_text", "text": ""},
            },
        ),  # fmt: skip
        "missing content at index 2",
        "a response.reasoning_summary_part.added event at output index 0 adds summary part 2 where the next is 0",
    ),
    "annotation-at-a-gap": (
        _said(
            {
                "type": "response.output_text.annotation.added",
                "output_index": 1,
                "item_id": "msg_1",
                "content_index": 0,
                "annotation_index": 5,
                "annotation": CITATION,
            },
        ),  # fmt: skip
        "missing annotation at index 5",
        "a response.output_text.annotation.added event at output index 1 sets annotation 5 where the next is 0",
    ),
    "reasoning-text-without-content": (
        _reasoning_with(
            {
                "type": "response.reasoning_text.delta",
                "output_index": 0,
                "item_id": "rs_1",
                "content_index": 0,
                "delta": "x",
            },
        ),  # fmt: skip
        "missing content at index 0",
        "a response.reasoning_text.delta event at output index 0 goes into an item without content",
    ),
    "content-part-done-at-no-part": (
        _said(
            {
                "type": "response.content_part.done",
                "output_index": 1,
                "item_id": "msg_1",
                "content_index": 4,
                "part": {**TEXT_PART, "text": "right"},
            },
        ),  # fmt: skip
        "missing content at index 4",
        "a response.content_part.done event at output index 1 names content part 4, not one there",
    ),
    "lifecycle-lists-an-id-then-added": (
        _relisted(),
        "duplicate output item identity 'id:msg_1'",
        "two output items share the identity 'id:msg_1'",
    ),
    "annotation-into-a-part-without-annotations": (
        _at(
            _said(
                {
                    "type": "response.output_text.annotation.added",
                    "output_index": 1,
                    "item_id": "msg_1",
                    "content_index": 0,
                    "annotation_index": 0,
                    "annotation": CITATION,
                },
            ),
            4,
        ),
        "missing annotation at index 0",
        "a response.output_text.annotation.added event at output index 1 sets annotation 0 where the part has none",
    ),  # fmt: skip
    "refusal-delta-into-a-text-part": (
        _said(
            {
                "type": "response.refusal.delta",
                "output_index": 1,
                "item_id": "msg_1",
                "content_index": 0,
                "delta": "no",
            },
        ),  # fmt: skip
        "expected content to be 'refusal', got output_text",
        "a response.refusal.delta event at output index 1 goes into a 'output_text' part, not a 'refusal' one",
    ),
}
NODE["annotation-into-a-part-without-annotations"][0][4]["part"] = {"type": "output_text", "text": ""}


@pytest.mark.parametrize(("said", "node", "why"), list(NODE.values()), ids=list(NODE))
def test_a_stream_the_node_accumulator_refuses_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, said: list[dict[str, Any]], node: str, why: str
) -> None:
    """The Python SDK takes each stream; the Node SDK raises `node` on it (checked against openai
    7.60 live, through an upstream sending these bytes)."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert not list(directory.glob("*.yaml"))
    assert any(f"its stream breaks the output items' order: {why}" in m for m in _logged(caplog)), _logged(caplog)


CONTROLS = {
    "plain": _said(),
    "parts-summaries-annotations-in-order": _at(
        _said(
            {"type": "response.output_text.annotation.added", "output_index": 1, "item_id": "msg_1",
             "content_index": 0, "annotation_index": 0, "annotation": CITATION},
            {"type": "response.output_text.done", "output_index": 1, "item_id": "msg_1", "content_index": 0,
             "text": "right"},
            {"type": "response.content_part.done", "output_index": 1, "item_id": "msg_1", "content_index": 0,
             "part": {**TEXT_PART, "text": "right"}},
        ),
        2,
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "item_id": "rs_1",
         "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1",
         "summary_index": 0, "delta": "thought"},
        {"type": "response.content_part.added", "output_index": 0, "item_id": "rs_1", "content_index": 0,
         "part": {"type": "reasoning_text", "text": ""}},
        {"type": "response.reasoning_text.delta", "output_index": 0, "item_id": "rs_1", "content_index": 0,
         "delta": "x"},
    ),
    "lifecycle-listing-the-streamed-items": _at(
        _said(), 6, {"type": "response.in_progress", "response": {**response("in_progress"), "output": [REASONING]}}
    ),
    "lifecycle-listing-nothing": _at(
        _said(), 6, {"type": "response.in_progress", "response": {**response("in_progress"), "output": []}}
    ),
}  # fmt: skip


@pytest.mark.parametrize("said", list(CONTROLS.values()), ids=list(CONTROLS))
def test_a_stream_the_node_accumulator_takes_is_recorded(tmp_path: Path, said: list[dict[str, Any]]) -> None:
    """The controls: streams the Node SDK (openai 7.60) takes live."""
    directory = tmp_path / "recordings"
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1


# ---- the stream's reader -------------------------------------------------------------------------

EMPTY_DATA = {
    "data-with-nothing": b"event: response.output_text.delta\ndata:\n\n",
    "event-name-alone": b"event: response.output_text.delta\n\n",
}


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("empty", list(EMPTY_DATA.values()), ids=list(EMPTY_DATA))
def test_an_event_with_empty_data_keeps_the_answer_from_being_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, empty: bytes, keyed: bool
) -> None:
    """Both SDKs give the client such an event, and parse its empty data as JSON (the Python SDK's
    `json.loads("")` raises). Before, the proxy skipped it and recorded the answer."""
    blocks = _blocks(_said())
    body = b"".join([*blocks[:-1], empty, blocks[-1]])
    directory = tmp_path / "recordings"
    overrides: dict[str, Any] = {}
    if keyed:
        monkeypatch.setenv("UPKEY_E", "sk-UPSTREAMSECRET1234567890")
        overrides.update(upstream_api_key_env="UPKEY_E", allow_unguarded_upstream_key=True)
    with (
        caplog.at_level("INFO"),
        raw_upstream(_framed(body)) as url,
        recorder(tmp_path, url, directory, **overrides) as rec,
    ):
        with pytest.raises(json.JSONDecodeError), client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    assert any("its stream has an event whose data is empty" in m for m in _logged(caplog)), _logged(caplog)


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_what_comes_after_done_is_no_part_of_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    """The SDKs stop reading at `data: [DONE]`: a terminal event after it reached no client. Before,
    it was recorded (here: a `response.failed` after the completed one withdrew the recording;
    a stream whose only end came after it was recorded, as if the client had it)."""
    blocks = _blocks(_said())
    late = _blocks([{**_said()[-1], "type": "response.failed", "response": response("failed")}])
    directory = tmp_path / "recordings"
    overrides: dict[str, Any] = {}
    if keyed:
        monkeypatch.setenv("UPKEY_D", "sk-UPSTREAMSECRET1234567890")
        overrides.update(upstream_api_key_env="UPKEY_D", allow_unguarded_upstream_key=True)
    body = b"".join([*blocks, b"data: [DONE]\n\n", *late])
    with raw_upstream(_framed(body)) as url, recorder(tmp_path, url, directory, **overrides) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1
    # and a stream whose only end comes after the sentinel is not recorded
    body = b"".join([*blocks[:-1], b"data: [DONE]\n\n", blocks[-1]])
    other = tmp_path / "other"
    with raw_upstream(_framed(body)) as url, recorder(tmp_path, url, other, **overrides) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert [e.type for e in events][-1] == "response.output_item.done"
    assert not list(other.glob("*.yaml"))


# ---- the Responses WebSocket mode ----------------------------------------------------------------


def test_a_socket_answer_the_node_lane_refuses_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Node SDK's WebSocket lane (`finalResponse`, openai 7.60) raises on an `output_item.done`
    whose message has no `content` list ("Invalid Responses WebSocket completed output item"); its
    socket accumulator raises on nothing. Before, the answer was recorded."""
    from websockets.sync.client import connect

    from tests.recording.test_record_hostile_upstream import ws_upstream

    said = _said()
    said[-2] = {**said[-2], "item": {**DONE, "content": None}}

    async def answer(socket: Any) -> None:
        async for _ in socket:
            for event in said:
                await socket.send(json.dumps(event))

    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), ws_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **QUESTION}))
            got = [json.loads(socket.recv(timeout=60)) for _ in range(len(said))]
        assert got[-1]["type"] == "response.completed"
    assert not list(directory.glob("*.yaml"))
    assert any("its output item done is not an object the lane takes" in m for m in _logged(caplog)), _logged(caplog)
