"""The keyed recording proxy reads a delta's output, content and summary indices as the SDKs do:
`0.0`, `0e0`, `-0.0` and `true`/`1` are one key in the Python SDK's dict of items, and `"0"` is
index 0 to JavaScript; a position no client reads as an index (negative: Python's `content[-1]`
is the last part; a fraction, `"00"`, a list) is refused (`proxy_answer_unreadable`). Before, a
lane was keyed by the index's `repr`, so `0.0` and `0` were two lanes and a key split across them
passed to a client that joined them. Each test fails on the code before; the upstream is a small
server on loopback; nothing is timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.test_record_hostile_upstream import ws_upstream
from tests.recording.test_record_key_sdk_view import KEY, _joined, _keyed, _post, _recorded, _sse_events, _stream

HALF = len(KEY) // 2
MARK = '"@position@"'


def _delta(n: int, text: str, position: Any = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "sequence_number": n,
        "item_id": "msg_key48",
        "output_index": position,
        "content_index": 0,
        "delta": text,
    }


def _done(n: int, position: Any = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.done",
        "sequence_number": n,
        "item_id": "msg_key48",
        "output_index": position,
        "content_index": 0,
        "text": "k: " + KEY[:HALF],
    }


def _written(body: str, raw: str) -> str:
    """`body` with the marked position written as `raw` (JSON text: `0e0`, `0.0`, `"0"`)."""
    return body.replace(MARK, raw)


MARKED = "@position@"
SAME = ["0.0", "0e0", '"0"', "-0.0"]
ODD = ["-1", "0.5", '"00"', '" 0"', "[0]", "1e999"]
"""Positions no client reads as an index (`1e999` is infinity to both)."""


def _through_sse(tmp: Path, monkeypatch: pytest.MonkeyPatch, raw: str, done: bool) -> Any:
    middle = [_delta(1, "k: " + KEY[:HALF], MARKED)]
    if done:
        middle.append(_done(2, MARKED))
    middle.append(_delta(3, KEY[HALF:] + "ok"))
    body = _written(_stream(*middle).decode(), raw).encode()
    return _post(tmp, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", body, True)


def _free(*texts: str) -> None:
    for text in texts:
        assert KEY not in text, text[:2000]


@pytest.mark.parametrize("raw", SAME)
@pytest.mark.parametrize("done", [False, True], ids=["held", "after-done"])
def test_a_key_split_across_positions_a_client_joins_is_never_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str, done: bool
) -> None:
    """Before: 200, the stream completed, and the SDK's joined text was `k: <key>ok`."""
    response = _through_sse(tmp_path, monkeypatch, raw, done)
    events = _sse_events(response.text)
    _free(response.text, _joined(events), _recorded(tmp_path))
    if done:
        assert events[-1]["type"] == "error"
        assert "proxy" in events[-1]["message"]
    else:
        assert _joined(events) == "k: [redacted]ok"


@pytest.mark.parametrize("raw", ODD)
def test_a_delta_at_a_position_no_client_reads_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    """Before: its own lane, passed on as it came (with `-1`, the Python SDK's `content[-1]`)."""
    response = _through_sse(tmp_path, monkeypatch, raw, False)
    events = _sse_events(response.text)
    _free(response.text, _recorded(tmp_path))
    assert events[-1]["type"] == "error"
    assert "whole number" in events[-1]["message"]
    assert not list((tmp_path / "recordings").glob("*.yaml"))


@pytest.mark.parametrize("raw", ["0.0", '"0"', "-1"])
def test_a_websocket_delta_at_another_written_position_is_not_passed_with_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    """Before: the two deltas went on as they came; a client joining them had the key."""
    from websockets.sync.client import connect

    messages = [
        _written(json.dumps(_delta(1, "k: " + KEY[:HALF], MARKED)), raw),
        _written(json.dumps(_done(2, MARKED)), raw),
        json.dumps(_delta(3, KEY[HALF:] + "ok")),
    ]

    async def answer(socket: Any) -> None:
        await socket.recv()
        for message in messages:
            await socket.send(message)
        await socket.wait_closed()

    told: list[str] = []
    with ws_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", "model": "gpt-test", "input": "hi"}))
            while not told or json.loads(told[-1])["type"] != "error":
                told.append(socket.recv(timeout=60))
            with pytest.raises(Exception):  # noqa: B017 - closed by the proxy
                socket.recv(timeout=60)
    assert socket.close_code == 1014
    _free(*told, _joined([json.loads(t) for t in told]))


def test_the_deltas_text_is_decoded_a_bounded_number_of_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work counted, not timed (bench/keyed_deltas.py times it): each delta is the key but its last
    character written as `\\u` escapes, so each is held back and sent with the next. Before, the
    end of the text each position had sent (up to 64 characters per character of the key) was
    decoded again, in Python, with every delta: 60,000 such deltas took 2.5 times the stream's time,
    and other clients waited. Now no character of the stream is decoded more than three times
    (once per level of nesting the key is looked for at)."""
    from ptc_emulator.emulator.model.upstream import redaction

    decoded = [0]
    real = redaction._unescaped

    def counting(text: str) -> str:
        decoded[0] += len(text)
        return real(text)

    monkeypatch.setattr(redaction, "_unescaped", counting)
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY[:-1])
    body = _stream(*(_delta(n + 1, escaped) for n in range(2000)))
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", body, True)
    events = _sse_events(response.text)
    assert events[-1]["type"] == "response.completed"
    assert _joined(events) == escaped * 2000
    assert 0 < decoded[0] <= 3 * len(body), (decoded[0], len(body))
