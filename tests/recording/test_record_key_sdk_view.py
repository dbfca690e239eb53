"""The recording proxy with an upstream key reads an answer as the SDK does: a streamed request's
answer is SSE whatever its Content-Type (the openai SDKs parse it so), a delta held back stays held
across an item's other events (only its `.done` events end its text), and bytes that are not UTF-8
are also read as a client reading them leniently does (`response.text`, `buf.toString()`). Each
test fails on the code before; each upstream is a small server on loopback; nothing is timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_key_fail_closed import CREATE, _answering, _response, through_socket

KEY = "sk-upstream-SECRETKEY123"
ENV = "REDACT48C_UPSTREAM_KEY"
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY)


def _keyed(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch, mode: str = "new") -> Any:
    monkeypatch.setenv(ENV, KEY)
    return recorder(
        tmp, url, tmp / "recordings", mode=mode, upstream_api_key_env=ENV, allow_unguarded_upstream_key=True
    )


def _post(tmp: Path, monkeypatch: pytest.MonkeyPatch, head: bytes, body: bytes, stream: bool) -> httpx.Response:
    with raw_upstream(_answering(head, body)) as url, _keyed(tmp, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            return http.post("/responses", json={**CREATE, "stream": stream})


def _recorded(tmp: Path) -> str:
    return "".join(path.read_text() for path in (tmp / "recordings").glob("*.yaml"))


def _sse_events(text: str) -> list[dict[str, Any]]:
    """The events an SSE reader takes from `text` (as the SDK does, whatever the Content-Type)."""
    events = []
    for block in text.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:"))
        if data:
            try:
                events.append(json.loads(data))
            except json.JSONDecodeError:
                continue
    return events


def _joined(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e.get("type") == "response.output_text.delta")


def _free(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and ESCAPED not in text.lower(), text[:2000]


def _stream(*middle: dict[str, Any]) -> bytes:
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    done = {"type": "response.completed", "sequence_number": 9, "response": _response("hello [redacted] bye")}
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (created, *middle, done)).encode()


def _delta(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "sequence_number": n,
        "item_id": "msg_key48",
        "output_index": 0,
        "content_index": 0,
        "delta": text,
    }


SPLIT = (_delta(1, "hello sk-upstr"), _delta(2, "eam-SECRETKEY123 bye"))


@pytest.mark.parametrize(
    "kind",
    ["content-type: application/json", "content-type: text/plain", None, "content-type: TEXT/EVENT-STREAM"],
    ids=["json", "text-plain", "none", "upper-case"],
)
def test_a_streamed_answer_of_another_content_type_is_read_as_sse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str | None
) -> None:
    """Before: held and scanned as one body, where the key split across two deltas is never whole;
    the SDK parses the body as SSE (the request streamed) and its joined text held the key."""
    head = b"200 OK" + (b"\r\n" + kind.encode() if kind else b"")
    response = _post(tmp_path, monkeypatch, head, _stream(*SPLIT), True)
    events = _sse_events(response.text)
    _free(response.text, _joined(events), _recorded(tmp_path))
    if response.status_code == 200:
        assert _joined(events) == "hello [redacted] bye"


def test_an_sse_body_to_a_request_that_did_not_stream_is_not_passed_with_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: held and scanned as one body; read as SSE, its deltas joined to the key."""
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: application/json", _stream(*SPLIT), False)
    _free(response.text, _joined(_sse_events(response.text)), _recorded(tmp_path))
    assert response.status_code == 502


