"""What a connection may send before the app sees a request (docs/limits.md, "Requests").

uvicorn kept a request's head whole however long it grew: one client sending a header value that
never ended had the server hold every byte of it. A head past the bound is now the 431 in OpenAI's
envelope and the connection is closed; bytes the parser cannot read are the 400 in the envelope.

Nothing is timed: the client sends the head's bytes exactly to one past the bound, so the server has
read everything sent when it answers, and the client reads until the server closes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from ptc_emulator.api.httpflow import (
    CHUNKED_FEED_BYTES,
    HEAD_BYTES,
    PIECES_PER_STEP,
    PIPELINE_DEPTH,
    SLICES_PER_STEP,
    HttpProtocol,
)
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator


def _exchange(ptc_emulator: PTCEmulator, data: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """`data` sent on a connection of its own, then all the server writes before it closes."""
    parts = urlsplit(ptc_emulator.server_url)
    assert parts.hostname is not None and parts.port is not None
    received = b""
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.settimeout(60)  # a guard for the old code, which never answered: not a measure
        # A refusal closes with the rest of a large write unread: the close is a reset, which may cut
        # the sending short or end the reading once the answer is in.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {k.decode().lower(): v.decode() for k, _, v in (line.partition(b": ") for line in lines)}
    return status, headers, body


def _head(ptc_emulator: PTCEmulator, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {urlsplit(ptc_emulator.server_url).netloc}\r\n".encode()


def test_a_request_head_past_the_bound_is_the_431_and_the_connection_closes(ptc_emulator: PTCEmulator) -> None:
    start = _head(ptc_emulator, "/_emulator/health") + b"X-Big: "
    status, headers, body = _exchange(ptc_emulator, start + b"a" * (HEAD_BYTES + 1 - len(start)))
    assert status.startswith(b"HTTP/1.1 431 "), status
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_header_fields_too_large"
    assert error["message"] == (
        f"Request header fields too large: a request's line and headers may take at most {HEAD_BYTES} bytes."
    )
    assert error["param"] is None
    assert isinstance(ptc_emulator.journal, list)  # others are answered all the while


def _too_large(status: bytes, headers: dict[str, str], body: bytes) -> None:
    assert status.startswith(b"HTTP/1.1 431 "), (status, body[:300])
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_fields_too_large" and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("size", [HEAD_BYTES + 1, 100 * 1024, 130 * 1024])
def test_a_whole_head_past_the_bound_in_one_write_is_the_431(ptc_emulator: PTCEmulator, size: int) -> None:
    # The bound was checked only while a head was unfinished after a slice: a head that ended in
    # the slice past the bound (64-130 KiB in one write) was served.
    start = _head(ptc_emulator, "/_emulator/health") + b"X-Big: "
    end = b"\r\nConnection: close\r\n\r\n"
    _too_large(*_exchange(ptc_emulator, start + b"a" * (size - len(start) - len(end)) + end))
    # Padding the bytes the parser does not hand over (spaces before a value) counts the same.
    _too_large(*_exchange(ptc_emulator, start + b" " * (size - len(start) - len(end) - 1) + b"a" + end))


def test_a_whole_head_at_the_bound_is_served(ptc_emulator: PTCEmulator) -> None:
    start = _head(ptc_emulator, "/_emulator/health") + b"X-Big: "
    end = b"\r\nConnection: close\r\n\r\n"
    status, _, body = _exchange(ptc_emulator, start + b"a" * (HEAD_BYTES - len(start) - len(end)) + end)
    assert status.startswith(b"HTTP/1.1 200 "), (status, body[:300])


def test_a_large_head_after_a_pipelined_request_in_the_same_write_is_the_431(ptc_emulator: PTCEmulator) -> None:
    first = _head(ptc_emulator, "/_emulator/health") + b"\r\n"
    big = _head(ptc_emulator, "/_emulator/health") + b"X-Big: " + b"a" * (100 * 1024) + b"\r\n\r\n"
    status, _, body = _exchange(ptc_emulator, first + big)
    received = status + b"\r\n" + body
    assert b"HTTP/1.1 431 " in received and b"request_header_fields_too_large" in received, received[-400:]
    # The request before it is answered first, and the large one is not served.
    assert received.count(b"HTTP/1.1 200 ") == 1 and received.index(b"200 ") < received.index(b"431 ")


@pytest.mark.parametrize("bad", [b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 2**17 + b"\r\n\r\n"])
def test_a_head_refused_after_pipelined_requests_is_sent_after_their_answers(
    ptc_emulator: PTCEmulator, bad: bytes
) -> None:
    """A pipelining client whose third request is refused (not HTTP, a head past the bound) gets
    the answers of the two before it, in their order, then the refusal; nothing after it is read."""
    one = _head(ptc_emulator, "/_emulator/health") + b"\r\n"
    after = _head(ptc_emulator, "/_emulator/health") + b"\r\n"
    status, _, body = _exchange(ptc_emulator, one + one + bad + after)
    received = status + b"\r\n\r\n" + body
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", received)
    assert statuses[:2] == [b"200", b"200"] and statuses[2] in (b"400", b"431") and len(statuses) == 3, statuses


def test_a_head_within_the_bound_and_a_large_body_are_served(ptc_emulator: PTCEmulator) -> None:
    start = _head(ptc_emulator, "/_emulator/health") + b"X-Big: "
    request = start + b"a" * (HEAD_BYTES - 4096) + b"\r\nConnection: close\r\n\r\n"
    status, _, body = _exchange(ptc_emulator, request)
    assert status.startswith(b"HTTP/1.1 200 "), (status, body[:300])
    # A body of a megabyte arriving with its head (one write) is not counted as head.
    payload = json.dumps({"name": "x" * 2**20}).encode()
    netloc = urlsplit(ptc_emulator.server_url).netloc
    request = (
        f"POST /v1/conversations HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode() + payload
    status, _, body = _exchange(ptc_emulator, request)
    assert not status.startswith(b"HTTP/1.1 431"), body[:300]


def test_pipelined_requests_are_each_answered(ptc_emulator: PTCEmulator) -> None:
    one = _head(ptc_emulator, "/_emulator/health") + b"\r\n"
    last = _head(ptc_emulator, "/_emulator/health") + b"Connection: close\r\n\r\n"
    count = HEAD_BYTES // len(one) + 10  # more than the bound's worth of heads in all
    status, _, body = _exchange(ptc_emulator, one * count + last)
    assert status.startswith(b"HTTP/1.1 200 ")
    assert body.count(b"HTTP/1.1 200 ") == count  # the first's status line was split off above


def test_bytes_that_are_not_http_are_the_400_in_the_envelope(ptc_emulator: PTCEmulator) -> None:
    status, headers, body = _exchange(ptc_emulator, b"NOT HTTP AT ALL\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400 ")
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "error": {
            "message": "Invalid HTTP request received: the server cannot parse it, and closes the connection.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


# ---- deadlines: a head that does not come, a reply nobody reads ---------------------------------
#
# uvicorn put no deadline on a connection: its keep-alive timer is armed after a response only, and
# any byte cancels it. A server of their own with both deadlines tiny (0.2 s); each test waits for
# the event itself (the server's answer, its close, its dropping the connection), never for a time.
# Before, none of the events came: each test ran into its guard (a socket timeout, a bounded wait).

GUARD_S = 60.0
"""How long a test waits for an event before it fails (old code: forever): a guard, not a measure."""


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("tight"), store="memory", pool_size=1, head_timeout_s=0.2, write_pause_s=0.2
    )
    server = EmulatorServer(settings).start()
    try:
        yield server
    finally:
        server.stop()


def _connect(server: EmulatorServer, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connecting: the window
    sock.connect(("127.0.0.1", server.port))
    sock.settimeout(GUARD_S)
    return sock


def _served(server: EmulatorServer, sock: socket.socket) -> bool:
    """The server still holds a connection from `sock` (its protocol is in uvicorn's set)."""
    mine = sock.getsockname()[:2]
    return any(getattr(p, "client", None) == mine for p in list(server._server.server_state.connections))


def _dropped(server: EmulatorServer, sock: socket.socket) -> None:
    """Waits (polling, within the guard) until the server no longer holds `sock`'s connection."""
    deadline = time.monotonic() + GUARD_S
    while _served(server, sock):
        assert time.monotonic() < deadline, "the server still holds the connection"
        time.sleep(0.01)


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(tight: EmulatorServer) -> None:
    with _connect(tight) as sock:
        assert sock.recv(65536) == b""  # closed, nothing said: no request was begun


def test_a_head_sent_a_byte_at_a_time_is_the_408_and_the_connection_closes(tight: EmulatorServer) -> None:
    with _connect(tight) as sock:
        sock.sendall(b"GET /_emulator/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        deadline = time.monotonic() + GUARD_S
        received = b""
        while not received:  # a byte now and then, each one once the last found nothing to read
            assert time.monotonic() < deadline, "the server never answered the slow head"
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                received = sock.recv(65536)
            else:
                sock.sendall(b"a")
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), head
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {
        "error": {
            "message": (
                "Request timeout: a request's line and headers must arrive within 0.2 seconds "
                "(set --head-timeout); the connection is closed."
            ),
            "type": "invalid_request_error",
            "param": None,
            "code": "request_timeout",
        }
    }


def test_the_next_request_on_a_kept_connection_has_its_own_deadline(tight: EmulatorServer) -> None:
    with _connect(tight) as sock:
        sock.sendall(b"GET /_emulator/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 "), first
        sock.sendall(b"GET /_emulator/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no end
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]


def test_a_client_that_never_reads_a_large_reply_is_dropped_and_others_are_served(tight: EmulatorServer) -> None:
    base = f"http://127.0.0.1:{tight.port}"
    items = [
        {"type": "message", "role": "user", "content": f"{i} " + "x" * 500_000} for i in range(20)
    ]  # some 10 MB in all: past the kernel's buffers, so the server's own fills
    with httpx.Client(base_url=base, timeout=GUARD_S) as http:
        conversation = http.post("/v1/conversations", json={"items": items}).json()["id"]
        with _connect(tight, rcvbuf=4096) as sock:
            path = f"/v1/conversations/{conversation}/items?limit=20"
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert http.get("/_emulator/health").status_code == 200  # the server answers others meanwhile
            _dropped(tight, sock)  # and drops the connection that reads nothing
            received = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(2**20):
                    received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
        assert len(body) < length  # what the server held for it was dropped, not sent
        assert http.get("/_emulator/health").status_code == 200


def test_a_websocket_peer_that_never_reads_is_dropped(tight: EmulatorServer) -> None:
    with _connect(tight, rcvbuf=4096) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert sock.recv(12) == b"HTTP/1.1 101"
        ping = bytes([0x89, 0x80 | 125]) + b"\0\0\0\0" + b"p" * 125  # masked, the largest payload
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # the server's reset, once it dropped it
            while _served(tight, sock):  # pings until the pongs fill every buffer, then the server drops it
                sock.sendall(ping * 64)
        _dropped(tight, sock)


# ---- the body deadline: a head sent whole, then a body that trickles ----------------------------
#
# uvicorn put no deadline on a request's body: a client that sent its head and then a body byte now
# and then (or nothing more) held the connection and the request's app for as long as it kept on.
# A server of its own with a tiny body deadline (0.2 s) and the other deadlines at their defaults.


@pytest.fixture(scope="module")
def slow_body(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("body"), store="memory", pool_size=1, body_timeout_s=0.2)
    server = EmulatorServer(settings).start()
    try:
        yield server
    finally:
        server.stop()


def _trickled(server: EmulatorServer, path: str) -> bytes:
    """A POST to `path` whose head comes whole and whose body then comes a byte at a time, each
    once the last found nothing to read, until the server answers; all it writes before it closes."""
    with _connect(server) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: 100000\r\n\r\n".encode()
            + b'{"model": "m", "input": "'
        )
        deadline = time.monotonic() + GUARD_S
        received = b""
        while not received:
            assert time.monotonic() < deadline, "the server never answered the slow body"
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                received = sock.recv(65536)
            else:
                sock.sendall(b"a")
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    return received


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/conversations"])
def test_a_body_sent_a_byte_at_a_time_is_the_408_and_the_connection_closes(
    slow_body: EmulatorServer, path: str
) -> None:
    received = _trickled(slow_body, path)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), head
    assert b"connection: close" in head.lower() and b"content-type: application/json" in head.lower()
    assert json.loads(body) == {
        "error": {
            "message": (
                "Request timeout: a request's body must arrive within 0.2 seconds of its headers "
                "(set --body-timeout); the connection is closed."
            ),
            "type": "invalid_request_error",
            "param": None,
            "code": "request_timeout",
        }
    }
    with httpx.Client(base_url=f"http://127.0.0.1:{slow_body.port}", timeout=GUARD_S) as http:
        assert http.get("/_emulator/health").status_code == 200  # and the server serves others


