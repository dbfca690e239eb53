"""The keyed recording proxy looks for the key in the text a client joins, not only in each string
alone: the output_text parts of a response's messages joined (the SDKs' `output_text`), the deltas
of one kind joined across parts and items as they come (a client printing each delta), and deltas
named a delta kind only on their `event:` line (an EventSource listener reads the name). Before,
each of these passed the key to the client and the recording; each test fails on the code before.
Each upstream is a small server on loopback; nothing is timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.test_record_key_fail_closed import _response, through_socket
from tests.recording.test_record_key_sdk_view import KEY, _keyed, _post, _recorded, _sse_events

HALF = len(KEY) // 2
SSE = b"200 OK\r\ncontent-type: text/event-stream"
JSON = b"200 OK\r\ncontent-type: application/json"


def _parts(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "output_text", "text": text, "annotations": []} for text in texts]


def _split_parts() -> dict[str, Any]:
    answer = _response("x")
    answer["output"][0]["content"] = _parts("a " + KEY[:HALF], KEY[HALF:])
    return answer


def _split_items() -> dict[str, Any]:
    answer = _response("a " + KEY[:HALF])
    answer["output"].append({**answer["output"][0], "id": "msg_two", "content": _parts(KEY[HALF:])})
    return answer


def _sdk_text(answer: dict[str, Any]) -> str:
    """What the SDKs' `output_text` gives: every message's output_text parts joined with nothing between."""
    return "".join(
        part["text"]
        for item in answer.get("output", [])
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "output_text"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "to-a-streamed-request"])
@pytest.mark.parametrize("answer", [_split_parts, _split_items], ids=["parts", "items"])
def test_a_whole_answer_holding_the_key_across_its_parts_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Any, stream: bool
) -> None:
    """Before: 200, and the SDK's `output_text` was `a <key>`."""
    assert KEY in _sdk_text(answer())
    response = _post(tmp_path, monkeypatch, JSON, json.dumps(answer()).encode(), stream)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_error"
    assert "output_text parts of its messages joined" in response.json()["error"]["message"]
    assert KEY not in response.text and KEY not in _recorded(tmp_path)


def _body(*events: dict[str, Any], names: list[str | None] | None = None) -> bytes:
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    names = [None, *(names or [e.get("type") for e in events])]
    return "".join(
        (f"event: {name}\n" if name else "") + f"data: {json.dumps(e)}\n\n"
        for name, e in zip(names, (created, *events), strict=True)
    ).encode()


def _delta(n: int, text: str, output: int = 0, content: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "sequence_number": n,
        "item_id": "msg_joined",
        "output_index": output,
        "content_index": content,
        "delta": text,
        **fields,
    }


def _done(n: int, output: int = 0, content: int = 0) -> dict[str, Any]:
    return {"type": "response.output_text.done", "sequence_number": n, "output_index": output, "content_index": content}


def _clean_end(response: Any, tmp: Path) -> list[dict[str, Any]]:
    events = _sse_events(response.text)
    joined = "".join(e.get("delta", "") for e in events if "delta" in e)
    assert KEY not in joined and KEY not in response.text and KEY not in _recorded(tmp)
    return events


@pytest.mark.parametrize("second", [(0, 1), (1, 0)], ids=["next-part", "next-item"])
def test_deltas_holding_the_key_across_parts_or_items_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: tuple[int, int]
) -> None:
    """Before: both halves passed (each lane alone holds half), and a client printing each delta had the key."""
    completed = {"type": "response.completed", "sequence_number": 9, "response": _response("x")}
    body = _body(_delta(1, "a " + KEY[:HALF]), _done(2), _delta(3, KEY[HALF:], *second), completed)
    events = _clean_end(_post(tmp_path, monkeypatch, SSE, body, True), tmp_path)
    assert events[-1]["type"] == "error"
    assert "deltas of one kind joined across parts and items" in events[-1]["message"]


def test_a_completed_response_holding_the_key_across_its_parts_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the stream's final response passed, and the streaming SDK's `output_text` was `a <key>`."""
    body = _body({"type": "response.completed", "sequence_number": 1, "response": _split_parts()})
    events = _clean_end(_post(tmp_path, monkeypatch, SSE, body, True), tmp_path)
    assert events[-1]["type"] == "error" and all(e["type"] != "response.completed" for e in events)


@pytest.mark.parametrize("data_type", [None, "response.in_progress"], ids=["no-type", "other-type"])
def test_deltas_named_only_on_the_event_line_are_held_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_type: str | None
) -> None:
    """Before: both halves passed as they came, and an EventSource client joining the
    `response.output_text.delta` events it was given had the key."""
    first, second = _delta(1, "a " + KEY[:HALF]), _delta(2, KEY[HALF:])
    for event in (first, second):
        del event["type"]
        if data_type:
            event["type"] = data_type
    completed = {"type": "response.completed", "sequence_number": 3, "response": _response("a [redacted]")}
    name = "response.output_text.delta"
    body = _body(first, second, completed, names=[name, name, "response.completed"])
    response = _post(tmp_path, monkeypatch, SSE, body, True)
    events = _clean_end(response, tmp_path)
    text = response.text.replace("\r\n", "\n")
    if data_type is None:  # read as the delta its name says: the key across the two taken out
        assert events[-1]["type"] == "response.completed"
        assert "".join(e["delta"] for e in events if "delta" in e) == "a [redacted]"
        named = [b for b in text.split("\n\n") if b.startswith("event: response.output_text.delta\n")]
        assert "".join(json.loads(b.split("data: ", 1)[1])["delta"] for b in named) == "a [redacted]"
    else:  # named one thing, typed another: refused
        assert events[-1]["type"] == "error"
        assert "whose data's `type` is another" in events[-1]["message"]


def test_a_websocket_response_holding_the_key_across_its_parts_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = json.dumps({"type": "response.completed", "sequence_number": 1, "response": _split_parts()})
    first = through_socket(tmp_path, monkeypatch, message, keyed=_keyed)
    assert KEY not in first
    assert json.loads(first)["type"] == "error"


def test_a_held_body_read_as_sse_holding_the_key_across_parts_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-streamed request answered with SSE bytes: the deltas of one kind across parts joined."""
    body = _body(_delta(1, "a " + KEY[:HALF]), _done(2), _delta(3, KEY[HALF:], 0, 1))
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/plain", body, False)
    assert response.status_code == 502
    assert KEY not in response.text and KEY not in _recorded(tmp_path)
