"""The recording proxy against an upstream that misbehaves (docs/limits.md, "Record mode"): one
that streams forever, one that answers compressed although asked for none, one whose WebSocket
sends a message past the bound.

The upstream is a small server on loopback in a thread, speaking HTTP (or WebSocket) itself.
Nothing is timed: each test waits for what the upstream sees (its connection closed) or for
what the client gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api import proxy
from tests.recording.recording_support import recorder

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def raw_upstream(handler: Handler) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 in a thread, each connection given to `handler`; its base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = stop = asyncio.Event()
        started.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield f"http://127.0.0.1:{box['port']}/v1"
    finally:
        loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
        loop.close()


@contextlib.contextmanager
def ws_upstream(handler: Callable[[Any], Awaitable[None]], **options: Any) -> Iterator[str]:
    """A WebSocket server on 127.0.0.1 in a thread, each socket given to `handler`; its base URL."""
    from websockets.asyncio.server import serve

    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        async with serve(handler, "127.0.0.1", 0, **options) as server:
            box["port"] = list(server.sockets)[0].getsockname()[1]
            box["stop"] = stop = asyncio.Event()
            started.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield f"http://127.0.0.1:{box['port']}/v1"
    finally:
        loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
        loop.close()


async def _request(reader: asyncio.StreamReader) -> dict[str, str]:
    head = await reader.readuntil(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    await reader.readexactly(int(headers.get("content-length", "0")))
    return headers


CREATE = {"model": "gpt-test", "input": "no scenario matches this", "stream": True}


def test_a_client_that_goes_away_ends_the_upstream_request(tmp_path: Path) -> None:
    """The upstream streams keep-alive comments forever. The proxy went on reading them after
    its client had gone (uvicorn drops what is sent to a closed connection): one upstream request
    held, and billed, per client that gave up, for as long as the upstream streamed."""
    closed = threading.Event()

    async def forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        try:
            while True:
                writer.write(b"4\r\n: .\n\r\n")
                await writer.drain()
                if reader.at_eof():
                    break
                await asyncio.sleep(0.02)
        except (ConnectionError, OSError):
            pass
        closed.set()
        writer.close()

    with raw_upstream(forever) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            with http.stream("POST", "/responses", json=CREATE) as response:
                assert response.status_code == 200
                assert next(response.iter_raw()).startswith(b":")
            assert closed.wait(60), "the upstream request went on after its client had gone"
            assert http.get(rec.server_url.removesuffix("/v1") + "/_emulator/health").status_code == 200


def test_a_compressed_answer_is_asked_against_and_passed_on_packed(tmp_path: Path) -> None:
    """A gzip bomb (a few MiB packed, GiBs unpacked) was unpacked by the proxy on the event loop:
    health waited seconds and the process grew by the unpacked size. The proxy now asks for
    no encoding, and what comes packed all the same is passed on as it is, with its encoding."""
    answer = {"id": "resp_packed", "object": "response", "status": "completed", "output": []}
    asked: list[str] = []

    async def packed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        headers = await _request(reader)
        asked.append(headers.get("accept-encoding", ""))
        body = gzip.compress(json.dumps(answer).encode())
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    with raw_upstream(packed) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": False})
    assert asked == ["identity"]
    assert response.headers["content-encoding"] == "gzip"
    assert response.json() == answer  # the client unpacks it, as it would from the upstream itself
    assert list((tmp_path / "recordings").glob("*.yaml")) == []


def test_a_proxied_answer_carries_one_date_and_one_server_header(tmp_path: Path) -> None:
    """The upstream's `date` and `server` were passed on beside the emulator's own: two of each,
    which a client reading one value (a dict of headers) sees as either."""
    answer = {"id": "resp_hdr", "object": "response", "status": "completed", "output": []}

    async def dated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        body = json.dumps(answer).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ndate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
            + b"server: far-away\r\nx-request-id: req_hdr\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    with raw_upstream(dated) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": False})
    assert response.json() == answer
    names = [name.lower() for name, _ in response.headers.multi_items()]
    assert names.count("date") == 1 and names.count("server") == 1
    assert "1970" not in response.headers["date"]
    assert response.headers["x-request-id"] == "req_hdr"  # the upstream's own headers still come


def test_an_upstream_websocket_message_past_the_bound_closes_the_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream's WebSocket messages were read without a bound (`max_size=None`): one
    message of any size was held whole in memory before it was passed on."""
    from websockets.sync.client import connect

    monkeypatch.setattr(proxy, "UPSTREAM_FRAME_BYTES", 2**20)

    async def huge(socket: object) -> None:
        await socket.recv()  # type: ignore[attr-defined]
        await socket.send("x" * (2 * 2**20))  # type: ignore[attr-defined]
        await socket.wait_closed()  # type: ignore[attr-defined]

    with ws_upstream(huge, max_size=None) as url:
        with recorder(tmp_path, url, tmp_path / "recordings", mode="all") as rec:
            with connect(rec.server_url.replace("http", "ws", 1) + "/responses", max_size=None) as socket:
                socket.send(json.dumps({"type": "response.create", **CREATE}))
                got = []
                with contextlib.suppress(Exception):
                    while True:
                        got.append(socket.recv(timeout=60))
                closed = socket.protocol.close_rcvd
            assert all(len(message) < 2**20 for message in got)
            # The client is told why (it saw the socket drop with no close frame, 1006, before).
            assert [json.loads(m)["error"]["code"] for m in got] == ["upstream_error"]
            assert closed is not None and closed.code == 1009