def test_a_body_that_stops_coming_is_the_408_and_its_request_is_released(slow_body: EmulatorServer) -> None:
    with _connect(slow_body) as sock:
        sock.sendall(
            b"POST /v1/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 50\r\n\r\n{"
        )
        received = b""
        while chunk := sock.recv(65536):  # the guard (a socket timeout) fails the old code, which waited on
            received += chunk
        assert received.startswith(b"HTTP/1.1 408 "), received[:200]
        _dropped(slow_body, sock)
    tasks = slow_body._server.server_state.tasks
    deadline = time.monotonic() + GUARD_S
    while tasks:  # the request's app saw the disconnect and ended
        assert time.monotonic() < deadline, "the request's app still runs"
        time.sleep(0.01)


def test_a_body_sent_with_its_head_is_served_under_the_tight_body_deadline(slow_body: EmulatorServer) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{slow_body.port}", timeout=GUARD_S) as http:
        made = http.post("/v1/conversations", json={"items": [{"type": "message", "role": "user", "content": "hi"}]})
    assert made.status_code == 200, made.text


def test_a_trailer_field_past_the_bound_is_the_431_and_the_connection_closes(ptc_emulator: PTCEmulator) -> None:
    # A chunked body's trailer fields come after the headers: httptools gathered one that never
    # ended whole, copying it at each piece (a 100 MB one held every other client for seconds), and
    # the old code took all of it until the body deadline. Now the bytes that come with no body
    # among them are counted as the head's are: the client's sending is cut off and it reads the 431.
    netloc = urlsplit(ptc_emulator.server_url).netloc
    head = (
        f"POST /v1/conversations HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: "
    ).encode()
    piece, sent, received = b"a" * 65536, 0, b""
    with socket.create_connection(("127.0.0.1", urlsplit(ptc_emulator.server_url).port or 80)) as sock:
        sock.settimeout(GUARD_S)  # a guard for the old code, which took all it was sent: not a measure
        sock.sendall(head)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < 128 * len(piece):
                sock.sendall(piece)
                sent += len(piece)
        assert sent < 128 * len(piece), "the server took 8 MiB of one trailer field"
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    status, _, body = received.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431 "), received[:300]
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_fields_too_large" and error["param"] is None
    assert error["message"] == (
        "Request header fields too large: a chunked request's trailer fields and chunk size lines may take "
        f"at most {HEAD_BYTES} bytes between two pieces of its body."
    )
    assert isinstance(ptc_emulator.journal, list)  # the server answers others


