"""The recording proxy fails closed on its upstream key: where it cannot be sure that an answer is
free of the key in the form a client decodes, it refuses it (a 502 in OpenAI's envelope, or an SSE
`error` event, or a WebSocket `error` event and 1014), never passing it on. Each test here was an
escape found by a hostile pass (the key `sk-h48f/SeCrEt+k3y9`, whose `/` JSON may write as `\\/`),
and fails on the code before. Each upstream is a small server on loopback; nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.model.upstream.redaction import Redaction
from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import _request, raw_upstream, ws_upstream
from tests.usage.held import Held, others_answered_while_held

KEY = "sk-h48f/SeCrEt+k3y9"
ENV = "REDACT48_UPSTREAM_KEY"
CREATE = {"model": "gpt-test", "input": "no scenario matches this"}
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY)
SLASHED = KEY.replace("/", "\\/")


def _response(text: str) -> dict[str, Any]:
    return {
        "id": "resp_key48",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "message",
                "id": "msg_key48",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
    }


def _keyed(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch, mode: str = "new") -> Any:
    monkeypatch.setenv(ENV, KEY)
    return recorder(
        tmp, url, tmp / "recordings", mode=mode, upstream_api_key_env=ENV, allow_unguarded_upstream_key=True
    )


def _recorded(tmp: Path) -> str:
    return "".join(path.read_text() for path in (tmp / "recordings").glob("*.yaml"))


def _answering(head: bytes, body: bytes) -> Any:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 " + head + b"\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    return answer


def _post(tmp: Path, monkeypatch: pytest.MonkeyPatch, head: bytes, body: bytes, stream: bool = False) -> httpx.Response:
    with raw_upstream(_answering(head, body)) as url, _keyed(tmp, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            return http.post("/responses", json={**CREATE, "stream": stream})


def _clean(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and SLASHED not in text and ESCAPED not in text.lower(), text[:2000]


def _refused(response: httpx.Response, why: str) -> None:
    assert response.status_code == 502, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "upstream_error"
    assert why in error["message"] and "--upstream-api-key-env" in error["message"]
    _clean(response.text)


def test_a_header_value_that_is_not_latin_1_passes_as_its_bytes_came(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a 500 (the value, decoded from UTF-8, could not be encoded as Latin-1)."""
    body = json.dumps(_response("hi")).encode()
    head = (
        b"200 OK\r\ncontent-type: application/json\r\nx-note: "
        + "café €".encode()
        + b"\r\nx-echo: "
        + SLASHED.encode()
        + b" "
        + ESCAPED.encode()
    )
    response = _post(tmp_path, monkeypatch, head, body)
    assert response.status_code == 200, response.text
    raw = dict(response.headers.raw)
    assert raw[b"x-note"] == "café €".encode()
    assert raw[b"x-echo"] == b"[redacted] [redacted]"


def test_a_content_encoding_holding_the_key_is_not_quoted_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ptc_emulator")
    head = f"200 OK\r\ncontent-type: application/json\r\ncontent-encoding: x-{KEY}".encode()
    response = _post(tmp_path, monkeypatch, head, b"{}")
    assert response.status_code == 502
    assert "x-[redacted]" in response.json()["error"]["message"]
    _clean(response.text, caplog.text)