def _dripping(sse: bool, headers_first: bool) -> tuple[Handler, threading.Event]:
    """An upstream that answers a byte at a time, each well within the read timeout, forever
    (or, with `headers_first` false, sends nothing at all); the event: its connection closed."""
    closed = threading.Event()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        try:
            if headers_first:
                kind = b"text/event-stream" if sse else b"application/json"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + kind + b"\r\ntransfer-encoding: chunked\r\n\r\n")
                writer.write(b"1\r\n" + (b":" if sse else b"{") + b"\r\n")
            while not reader.at_eof():
                if headers_first:
                    writer.write(b"1\r\n" + (b"\n" if sse else b" ") + b"\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        except (ConnectionError, OSError):
            pass
        closed.set()
        writer.close()

    return drip, closed


def test_an_upstream_that_never_answers_is_given_up_at_the_deadline(tmp_path: Path) -> None:
    """The proxy's upstream client had a read timeout only (600 s between two bytes): an
    upstream that accepted the request and never answered held the client for ten minutes,
    and one that dripped a byte a second held it for ever. `--upstream-timeout` bounds the
    whole exchange; before any byte of the answer the client gets a 504 in OpenAI's envelope."""
    handler, closed = _dripping(sse=False, headers_first=False)
    with raw_upstream(handler) as url, recorder(tmp_path, url, tmp_path / "recordings", upstream_timeout_s=0.5) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=120) as http:
            response = http.post("/responses", json={**CREATE, "stream": False})
        assert closed.wait(60), "the upstream request went on after the deadline"
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["code"] == "upstream_timeout" and error["type"] == "server_error" and error["param"] is None
    assert "0.5 s" in error["message"] and "--upstream-timeout" in error["message"]


def test_a_dripping_stream_ends_at_the_deadline_with_an_error_event(tmp_path: Path) -> None:
    """An SSE answer already under way when the deadline comes ends with an `error` event that
    says why (its status was sent): the upstream request is ended, not held for ever."""
    handler, closed = _dripping(sse=True, headers_first=True)
    with raw_upstream(handler) as url, recorder(tmp_path, url, tmp_path / "recordings", upstream_timeout_s=0.5) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=120) as http:
            with http.stream("POST", "/responses", json=CREATE) as response:
                assert response.status_code == 200
                text = b"".join(response.iter_raw()).decode()
        assert closed.wait(60), "the upstream request went on after the deadline"
    data = [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]
    event = json.loads(data[-1])
    assert event["type"] == "error" and event["code"] == "upstream_timeout" and "0.5 s" in event["message"]


def test_a_dripping_body_is_cut_at_the_deadline_not_ended_as_whole(tmp_path: Path) -> None:
    """A JSON answer under way at the deadline: the connection is broken off, so the client
    sees an incomplete answer (never a cleanly ended, truncated body it could take as whole)."""
    handler, closed = _dripping(sse=False, headers_first=True)
    with raw_upstream(handler) as url, recorder(tmp_path, url, tmp_path / "recordings", upstream_timeout_s=0.5) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=120) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                http.post("/responses", json={**CREATE, "stream": False})
        assert closed.wait(60), "the upstream request went on after the deadline"
    assert list((tmp_path / "recordings").glob("*.yaml")) == []