def _chunked(ptc_emulator: PTCEmulator, chunks: bytes) -> bytes:
    netloc = urlsplit(ptc_emulator.server_url).netloc
    return (
        f"POST /v1/conversations HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode() + chunks


@pytest.mark.parametrize("size", [HEAD_BYTES + 1, 100 * 1024, 140 * 1024])
@pytest.mark.parametrize("where", ["trailer", "chunk size line"])
def test_framing_past_the_bound_in_one_write_is_the_431(ptc_emulator: PTCEmulator, where: str, size: int) -> None:
    """The framing bound holds however the bytes are read: a trailer field or a chunk size line's
    extension past it, sent with its head and body in one write, was served (a read's slice that
    held a piece of body started the count again, whatever framing came after it)."""
    if where == "trailer":
        chunks = b"2\r\n{}\r\n0\r\nX-Trailer: " + b"a" * size + b"\r\n\r\n"
    else:
        chunks = b"2;" + b"a" * size + b"\r\n{}\r\n0\r\n\r\n"
    status, _, body = _exchange(ptc_emulator, _chunked(ptc_emulator, chunks))
    assert status.startswith(b"HTTP/1.1 431 "), (status, body[:300])
    assert json.loads(body)["error"]["code"] == "request_header_fields_too_large"


def test_framing_within_the_bound_is_served(ptc_emulator: PTCEmulator) -> None:
    """Many small chunks (more framing than body, in all far past the bound) and a trailer of
    48 KiB, each in one write, are served: the bound is on framing between two pieces of body."""
    body = json.dumps({"metadata": {"k": "v" * 400}}).encode()
    small = b"".join(b"1;e=" + b"x" * 40 + b"\r\n" + body[i : i + 1] + b"\r\n" for i in range(len(body)))
    for chunks in (
        small + b"0\r\n\r\n",
        b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-Trailer: " + b"a" * (48 * 1024) + b"\r\n\r\n",
    ):
        status, _, answer = _exchange(ptc_emulator, _chunked(ptc_emulator, chunks))
        assert status.startswith(b"HTTP/1.1 200 "), (status, answer[:300])


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=tmp_path_factory.mktemp("roomy"), store="memory", pool_size=1)).start()
    try:
        yield server
    finally:
        server.stop()


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    """The next `count` answers on `sock` (each a head and its `content-length` body)."""
    data, answers = b"", []
    while len(answers) < count:
        head_end = data.find(b"\r\n\r\n")
        length = re.search(rb"\r\ncontent-length: (\d+)\r\n", data[:head_end]) if head_end >= 0 else None
        if length is not None and len(data) >= head_end + 4 + int(length[1]):
            end = head_end + 4 + int(length[1])
            answers.append(data[:end])
            data = data[end:]
            continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(answers)} answers"
        data += chunk
    return answers


