"""What a connection may send before the app sees a request (docs/limits.md, "Requests").

uvicorn kept a request's head whole however long it grew: one client sending a header value that
never ended had the server hold every byte of it. A head past the bound is now the 431 in OpenAI's
envelope and the connection is closed; bytes the parser cannot read are the 400 in the envelope.

Nothing is timed: the client sends the head's bytes exactly to one past the bound, so the server has
read everything sent when it answers, and the client reads until the server closes.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from ptc_emulator.api.httpflow import HEAD_BYTES
from ptc_emulator.testing.server import PTCEmulator


def _exchange(ptc_emulator: PTCEmulator, data: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """`data` sent on a connection of its own, then all the server writes before it closes."""
    parts = urlsplit(ptc_emulator.server_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.settimeout(60)  # a guard for the old code, which never answered: not a measure
        sock.sendall(data)
        received = b""
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