def _cut(sse: bool) -> Handler:
    """An upstream whose answer breaks off: an SSE stream after its first event, a JSON body
    shorter than its Content-Length."""

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        if sse:
            event = (
                b'data: {"type":"response.created","sequence_number":0,'
                b'"response":{"id":"resp_cut","object":"response","status":"in_progress","output":[]}}\n\n'
            )
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        else:
            writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"id": "x"')
        await writer.drain()
        writer.close()

    return cut


def test_an_answer_that_breaks_off_is_not_passed_on_as_whole(tmp_path: Path) -> None:
    """An upstream answer cut short was ended cleanly towards the client: a JSON body shorter
    than its Content-Length arrived as a complete 200 body, and an SSE stream without its
    terminal event ended as if finished (the SDK's iterator just stops). Now a body is broken
    off unended (the client sees it incomplete, as from the upstream itself), and a stream ends
    with an `error` event saying the upstream broke off."""
    with raw_upstream(_cut(sse=False)) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=120) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                http.post("/responses", json={**CREATE, "stream": False})
    with raw_upstream(_cut(sse=True)) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=120) as http:
            with http.stream("POST", "/responses", json=CREATE) as response:
                assert response.status_code == 200
                text = b"".join(response.iter_raw()).decode()
    data = [json.loads(line[len("data: ") :]) for line in text.split("\n") if line.startswith("data: ")]
    assert [event["type"] for event in data] == ["response.created", "error"]
    assert data[-1]["code"] == "upstream_unreachable" and data[-1]["sequence_number"] == 1
    assert "broke off" in data[-1]["message"]
    assert list((tmp_path / "recordings").glob("*.yaml")) == []


def test_an_upstream_websocket_that_never_answers_a_create_is_given_up_at_the_deadline(tmp_path: Path) -> None:
    """The WebSocket path had no deadline: an upstream that took the socket and then never
    answered a response.create held the client for ever. Each create must now have its first
    event within --upstream-timeout; else the client gets an `error` event (504
    `upstream_timeout`, OpenAI's shape) and the socket is closed (1014). No timing is asserted:
    only that the bound (0.2 s here) is reached and said."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    asked: list[str] = []

    async def silent(socket: object) -> None:
        asked.append(await socket.recv())  # type: ignore[attr-defined]
        await socket.wait_closed()  # type: ignore[attr-defined]

    with ws_upstream(silent) as url:
        with recorder(tmp_path, url, tmp_path / "recordings", mode="all", upstream_timeout_s=0.2) as rec:
            with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
                socket.send(json.dumps({"type": "response.create", **CREATE}))
                event = json.loads(socket.recv(timeout=60))
                with pytest.raises(ConnectionClosed) as closed:
                    socket.recv(timeout=60)
        assert [json.loads(a)["type"] for a in asked] == ["response.create"]  # it reached the upstream
        assert event == {
            "type": "error",
            "status": 504,
            "error": {
                "message": f"The upstream {url} did not finish answering a response.create within 0.2 s "
                "(--upstream-timeout).",
                "type": "server_error",
                "param": None,
                "code": "upstream_timeout",
            },
        }
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1014
        assert list((tmp_path / "recordings").glob("*.yaml")) == []


def test_an_upstream_websocket_that_trickles_its_answer_is_given_up_at_the_deadline(tmp_path: Path) -> None:
    """Over a socket only a create's first event was due within --upstream-timeout: an upstream
    that sent `response.created` and then a delta now and then, never the end, held the client's
    socket for ever (over HTTP the same upstream is ended at the deadline). Now a create must be
    answered whole within it, as over HTTP: the client gets the `error` event and the socket is
    closed (1014). No timing is asserted: only that the bound (0.3 s here) is reached and said."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    ended = threading.Event()

    async def trickle(socket: object) -> None:
        await socket.recv()  # type: ignore[attr-defined]
        response = {"id": "resp_trickle", "object": "response", "status": "in_progress", "output": []}
        await socket.send(json.dumps({"type": "response.created", "sequence_number": 0, "response": response}))  # type: ignore[attr-defined]
        number = 1
        with contextlib.suppress(Exception):
            while True:  # a delta well within any read timeout, for ever
                delta = {"type": "response.output_text.delta", "sequence_number": number, "delta": "a"}
                await socket.send(json.dumps(delta))  # type: ignore[attr-defined]
                number += 1
                await asyncio.sleep(0.02)
        ended.set()

    with ws_upstream(trickle) as url:
        with recorder(tmp_path, url, tmp_path / "recordings", mode="all", upstream_timeout_s=0.3) as rec:
            with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
                socket.send(json.dumps({"type": "response.create", **CREATE}))
                events = []
                guard = time.monotonic() + 60  # the old code: deltas for ever; a guard, not a measure
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        assert time.monotonic() < guard, "the trickling upstream held the socket"
                        events.append(json.loads(socket.recv(timeout=60)))
            assert ended.wait(60), "the upstream socket was kept open after the deadline"
        assert events[0]["type"] == "response.created" and len(events) >= 2
        assert events[-1] == {
            "type": "error",
            "status": 504,
            "error": {
                "message": f"The upstream {url} did not finish answering a response.create within 0.3 s "
                "(--upstream-timeout).",
                "type": "server_error",
                "param": None,
                "code": "upstream_timeout",
            },
        }
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1014