@pytest.mark.parametrize(
    "between",
    [
        {
            "type": "response.output_text.annotation.added",
            "sequence_number": 2,
            "item_id": "msg_key48",
            "output_index": 0,
            "content_index": 0,
            "annotation_index": 0,
            "annotation": {"type": "url_citation", "url": "https://example.com", "start_index": 0, "end_index": 1},
        },
        {"type": "response.in_progress", "sequence_number": 2, "response": _response("")},
    ],
    ids=["annotation", "in-progress"],
)
def test_a_held_delta_stays_held_across_the_items_other_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, between: dict[str, Any]
) -> None:
    """Before: the annotation (same item) flushed the held `sk-upstr` and cleared the lane, so the
    next delta `eam-SECRETKEY123 bye` passed; the SDK's accumulated text held the key."""
    first, second = SPLIT
    second = {**second, "sequence_number": 3}
    response = _post(
        tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", _stream(first, between, second), True
    )
    assert response.status_code == 200
    events = _sse_events(response.text)
    assert _joined(events) == "hello [redacted] bye"
    assert between["type"] in [e["type"] for e in events]
    _free(response.text, _recorded(tmp_path))


NOT_UTF8 = b'{"note":"\xff","t":"' + ESCAPED.encode() + b'"}'


@pytest.mark.parametrize("kind", ["application/octet-stream", "image/png"])
def test_a_body_not_utf_8_holding_the_escaped_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Before: not strict UTF-8, and `json.detect_encoding`'s strict decode failed, so it went out;
    `json.loads(response.text)` (decoded with replacement) gave the key."""
    assert json.loads(NOT_UTF8.decode("utf-8", "replace"))["t"] == KEY
    response = _post(tmp_path, monkeypatch, f"200 OK\r\ncontent-type: {kind}".encode(), NOT_UTF8, False)
    assert response.status_code == 502, response.text[:500]
    assert response.json()["error"]["code"] == "upstream_error"
    _free(response.text, response.content.decode("utf-8", "replace"))
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def test_a_binary_websocket_message_not_utf_8_holding_the_escaped_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: sent as it came; `JSON.parse(buf.toString())` gave the key."""
    first, close_code = through_socket(tmp_path, monkeypatch, NOT_UTF8, closes=True, keyed=_keyed)
    assert isinstance(first, str)
    assert json.loads(first)["type"] == "error"
    assert close_code == 1014
    _free(first)
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def _text_done(n: int) -> dict[str, Any]:
    return {
        "type": "response.output_text.done",
        "sequence_number": n,
        "item_id": "msg_key48",
        "output_index": 0,
        "content_index": 0,
        "text": "hello sk-upstr",
    }


@pytest.mark.parametrize(
    "middle",
    [
        (SPLIT[0], _text_done(2), {**SPLIT[1], "sequence_number": 3}),
        (SPLIT[0], {**SPLIT[1], "item_id": "msg_other"}),
    ],
    ids=["after-done", "other-item-id"],
)
def test_a_key_split_across_deltas_at_one_position_is_not_joined_by_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, middle: tuple[dict[str, Any], ...]
) -> None:
    """Before: a `.done` sent the held `sk-upstr` and forgot the lane, so the next delta at the same
    position was looked at alone; and a lane was keyed by `item_id`, where the SDKs join deltas by
    output and content index. Either way the SDK's joined text held the key."""
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", _stream(*middle), True)
    events = _sse_events(response.text)
    _free(response.text, _joined(events), _recorded(tmp_path))
    if len(middle) == 2:
        assert _joined(events) == "hello [redacted] bye"
    else:
        assert events[-1]["type"] == "error"


def test_a_delta_after_a_byte_order_mark_is_read_as_the_sdk_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the stream's first line began with a UTF-8 byte order mark, so the proxy took no
    `data:` line from it and passed `sk-upstr` on; a client's decoder drops the mark, reads the
    delta and joins it to the next, which the proxy looked at alone: the key."""
    first, second = SPLIT
    body = b"\xef\xbb\xbfdata: " + json.dumps(first).encode() + b"\n\n" + _stream(second)
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", body, True)
    text = response.content.decode("utf-8").removeprefix("\ufeff")
    events = _sse_events(text)
    _free(text, _joined(events), _recorded(tmp_path))
    assert _joined(events) == "hello [redacted] bye"
