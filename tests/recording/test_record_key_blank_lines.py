"""The keyed recording proxy's per-line work on an SSE stream is bounded: a run of blank lines is
taken in one step (before, each pair of them was an event of its own, scrubbed and sent alone: a
million blank lines held the event loop for seconds), events with no data are scrubbed together,
and the data lines of a long event are read off the event loop. Each test fails on the code
before; work is counted (scrubs, sends, where `_data` runs), nothing is timed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.test_record_key_fail_closed import _response
from tests.recording.test_record_key_sdk_view import KEY, _joined, _post, _recorded, _sse_events

SSE = b"200 OK\r\ncontent-type: text/event-stream"


def _events(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _padded(padding: bytes) -> bytes:
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 1,
        "item_id": "msg_pad",
        "output_index": 0,
        "content_index": 0,
        "delta": "hi " + KEY,
    }
    done = {"type": "response.completed", "sequence_number": 2, "response": _response("hi [redacted]")}
    return _events(created, delta) + padding + _events(done)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from ptc_emulator.api import proxy

    calls = [0]
    real = proxy._scrubbed

    def counting(redaction: Any, data: bytes) -> bytes | None:
        calls[0] += 1
        return real(redaction, data)

    monkeypatch.setattr(proxy, "_scrubbed", counting)
    return calls


@pytest.mark.parametrize("padding", [b"\n" * 200_000, b": c\n\n" * 40_000], ids=["blank-lines", "comment-events"])
def test_padding_between_events_is_not_scrubbed_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, padding: bytes
) -> None:
    """Before: 100,000 scrubs for 200,000 blank lines (one per pair), 40,000 for as many comment events."""
    calls = _counting(monkeypatch)
    response = _post(tmp_path, monkeypatch, SSE, _padded(padding), True)
    assert response.status_code == 200
    events = _sse_events(response.text)
    assert [e["type"] for e in events][-1] == "response.completed"
    assert KEY not in response.text and KEY not in _recorded(tmp_path)
    assert _joined(events) == "hi [redacted]"
    assert calls[0] < 500, calls[0]
    assert response.text.count("\n") >= padding.count(b"\n")  # the padding passed on as it came


def test_the_lines_of_a_long_event_are_read_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An event of 300,000 comment lines then one of 200,000 `data: 1` lines: before, their lines were
    split and walked in Python on the event loop (two million took a second)."""
    from ptc_emulator.api import proxy

    on_loop: list[int] = []
    real = proxy._data

    def watching(block: bytes) -> bytes:
        if len(block) >= proxy._OFF_LOOP_BYTES:
            try:
                asyncio.get_running_loop()
                on_loop.append(len(block))
            except RuntimeError:
                pass
        return real(block)

    monkeypatch.setattr(proxy, "_data", watching)
    padding = b":" + b"\n:" * 300_000 + b"\n\n" + b"data: 1\n" * 200_000 + b"\n"
    response = _post(tmp_path, monkeypatch, SSE, _padded(padding), True)
    assert response.status_code == 200
    assert _joined(_sse_events(response.text)) == "hi [redacted]"
    assert on_loop == []


def test_data_lines_are_read_as_before() -> None:
    from ptc_emulator.api import proxy

    block = b"id: 1\n\xef\xbb\xbfdata:  a\ndata\ndata:b:c\n: data: no\n data: no\ndata:\nevent: x"
    assert proxy._data(block) == b"a\nb:c\n"
    assert proxy._data(b": comment only") == b""


def test_an_events_name_is_its_last_event_line() -> None:
    from ptc_emulator.api import proxy

    assert proxy._event_name(b"event: a\nevent:  b\ndata: event: no") == "b"
    assert proxy._event_name(b"\xef\xbb\xbfevent: c\ndata: 1") == "c"
    assert proxy._event_name(b"xevent: no\ndata: 1") is None
    assert proxy._event_name(b"event: x\n" * 100_000 + b"event: last") == "last"
