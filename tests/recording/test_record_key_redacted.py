"""The recording proxy never passes on its upstream key (`--upstream-api-key-env`, issue 38): an
upstream that echoes the request's `Authorization` in an error, or the key in its answer's text,
reached the client as "Incorrect API key provided: Bearer sk-...", and the key was written into
the recording. Now the key is `[redacted]` in the body, the headers, each SSE event and WebSocket
message, and the recording, as the model upstream's is (docs/security.md).

Each upstream here is a small server on loopback (tests/recording/test_record_hostile_upstream.py);
nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import _request, raw_upstream, ws_upstream

KEY = "sk-RECKEY-999"
ENV = "REDACT38_UPSTREAM_KEY"
CREATE = {"model": "gpt-test", "input": "no scenario matches this"}


AT = {"output_index": 0, "content_index": 0, "item_id": "msg_key38"}
"""Where a delta goes: the message its created event lists (the SDK's accumulator places it there)."""


def _response(text: str) -> dict[str, Any]:
    return {
        "id": "resp_key38",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": [
            {
                "type": "message",
                "id": "msg_key38",
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


def test_an_error_that_echoes_the_authorization_header_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = await _request(reader)
        message = f"Incorrect API key provided: {headers['authorization']}"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": None}}).encode()
        writer.write(
            b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
            + f"x-echo: {headers['authorization']}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    with raw_upstream(refuse) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json=CREATE)
    assert response.status_code == 401
    assert KEY not in response.text and KEY not in str(response.headers)
    assert response.json()["error"]["message"] == "Incorrect API key provided: Bearer [redacted]"
    assert response.headers["x-echo"] == "Bearer [redacted]"


def test_a_streamed_answer_holding_the_key_is_redacted_for_the_client_and_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key arrives split across two chunks of the stream, in a delta and in the final text."""
    text = f"your key is {KEY}, keep it"
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}},
        {"type": "response.output_text.delta", "sequence_number": 1, "delta": text, "item_id": "msg_key38", **AT},
        {"type": "response.completed", "sequence_number": 2, "response": _response(text)},
    ]
    stream = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    split = stream.index(KEY.encode()) + 5  # within the key's first appearance

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for part in (stream[:split], stream[split:]):
            writer.write(part)
            await writer.drain()
        writer.close()

    with raw_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": True})
    assert response.status_code == 200
    assert KEY not in response.text
    assert "your key is [redacted], keep it" in response.text
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def test_a_whole_answer_holding_the_key_is_redacted_for_the_client_and_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        body = json.dumps(_response(f"the key: {KEY}")).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    with raw_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json=CREATE)
    assert response.status_code == 200
    assert response.json()["output"][0]["content"][0]["text"] == "the key: [redacted]"
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def test_websocket_messages_holding_the_key_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from websockets.sync.client import connect

    async def echo(socket: Any) -> None:
        authorization = socket.request.headers["authorization"]
        await socket.recv()
        error = {"message": f"Incorrect API key provided: {authorization}", "type": "invalid_request_error"}
        await socket.send(json.dumps({"type": "error", "status": 401, "error": error}))
        await socket.recv()
        await socket.send(json.dumps({"type": "response.completed", "response": _response(f"it is {KEY}")}))
        await socket.wait_closed()

    with ws_upstream(echo) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            first = socket.recv(timeout=60)
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            second = socket.recv(timeout=60)
    assert KEY not in first and KEY not in second
    assert json.loads(first)["error"]["message"] == "Incorrect API key provided: Bearer [redacted]"
    assert json.loads(second)["response"]["output"][0]["content"][0]["text"] == "it is [redacted]"
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def _escaped(text: str) -> str:
    """`text` as JSON with every character of the key written as a `\\u` escape."""
    return json.dumps(text).replace(KEY, "".join(f"\\u{ord(c):04x}" for c in KEY))


def _escaped_response(text: str) -> str:
    return json.dumps(_response("TEXT")).replace('"TEXT"', _escaped(text))


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_holding_the_key_written_with_json_escapes_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Before, the escaped key was passed on as it came (the client's JSON parser decodes it to the
    key) and the recording, made from the decoded values, held it in plain text."""
    created = {"type": "response.created", "sequence_number": 0, "response": {**_response(""), "status": "in_progress"}}
    if stream:
        delta = {"type": "response.output_text.delta", "sequence_number": 1, "delta": "TEXT", **AT}
        escaped_delta = json.dumps(delta).replace('"TEXT"', _escaped(f"is {KEY}"))
        lines = [
            f"event: response.created\ndata: {json.dumps(created)}\n\n",
            f"event: response.output_text.delta\ndata: {escaped_delta}\n\n",
            f"event: response.completed\ndata: "
            f'{{"type":"response.completed","sequence_number":2,"response":{_escaped_response(f"it is {KEY}")}}}\n\n',
        ]
        body, kind = "".join(lines).encode(), "text/event-stream"
    else:
        body, kind = _escaped_response(f"it is {KEY}").encode(), "application/json"
    assert KEY.encode() not in body

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nconnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    with raw_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": stream})
    assert response.status_code == 200
    if stream:
        datas = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        decoded = [json.loads(d) for d in datas]
        assert [e["type"] for e in decoded] == ["response.created", "response.output_text.delta", "response.completed"]
        assert decoded[1]["delta"] == "is [redacted]"
        final = decoded[2]["response"]
    else:
        final = response.json()
    assert final["output"][0]["content"][0]["text"] == "it is [redacted]"
    assert KEY not in json.dumps(final) and KEY not in response.text
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def test_websocket_messages_holding_the_key_written_with_json_escapes_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from websockets.sync.client import connect

    async def echo(socket: Any) -> None:
        await socket.recv()
        await socket.send('{"type":"response.completed","response":' + _escaped_response(f"it is {KEY}") + "}")
        await socket.wait_closed()

    with ws_upstream(echo) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            first = socket.recv(timeout=60)
    assert json.loads(first)["response"]["output"][0]["content"][0]["text"] == "it is [redacted]"
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def _split_deltas(text: str) -> list[dict[str, Any]]:
    """`text` as 4-character `response.output_text.delta` events of one item, between its
    created and completed events."""
    deltas = [text[i : i + 4] for i in range(0, len(text), 4)]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**_response(""), "status": "in_progress"}}
    ]
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_key38",
            "output_index": 0,
            "content_index": 0,
            "delta": d,
        }
        for d in deltas
    ]
    events.append({"type": "response.output_text.done", "item_id": "msg_key38", "text": text, **AT})
    events.append({"type": "response.completed", "response": _response(text)})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _joined(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def test_a_key_split_across_streamed_deltas_is_redacted_in_the_joined_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each 4-character delta passed on as it came: a client joining them had the key
    (only the completed text was redacted)."""
    text = f"key {KEY} and s"  # ends with what could begin the key: let go at the item's next event
    events = _split_deltas(text)
    stream = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    assert all(KEY not in e.get("delta", "") for e in events)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + stream)
        await writer.drain()
        writer.close()

    with raw_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": True})
    told = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert _joined(told) == "key [redacted] and s"
    assert told[-1]["response"]["output"][0]["content"][0]["text"] == "key [redacted] and s"
    assert [e["type"] for e in told][-2:] == ["response.output_text.done", "response.completed"]
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


def test_a_key_split_across_websocket_deltas_is_redacted_in_the_joined_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from websockets.sync.client import connect

    events = _split_deltas(f"key {KEY} and s")

    async def answer(socket: Any) -> None:
        await socket.recv()
        for event in events:
            await socket.send(json.dumps(event))
        await socket.wait_closed()

    told: list[dict[str, Any]] = []
    with ws_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            while not told or told[-1]["type"] != "response.completed":
                told.append(json.loads(socket.recv(timeout=60)))
    assert _joined(told) == "key [redacted] and s"
    recorded = _recorded(tmp_path)
    assert "[redacted]" in recorded and KEY not in recorded


@pytest.mark.parametrize("stream", [False, True])
def test_a_header_whose_name_holds_the_key_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Before, only header values were redacted: a header named with the key (`x-sk-...: 1`; the
    client sees names lower-cased) reached the client. Now such a header is dropped, whatever the
    case of its name; the others pass."""
    body = (
        'event: response.completed\ndata: {"type":"response.completed","response":'
        + json.dumps(_response("hi"))
        + "}\n\n"
        if stream
        else json.dumps(_response("hi"))
    ).encode()
    kind = b"text/event-stream" if stream else b"application/json"

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: "
            + kind
            + b"\r\n"
            + f"x-{KEY}: 1\r\nx-other-{KEY.lower()}-tail: 2\r\nx-kept: 3\r\n".encode()
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    with raw_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": stream})
    assert response.status_code == 200 and response.headers["x-kept"] == "3"
    names = " ".join(response.headers.keys())
    assert KEY.lower() not in names.lower() and KEY not in str(response.headers.raw)
    assert "hi" in response.text


def test_a_binary_websocket_message_stays_binary_with_the_key_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an upstream binary message reached the client as a text one (its bytes decoded,
    others replaced): frames pass both ways unchanged (docs/record-replay.md). Now it stays
    binary, its bytes as they came but for the key; a JSON event in it is still recorded."""
    from websockets.sync.client import connect

    raw = b"\x00\xff" + KEY.encode() + b"\xfe"

    async def answer(socket: Any) -> None:
        await socket.recv()
        await socket.send(raw)
        await socket.send(json.dumps({"type": "response.completed", "response": _response(f"it is {KEY}")}).encode())
        await socket.wait_closed()

    with ws_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            first = socket.recv(timeout=60)
            second = socket.recv(timeout=60)
    assert first == b"\x00\xff[redacted]\xfe"
    assert isinstance(second, bytes) and KEY.encode() not in second
    assert json.loads(second)["response"]["output"][0]["content"][0]["text"] == "it is [redacted]"
    recorded = _recorded(tmp_path)
    assert "it is [redacted]" in recorded and KEY not in recorded