def test_a_recording_that_cannot_be_written_leaves_the_answer_whole(tmp_path: Path) -> None:
    """Writing the recording failed (here its temporary file's path is a folder; a full disk or a
    folder made read-only does the same): the error escaped into the request, so a streamed
    client lost `response.completed` (its stream ended after `response.created`) and the log had
    an unhandled error. Now the recording is skipped with a warning and the answer is whole."""
    answer = {"id": "resp_disk", "object": "response", "status": "completed", "model": "gpt-test", "output": [
        {"type": "message", "id": "msg_disk", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "kept", "annotations": []}]}]}  # fmt: skip
    events = [{"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}},
              {"type": "response.completed", "response": answer}]  # fmt: skip
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)

    async def streams(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    directory = tmp_path / "recordings"
    with raw_upstream(streams) as url, recorder(tmp_path, url, directory, mode="all") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            first = http.post("/responses", json=CREATE)
            assert "response.completed" in first.text
            [written] = directory.glob("*.yaml")
            written.unlink()
            written.with_suffix(".yaml.tmp").mkdir()  # the next write of the same conversation fails
            again = http.post("/responses", json=CREATE)
            assert again.status_code == 200
            assert [line for line in again.text.splitlines() if line.startswith("event:")] == [
                "event: response.created",
                "event: response.completed",
            ]
            assert http.get(rec.server_url.removesuffix("/v1") + "/_emulator/health").status_code == 200
    assert not list(directory.glob("*.yaml"))


def _answer(part: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "id": "resp_empty",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "gpt-test",
            "output": [
                {"type": "message", "id": "msg_empty", "role": "assistant", "status": "completed", "content": [part]}
            ],
        }
    ).encode()


@pytest.mark.parametrize(
    ("part", "recorded"),
    [
        ({"type": "output_text", "text": "", "annotations": []}, False),
        ({"type": "refusal", "refusal": ""}, False),
        ({"type": "output_text", "text": None, "annotations": []}, False),
        ({"type": "refusal", "refusal": None}, False),
        ({"type": "output_text", "text": "hi", "annotations": []}, True),
    ],
    ids=["empty-text", "empty-refusal", "null-text", "null-refusal", "control"],
)
def test_an_empty_answer_is_passed_on_but_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, part: dict[str, Any], recorded: bool
) -> None:
    """Before, a completed answer with an empty text (or refusal) was recorded as `message: ''`,
    which replays as a completed response with nothing in it: a test passing on no answer. A null
    text was recorded as `message: None` and replayed as the text 'None'."""
    body = _answer(part)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            response = http.post("/responses", json={**CREATE, "stream": False})
    assert response.status_code == 200 and response.json()["id"] == "resp_empty"
    assert bool(list(directory.glob("*.yaml"))) is recorded
    if not recorded:
        kind = "refusal" if part["type"] == "refusal" else "message"
        said = f"a finished conversation was not recorded: its {kind} at turns.0 is empty (or only whitespace)"
        assert said in [r.getMessage() for r in caplog.records]