def test_a_pipelined_flood_is_answered_in_order_and_holds_no_other_client_up(
    roomy: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of requests in one write: uvicorn parsed the whole read in one step of the event loop
    and queued every request in it (issue 38). The server's own order of events is recorded as the
    protocol parses each request's head, with how many of its connection's requests wait then."""
    events: list[tuple[int, int]] = []
    begun = threading.Event()
    parsed = HttpProtocol.on_headers_complete

    def noting(self: HttpProtocol) -> None:
        parsed(self)
        events.append((self.client[1] if self.client else 0, len(self.pipeline)))
        begun.set()

    monkeypatch.setattr(HttpProtocol, "on_headers_complete", noting)
    count = 5000
    flood, other = _connect(roomy), _connect(roomy)
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    data = b"".join(b"GET /nope%d HTTP/1.1\r\n%s\r\n" % (i, host) for i in range(count))
    sender = threading.Thread(target=flood.sendall, args=(data,), daemon=True)  # the server reads it as it can
    sender.start()
    assert begun.wait(GUARD_S)
    other.sendall(b"GET /_emulator/health HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n")
    (health,) = _answers(other, 1)  # the flood is not read until then: its answers wait
    assert health.startswith(b"HTTP/1.1 200 ")
    answers = _answers(flood, count)
    sender.join(GUARD_S)
    mine, theirs = flood.getsockname()[1], other.getsockname()[1]
    flood.close()
    other.close()
    for i, answer in enumerate(answers):  # each its own request's answer, in the order they were sent
        assert answer.startswith(b"HTTP/1.1 404 ") and b'"Invalid URL (GET /nope%d)"' % i in answer, answer
    order = [port for port, _ in events]
    assert order.count(mine) == count and order.count(theirs) == 1
    last_of_flood = len(order) - 1 - order[::-1].index(mine)
    assert order.index(theirs) < last_of_flood  # parsed while the flood was, not after it all
    assert max(waiting for port, waiting in events if port == mine) <= PIPELINE_DEPTH


def test_a_body_of_tiny_chunks_is_parsed_a_bounded_step_at_a_time(
    roomy: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create whose body comes in one-byte chunks: each chunk is a piece of body, a call of the
    parser's and of the server's, and the code before parsed a whole read (up to 256 KiB, some 43,000
    pieces) in one step of the event loop, every other client waiting (0.7 s for a 2 MB body; issue
    38). The server's loop is held while the client fills the socket, so the first read is large;
    then the pieces parsed between two steps of the loop (a callback of the test's runs once a step)
    are counted. The body still arrives whole, and the kept connection serves the next request."""
    events: list[str] = []
    headed, filled = threading.Event(), threading.Event()
    parsed, noted = HttpProtocol.on_body, HttpProtocol.on_headers_complete

    def piece(self: HttpProtocol, body: bytes) -> None:
        events.append("piece")
        parsed(self, body)

    def head(self: HttpProtocol) -> None:
        noted(self)
        headed.set()

    monkeypatch.setattr(HttpProtocol, "on_body", piece)
    monkeypatch.setattr(HttpProtocol, "on_headers_complete", head)
    payload = json.dumps(
        {"model": "m", "input": "```js\ntext('tiny chunks')\n```", "instructions": "a" * 120_000, "store": False}
        | {"tools": [{"type": "programmatic_tool_calling"}]}
    ).encode()
    chunks = b"".join(b"1\r\n" + payload[i : i + 1] + b"\r\n" for i in range(len(payload))) + b"0\r\n\r\n"
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    sock = _connect(roomy)
    head = b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\n" + host + head)
    assert headed.wait(GUARD_S)
    loop = roomy.loop
    assert loop is not None
    ticking = True

    def tick() -> None:
        events.append("tick")
        if ticking:
            loop.call_soon(tick)

    def hold() -> None:  # the loop waits for the socket to fill: the next read is as large as it holds
        assert filled.wait(GUARD_S)
        tick()

    def send() -> None:
        sent = 0
        with contextlib.suppress(BlockingIOError):  # until the socket's buffers are full
            while sent < len(chunks):
                sent += sock.send(chunks[sent:], socket.MSG_DONTWAIT)
        filled.set()
        sock.sendall(chunks[sent:])

    loop.call_soon_threadsafe(hold)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    (created,) = _answers(sock, 1)
    sender.join(GUARD_S)
    sock.sendall(b"GET /_emulator/health HTTP/1.1\r\n" + host + b"\r\n")
    (health,) = _answers(sock, 1)
    ticking = False
    sock.close()
    assert created.startswith(b"HTTP/1.1 200 ") and b"tiny chunks" in created, created[:500]
    assert health.startswith(b"HTTP/1.1 200 "), health[:300]
    runs = "".join("p" if event == "piece" else " " for event in events).split()
    assert sum(map(len, runs)) == len(payload)
    # A step parses slices until it has passed the budget; the step that parses the last bytes held
    # resumes reading, and the next read may be parsed in the same turn of the loop: two steps at most.
    most = 2 * (PIECES_PER_STEP + CHUNKED_FEED_BYTES // len(b"1\r\nx\r\n") + 1)
    assert max(map(len, runs)) <= most, f"{max(map(len, runs))} pieces in one step of the loop"


# ---- refusals within a body, bodies the server does not read, bodies of many slices -------------


@pytest.mark.parametrize("bad", ["trailers", "chunk size"])
@pytest.mark.parametrize("before", ["health", "create"])
def test_a_body_refused_after_pipelined_requests_is_sent_after_their_answers(
    ptc_emulator: PTCEmulator, bad: str, before: str
) -> None:
    """A refusal found within a body (trailers past the bound, a chunk size that is not hex) was
    written at once and the connection closed: the answers of the requests before it, pipelined in
    the same write, were lost. They come first now, in order, then the refusal."""
    netloc = urlsplit(ptc_emulator.server_url).netloc
    one = _head(ptc_emulator, "/_emulator/health") + b"\r\n"
    if before == "create":  # a request whose app takes a while before the ones after it
        payload = json.dumps({"items": [{"type": "message", "role": "user", "content": "hi"}]}).encode()
        one = (
            f"POST /v1/conversations HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload
    chunks = b"2\r\n{}\r\n0\r\nX-Trailer: " + b"a" * 80_000 + b"\r\n\r\n" if bad == "trailers" else b"zz\r\n{}\r\n"
    status, _, body = _exchange(ptc_emulator, one * 3 + _chunked(ptc_emulator, chunks))
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", status + b"\r\n\r\n" + body)
    assert statuses == [b"200"] * 3 + [b"431" if bad == "trailers" else b"400"], statuses


def test_a_response_before_its_body_has_come_closes_the_connection(ptc_emulator: PTCEmulator) -> None:
    """The 413 for a `Content-Length` past the limit is sent before the body is read: the server
    then read the body on (discarding it, 4.2 GB in 10 s) to find the next request. The answer now
    says `connection: close` and the connection is closed."""
    parts = urlsplit(ptc_emulator.server_url)
    head = (
        f"POST /v1/conversations HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {10**12}\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname or "", parts.port or 80)) as sock:
        sock.settimeout(GUARD_S)
        sock.sendall(head + b" " * 65536)
        (answer,) = _answers(sock, 1)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert b"\r\nconnection: close\r\n" in answer.partition(b"\r\n\r\n")[0].lower() + b"\r\n", answer[:300]
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(65536) == b""  # closed (old code: kept open, the guard ran out)


def test_chunks_of_one_byte_behind_long_extensions_are_the_431_early(ptc_emulator: PTCEmulator) -> None:
    """Chunks of one byte each behind 8,000 bytes of extension: each slice held a piece of body, so
    the bound between two pieces never met, and framing never fills the body's buffer, so the server
    read on at full speed (1.2-1.7 GB in 10 s). A chunked body's framing in all is bounded by its body."""
    parts = urlsplit(ptc_emulator.server_url)
    chunk = b"1;x=" + b"e" * 8000 + b"\r\n \r\n"
    sent, received = 0, b""
    with socket.create_connection((parts.hostname or "", parts.port or 80)) as sock:
        sock.settimeout(GUARD_S)  # a guard for the old code, which took all it was sent
        sock.sendall(_chunked(ptc_emulator, b""))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < 8 * 2**20:
                sock.sendall(chunk * 16)
                sent += 16 * len(chunk)
        assert sent < 8 * 2**20, "the server took 8 MiB of framing for a 1 KiB body"
        with contextlib.suppress(ConnectionResetError):
            while data := sock.recv(65536):
                received += data
    status, _, body = received.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 431 "), received[:300]
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_fields_too_large", error
    assert "16 bytes for each byte of its body" in error["message"], error


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_of_empty_lines_is_parsed_in_few_slices_a_bounded_step_at_a_time(
    roomy: EmulatorServer, monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    """A body of `\\r\\n\\r\\n` repeated (JSON's whitespace): a read was cut at every head end, even
    within a `Content-Length` body, and all its slices (thousands of 4 bytes) parsed in one step of
    the event loop, other clients waiting (1.8 s for 16 MiB). A `Content-Length` body is now cut by
    its length alone; a chunked body (whose end the server does not know) is still cut at its head
    ends, but a step parses `SLICES_PER_STEP` at most. As the tiny chunks' test: the loop is held
    while the client fills the socket, and the slices parsed between two steps are counted."""
    events: list[str] = []
    headed, filled = threading.Event(), threading.Event()
    parse, noted = HttpProtocol._parse, HttpProtocol.on_headers_complete

    def sliced(self: HttpProtocol, data: bytes) -> None:
        events.append("slice")
        parse(self, data)

    def head(self: HttpProtocol) -> None:
        noted(self)
        headed.set()

    monkeypatch.setattr(HttpProtocol, "_parse", sliced)
    monkeypatch.setattr(HttpProtocol, "on_headers_complete", head)
    payload = b"\r\n\r\n" * 2**18 + b"{}"  # 1 MiB
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    head_bytes = b"POST /v1/conversations HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
    if framing == "length":
        head_bytes += b"Content-Length: %d\r\n\r\n" % len(payload)
        body = payload
    else:
        head_bytes += b"Transfer-Encoding: chunked\r\n\r\n"
        pieces = (payload[i : i + 2**16] for i in range(0, len(payload), 2**16))
        body = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces)
        body += b"0\r\n\r\n"
    sock = _connect(roomy)
    sock.sendall(head_bytes)
    assert headed.wait(GUARD_S)
    loop = roomy.loop
    assert loop is not None
    ticking = True

    def tick() -> None:
        events.append("tick")
        if ticking:
            loop.call_soon(tick)

    def hold() -> None:
        assert filled.wait(GUARD_S)
        tick()

    def send() -> None:
        sent = 0
        with contextlib.suppress(BlockingIOError):
            while sent < len(body):
                sent += sock.send(body[sent:], socket.MSG_DONTWAIT)
        filled.set()
        sock.sendall(body[sent:])

    loop.call_soon_threadsafe(hold)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    (created,) = _answers(sock, 1)
    sender.join(GUARD_S)
    ticking = False
    sock.close()
    assert created.startswith(b"HTTP/1.1 200 "), created[:500]
    runs = "".join("s" if event == "slice" else " " for event in events).split()
    if framing == "length":  # cut by its length: a slice of FEED_BYTES at most, or a read's end
        assert sum(map(len, runs)) <= 4 * len(payload) // 2**16 + 8, sum(map(len, runs))
    assert max(map(len, runs)) <= 2 * SLICES_PER_STEP, f"{max(map(len, runs))} slices in one step of the loop"


def test_an_upgrade_to_another_protocol_is_refused_not_served_without_its_body(ptc_emulator: PTCEmulator) -> None:
    """`Connection: Upgrade` with `Upgrade: h2c` (what an HTTP/2 client sends over plain HTTP): the
    parser reads no body after such a head, and the code before served the request without it (a
    create answered "could not parse the JSON body"). It is refused in the envelope and closed."""
    body = json.dumps({"model": "m", "input": "hi"}).encode()
    head = _head(ptc_emulator, "/v1/responses").replace(b"GET ", b"POST ", 1)
    status, headers, answer = _exchange(
        ptc_emulator,
        head + b"Content-Type: application/json\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
    )
    assert status.startswith(b"HTTP/1.1 400 "), (status, answer[:300])
    error = json.loads(answer)["error"]
    assert "Upgrade to another protocol is not supported" in error["message"], error
    assert headers["connection"] == "close"


def test_an_upgrade_to_another_protocol_behind_pipelined_requests_comes_after_their_answers(
    roomy: EmulatorServer,
) -> None:
    """The code before answered the request with the Upgrade and never read what followed it: the
    third request hung until the keep-alive closed the connection."""
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    health = b"GET /_emulator/health HTTP/1.1\r\n" + host
    sock = _connect(roomy)
    sock.sendall(health + b"\r\n" + health + b"Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n" + health + b"\r\n")
    first, refused = _answers(sock, 2)
    assert first.startswith(b"HTTP/1.1 200 "), first[:200]
    assert refused.startswith(b"HTTP/1.1 400 ") and b"Upgrade to another protocol" in refused, refused[:300]
    assert sock.recv(65536) == b""  # closed: the request after it is not served
    sock.close()


@pytest.mark.parametrize("shape", ["data-of-last-chunks", "chunks-of-a-crlf", "size-lines-past-a-slice"])
def test_a_chunked_body_whose_data_looks_like_its_end_is_fed_in_full_slices(
    roomy: EmulatorServer, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """A chunked body's slices were cut at the first head end from the slice's first `\\n0`, which
    the chunks' data could hold: 64 KiB chunks of `\\n0\\r\\n\\r\\n` repeated, or chunks written
    `02\\r\\n\\r\\n\\r\\n` (a CRLF as the data), cut every read into slices of a few bytes (an 8 MB body
    took 3.2 s of the server's CPU against 0.4 s framed plainly). The chunks are walked now, their
    data skipped: the slices fed stay within a small multiple of the body's size over
    `CHUNKED_FEED_BYTES`, and the pipelined requests after the body are answered, no more than
    `PIPELINE_DEPTH` queued."""
    slices: list[int] = []
    queued: list[int] = []
    parse = HttpProtocol._parse

    def sliced(self: HttpProtocol, data: bytes) -> None:
        slices.append(len(data))
        parse(self, data)
        queued.append(len(self.pipeline))

    monkeypatch.setattr(HttpProtocol, "_parse", sliced)
    if shape == "data-of-last-chunks":
        data = b"\n0\r\n\r\n" * (2**16 // 6)
        body = (b"%x\r\n" % len(data) + data + b"\r\n") * 16
    elif shape == "chunks-of-a-crlf":
        body = b"02\r\n\r\n\r\n" * (2**20 // 8)
    else:  # a size line longer than a slice, its size read across slices
        body = (b"02\r\n\r\n\r\n" * 20000 + b"0" * 9000 + b"2;x=" + b"e" * 9000 + b"\r\n\r\n\r\n") * 4
    body += b"2\r\n{}\r\n0\r\n\r\n"
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    head = b"POST /v1/conversations HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
    health = b"GET /_emulator/health HTTP/1.1\r\n" + host + b"\r\n"
    sock = _connect(roomy)
    try:
        sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + body + health * 100)
        created, *healthy = _answers(sock, 101)
    finally:
        sock.close()
    assert created.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 400 ")), created[:500]
    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in healthy)
    assert max(queued) <= PIPELINE_DEPTH
    assert len(slices) <= 4 * len(body) // CHUNKED_FEED_BYTES + 64, f"{len(slices)} slices for {len(body)} bytes"


_WS_HEADS = b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" + (
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


def test_a_websocket_upgrade_behind_pipelined_requests_comes_after_their_answers_refused(
    roomy: EmulatorServer,
) -> None:
    """A WebSocket upgrade sent in one write behind a request not yet answered: the code before sent
    the 101 ahead of that answer, which then came inside the socket as a frame (or, behind a POST,
    the answer was lost though its request had run). Now the earlier answer comes first, then the
    upgrade's refusal in the envelope, and the connection is closed."""
    host = f"Host: 127.0.0.1:{roomy.port}\r\n".encode()
    sock = _connect(roomy)
    sock.sendall(
        b"GET /_emulator/health HTTP/1.1\r\n"
        + host
        + b"\r\n"
        + b"GET /v1/responses HTTP/1.1\r\n"
        + host
        + _WS_HEADS
        + b"\r\n"
    )
    first, refused = _answers(sock, 2)
    assert first.startswith(b"HTTP/1.1 200 ") and b'"status":"ok"' in first, first[:300]
    assert refused.startswith(b"HTTP/1.1 400 "), refused[:300]
    assert b"behind requests not yet answered" in refused and b'"error"' in refused, refused[:400]
    assert sock.recv(65536) == b""
    sock.close()


@pytest.mark.parametrize(
    ("line", "body", "why"),
    [
        (b"POST /v1/responses HTTP/1.1", b'{"model":"m"}', b"an upgrade is an HTTP/1.1 GET"),
        (b"GET /v1/responses HTTP/1.0", b"", b"an upgrade is an HTTP/1.1 GET"),
        (b"GET /v1/responses HTTP/1.1", b"{}", b"an upgrade has no body"),
    ],
)
def test_a_websocket_upgrade_that_is_no_get_without_a_body_is_refused_in_the_envelope(
    ptc_emulator: PTCEmulator, line: bytes, body: bytes, why: bytes
) -> None:
    """The WebSocket layer refused these in `text/plain` (a POST, a GET with a body), or opened the
    socket (HTTP/1.0, which RFC 6455 does not allow)."""
    head = line + b"\r\nHost: " + urlsplit(ptc_emulator.server_url).netloc.encode() + b"\r\n" + _WS_HEADS
    if body:
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    status, headers, answer = _exchange(ptc_emulator, head + b"\r\n" + body)
    assert status.endswith(b" 400 Bad Request"), (status, answer[:300])
    assert headers["content-type"] == "application/json" and why in answer, answer[:300]