def through_socket(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, message: str | bytes, *, closes: bool = False, keyed: Any = None
) -> Any:
    """The first message a client gets through the keyed proxy's WebSocket when the upstream answers
    its create with `message`; `closes`: the proxy then closes the socket, and its close code is
    returned with it. `keyed`: the caller's own keyed recorder (another key), this module's by default."""
    from websockets.sync.client import connect

    async def answer(socket: Any) -> None:
        await socket.recv()
        await socket.send(message)
        await socket.wait_closed()

    with ws_upstream(answer) as url, (keyed or _keyed)(tmp, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            first = socket.recv(timeout=60)
            if closes:
                with pytest.raises(Exception):  # noqa: B017 - closed by the proxy
                    socket.recv(timeout=60)
    return (first, socket.close_code) if closes else first


def test_a_binary_websocket_message_with_the_key_in_json_slash_escapes_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the decoded values were looked at, but the message's bytes sent as they came."""
    text = json.dumps({"type": "response.completed", "response": _response(f"it is {KEY}")})
    assert KEY in text and "\\/" not in text
    raw = text.replace(KEY, SLASHED).encode()

    first = through_socket(tmp_path, monkeypatch, raw)
    assert isinstance(first, bytes)
    assert json.loads(first)["response"]["output"][0]["content"][0]["text"] == "it is [redacted]"
    _clean(first.decode(), _recorded(tmp_path))


def test_a_text_websocket_message_nested_too_deep_to_parse_is_looked_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the message did not parse (too deep), so its `\\/`-escaped key went on as it came."""
    deep = "[" * 1500 + '"' + SLASHED + '"' + "]" * 1500

    first = through_socket(tmp_path, monkeypatch, deep)
    assert isinstance(first, str) and "[redacted]" in first
    _clean(first)


@pytest.mark.parametrize("end", ["\r", "\n", "\r\n"], ids=["cr", "lf", "crlf"])
def test_an_sse_stream_with_cr_line_endings_is_read_event_by_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    """SSE lines may end with CR alone. Before, no event was found: the stream was sent at its end
    as it came, the `\\u`-escaped key in its deltas, and nothing was recorded."""
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    created["response"]["output"] = []  # the message is added next, at output index 0
    item = {"type": "message", "id": "msg_key48", "role": "assistant", "status": "in_progress", "content": []}
    added = {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}
    part = {
        "type": "response.content_part.added",
        "sequence_number": 2,
        "output_index": 0,
        "content_index": 0,
        "item_id": "msg_key48",
        "part": {"type": "output_text", "text": "", "annotations": []},
    }
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 3,
        "delta": f"is {KEY}",
        "item_id": "msg_key48",
        "output_index": 0,
        "content_index": 0,
    }
    done = {"type": "response.completed", "sequence_number": 4, "response": _response(f"is {KEY}")}
    stream = "".join(
        f"event: {e['type']}{end}data: {json.dumps(e).replace(KEY, ESCAPED)}{end}{end}"
        for e in (created, added, part, delta, done)
    )
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", stream.encode(), True)
    assert response.status_code == 200
    lines = response.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    told = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [e["type"] for e in told] == [e["type"] for e in (created, added, part, delta, done)]
    assert told[3]["delta"] == "is [redacted]"
    recorded = _recorded(tmp_path)
    assert "is [redacted]" in recorded
    _clean(response.text, json.dumps(told), recorded)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("application/json; charset=utf-16", json.dumps(_response(f"it is {KEY}")).encode("utf-16")),
        ("application/json", json.dumps(_response(f"it is {KEY}")).encode("utf-16-le")),  # no BOM: NULs
        ("application/json", b"\xff\xfe" + json.dumps(_response("x")).encode("utf-16-le")),
        ("text/event-stream; charset=utf-16", b"data: {}\n\n"),
        ("text/plain", b"caf\xe9 " + KEY.encode("latin-1")),
    ],
    ids=["declared-utf-16", "utf-16-no-bom", "utf-16-bom", "sse-declared-utf-16", "latin-1"],
)
def test_an_answer_that_is_not_utf_8_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, body: bytes
) -> None:
    """Before: the key was looked for in UTF-8 only; a client decoding the declared charset had it,
    and the recording held it."""
    stream = kind.startswith("text/event-stream")
    response = _post(tmp_path, monkeypatch, f"200 OK\r\ncontent-type: {kind}".encode(), body, stream)
    _refused(response, "UTF-8")
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def test_a_utf_16_binary_websocket_message_holding_the_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = json.dumps({"type": "response.completed", "response": _response(f"it is {KEY}")}).encode("utf-16-le")

    first, close_code = through_socket(tmp_path, monkeypatch, raw, closes=True)
    assert isinstance(first, str)
    event = json.loads(first)
    assert event["type"] == "error" and event["status"] == 502 and "UTF-16" in event["error"]["message"]
    assert close_code == 1014
    assert KEY.encode("utf-16-le") not in first.encode("utf-16-le")[2:] and KEY not in first


@pytest.mark.parametrize("escape", ["u", "slash"])
def test_a_json_body_nested_too_deep_to_parse_is_looked_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, escape: str
) -> None:
    """Before: `json.loads` gave up (too deep), so the escaped key was never looked for."""
    shown = ESCAPED if escape == "u" else SLASHED
    body = ("[" * 1500 + '"' + shown + '"' + "]" * 1500).encode()
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: application/json", body)
    assert response.status_code == 200 and '"[redacted]"' in response.text
    _clean(response.text)


def test_a_text_error_body_with_the_key_in_u_escapes_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: only a body that parsed as JSON had its escapes looked at; a text/plain one went on."""
    response = _post(tmp_path, monkeypatch, b"401 Unauthorized\r\ncontent-type: text/plain", f"bad {ESCAPED}".encode())
    assert response.status_code == 401 and response.text == "bad [redacted]"


def test_a_body_longer_than_the_proxy_reads_whole_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: past KEPT_BYTES a keyed body went on as it came, `\\u`-escaped key and all."""
    from ptc_emulator.api import proxy

    monkeypatch.setattr(proxy, "KEPT_BYTES", 4096)
    body = json.dumps(_response(ESCAPED + "x" * 8192)).encode()
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: application/json", body)
    _refused(response, "the proxy reads whole")


def _long(data: Any) -> bool:
    if isinstance(data, str):
        return len(data) >= 1_000_000
    return isinstance(data, dict) and any(isinstance(v, list) and len(v) >= 100_000 for v in data.values())


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """Holds the first look for the key (`Redaction.text`, `.scan`, `.rewrite` or `.values`) through a long answer."""
    holder = Held()
    for name in ("text", "scan", "rewrite", "values"):
        real = getattr(Redaction, name)

        def looking(self: Redaction, data: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if _long(data):
                holder.hold()
            return _real(self, data, *args, **kwargs)

        monkeypatch.setattr(Redaction, name, looking)
    yield holder
    holder.release.set()


def test_a_long_body_is_looked_through_off_the_loop(
    held: Held, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyed proxy looks through a whole body for the key: 1.2 M small objects with one backslash
    were walked (`values`) and written again on the event loop, seconds of it; health waited."""
    items = ",".join(['{"k":"v"}'] * 200_000)
    body = ('{"object":"list","data":[' + items + ',{"k\\n":"v"}]}').encode()
    with raw_upstream(_answering(b"200 OK\r\ncontent-type: application/json", body)) as url:
        with _keyed(tmp_path, url, monkeypatch) as rec, ThreadPoolExecutor(1) as pool:

            def ask() -> httpx.Response:
                with httpx.Client(base_url=rec.server_url, timeout=120) as http:
                    return http.post("/responses", json=CREATE)

            pending = pool.submit(ask)
            server = SimpleNamespace(base_url=rec.server_url)
            others_answered_while_held(server, held.entered, held.release, pending, small=False)  # type: ignore[arg-type]
            response = pending.result(timeout=120)
    assert response.status_code == 200 and response.content == body


def test_an_sse_stream_with_cr_line_endings_is_recorded_without_a_key(tmp_path: Path) -> None:
    """Without a key the stream passes as it comes; before, its CR-ended events were never found,
    so nothing was recorded (the stream's last CR, held to see whether an LF follows, ends it)."""
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    done = {"type": "response.completed", "sequence_number": 1, "response": _response("plain")}
    stream = "".join(f"event: {e['type']}\rdata: {json.dumps(e)}\r\r" for e in (created, done)).encode()
    with raw_upstream(_answering(b"200 OK\r\ncontent-type: text/event-stream", stream)) as url:
        with recorder(tmp_path, url, tmp_path / "recordings") as rec:
            with httpx.Client(base_url=rec.server_url, timeout=60) as http:
                response = http.post("/responses", json={**CREATE, "stream": True})
    assert response.status_code == 200 and response.content == stream
    assert "plain" in _recorded(tmp_path)
