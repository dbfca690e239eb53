"""The keyed recording proxy's delta lanes after the stream's end, and their cost: a delta after
the stream's terminal or `error` event is refused (before, the end sent what was held and forgot
it, so `A`, `response.completed`, `B` passed the key to a client joining the deltas); a `.done`
event looks at its own lanes only (before, each `.done` walked every held lane: 5,000 held lanes
and 5,000 unrelated `.done` events stalled the server for seconds); and the lanes of one answer are
bounded (`MAX_LANES`). Each test fails on the code before; work is counted, nothing is timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.test_record_key_fail_closed import _response
from tests.recording.test_record_key_sdk_view import KEY, _joined, _post, _recorded, _sse_events

HALF = len(KEY) // 2
SSE = b"200 OK\r\ncontent-type: text/event-stream"


def _delta(n: int, text: str, position: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "sequence_number": n,
        "item_id": "msg_lanes",
        "output_index": position,
        "content_index": 0,
        "delta": text,
    }


def _body(*events: dict[str, Any]) -> bytes:
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (created, *events)).encode()


def _completed(n: int, status: str = "completed") -> dict[str, Any]:
    return {"type": f"response.{status}", "sequence_number": n, "response": {**_response("x"), "status": status}}


ENDS = {
    "completed": _completed(2),
    "failed": _completed(2, "failed"),
    "error": {"type": "error", "sequence_number": 2, "code": "x", "message": "x"},
}


@pytest.mark.parametrize("end", list(ENDS))
def test_a_delta_after_the_streams_end_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: str) -> None:
    """Before: 200, no error event, and a client joining every delta had `k: <key>`."""
    body = _body(_delta(1, "k: " + KEY[:HALF]), ENDS[end], _delta(3, KEY[HALF:]))
    response = _post(tmp_path, monkeypatch, SSE, body, True)
    events = _sse_events(response.text)
    joined = _joined(events)
    assert KEY not in joined and KEY not in response.text and KEY not in _recorded(tmp_path)
    assert joined == "k: " + KEY[:HALF]
    assert events[-1]["type"] == "error"
    assert "after its stream's terminal or error event" in events[-1]["message"]


def test_a_done_event_looks_at_its_own_lanes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """N deltas, each at its own output index, each held back (the key but its last character),
    then N `.done` events at other indices: before, each `.done` read the positions of every held
    lane (N * N reads); now each reads its own indices (a dict lookup), so the reads grow with N."""
    from ptc_emulator.api import proxy

    reads = [0]
    real = proxy._position

    def counting(value: Any) -> Any:
        reads[0] += 1
        return real(value)

    monkeypatch.setattr(proxy, "_position", counting)
    n = 300
    held = [_delta(i + 1, KEY[:-1], i) for i in range(n)]
    dones = [
        {
            "type": "response.output_text.done",
            "sequence_number": n + i + 1,
            "output_index": 10**7 + i,
            "content_index": 0,
        }
        for i in range(n)
    ]
    response = _post(tmp_path, monkeypatch, SSE, _body(*held, *dones, _completed(2 * n + 1)), True)
    events = _sse_events(response.text)
    assert events[-1]["type"] == "response.completed"
    assert _joined(events) == KEY[:-1] * n
    assert 0 < reads[0] <= 10 * n, reads[0]


def test_the_lanes_of_one_answer_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: no bound but the stream's length (200,000 lanes each holding the key but its last
    character grew the server by 186 MB). Past `MAX_LANES` lanes the stream ends with an error event."""
    from ptc_emulator.api import proxy

    monkeypatch.setattr(proxy, "MAX_LANES", 8)
    within = [_delta(i + 1, KEY[:-1], i) for i in range(8)]
    response = _post(tmp_path, monkeypatch, SSE, _body(*within, _completed(9)), True)
    assert _sse_events(response.text)[-1]["type"] == "response.completed"
    past = [_delta(i + 1, KEY[:-1], i) for i in range(9)]
    response = _post(tmp_path / "past", monkeypatch, SSE, _body(*past, _completed(10)), True)
    events = _sse_events(response.text)
    assert events[-1]["type"] == "error"
    assert "positions" in events[-1]["message"]
    assert KEY not in response.text
