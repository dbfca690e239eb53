"""A message sent in fragments (a first frame with `fin` 0, then continuations) is joined as it
comes, and the frames one message may come in are bounded (docs/limits.md, WebSocket rows).

uvicorn kept every fragment in a list until the last: 1-byte fragments cost some 50 bytes resident
per byte of payload, and empty ones, which count for nothing against the message size limit, grew
the list for as long as the client sent them. What the server keeps is counted here (its
protocol's `frames`), once a ping sent after the fragments is answered: nothing is timed.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ptc_emulator.api.wsflow import MAX_FRAGMENTS, WebSocketProtocol
from ptc_emulator.emulator import messages
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def frame(opcode: int, payload: bytes = b"", *, fin: bool = True) -> bytes:
    """A masked client frame (the mask all zero: the payload goes as it is)."""
    size = len(payload)
    first = (0x80 if fin else 0) | opcode
    if size < 126:
        head = struct.pack("!BB", first, 0x80 | size)
    elif size < 65536:
        head = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, size)
    return head + b"\0\0\0\0" + payload


def exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def next_frame(sock: socket.socket) -> tuple[int, bytes]:
    first, second = exactly(sock, 2)
    size = second & 0x7F
    if size == 126:
        size = struct.unpack("!H", exactly(sock, 2))[0]
    elif size == 127:
        size = struct.unpack("!Q", exactly(sock, 8))[0]
    return first & 0x0F, exactly(sock, size)


def until(sock: socket.socket, *opcodes: int) -> tuple[int, bytes]:
    """The next frame of one of `opcodes` (the server's own keepalive pings passed over)."""
    while True:
        opcode, payload = next_frame(sock)
        if opcode in opcodes:
            return opcode, payload


@contextmanager
def opened(server: EmulatorServer) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(120)  # only so that a server that never answers fails the test, not hangs it
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        yield sock


def kept(server: EmulatorServer, sock: socket.socket) -> list[Any]:
    """What the server keeps of the message begun on `sock`, once all sent before is read."""
    sock.sendall(frame(PING, b"now"))
    assert until(sock, PONG) == (PONG, b"now")
    [protocol] = [p for p in server._server.server_state.connections if isinstance(p, WebSocketProtocol)]
    return list(protocol.frames)


def test_a_message_in_one_byte_fragments_is_kept_joined_and_answered(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    create = {"type": "response.create", "model": "m", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
    text = json.dumps(create).encode()
    with opened(server) as sock:
        sock.sendall(
            frame(TEXT, text[:1], fin=False)
            + b"".join(frame(CONT, text[i : i + 1], fin=False) for i in range(1, len(text) - 1))
        )
        held = kept(server, sock)
        assert len(held) == 1, f"{len(held)} fragments kept for a message of {len(text)} bytes"
        assert bytes(held[0]) == text[:-1]
        sock.sendall(frame(CONT, text[-1:]))
        while True:
            event = json.loads(until(sock, TEXT)[1])
            assert event["type"] != "error", event
            if event["type"] == "response.completed":
                break
        assert event["response"]["status"] == "completed"


def test_the_frames_of_one_message_are_bounded_empty_ones_counted(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    empty = frame(CONT, fin=False)
    with opened(server) as sock:
        sock.sendall(frame(TEXT, b"{", fin=False) + empty * (MAX_FRAGMENTS - 1))  # at the bound: still read
        held = kept(server, sock)
        assert len(held) == 1 and bytes(held[0]) == b"{", f"{len(held)} fragments kept"
        sock.sendall(empty)
        opcode, payload = until(sock, CLOSE)
        code, reason = struct.unpack("!H", payload[:2])[0], payload[2:].decode()
        assert (code, reason) == (1009, messages.socket_message_too_fragmented(MAX_FRAGMENTS))
        assert reason == f"A message may come in at most {MAX_FRAGMENTS} frames: send it whole or in fewer fragments."
        assert sock.recv(1) == b""  # and the connection is closed


def test_a_text_message_not_utf_8_is_closed_with_1007_and_not_logged_as_the_servers_error(
    make_server: Callable[..., EmulatorServer], caplog: Any
) -> None:
    """Before: the close came without a reason and the server logged a traceback at ERROR, as if its
    own fault; joined fragments are checked as one message (a character split across two is fine)."""
    server = make_server()
    with opened(server) as sock:  # a two-byte character split between fragments is still one message
        sock.sendall(frame(TEXT, b'{"type": "\xc3', fin=False) + frame(CONT, b'\xa9"}'))
        assert json.loads(until(sock, TEXT)[1])["type"] == "error"  # an unknown type, answered as such
        sock.sendall(frame(TEXT, b'{"type": "\xff"}'))
        opcode, payload = until(sock, CLOSE)
        code, reason = struct.unpack("!H", payload[:2])[0], payload[2:].decode()
        assert (code, reason) == (1007, messages.socket_text_not_utf8())
        assert reason == "A text message must be UTF-8."
        assert sock.recv(1) == b""
    assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]


def test_a_binary_message_not_utf_8_is_refused_as_not_json_and_the_socket_serves_on(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """Before: its bytes were decoded with U+FFFD in place of what did not decode, and the create
    played (`caf\ufffd` in its message), where the same bytes over HTTP are a 400. A binary
    message that is UTF-8 plays as the text it holds."""
    server = make_server()
    create = {"type": "response.create", "model": "m", "tools": PTC_TOOLS}
    latin1 = json.dumps({**create, "input": program_message("text('caf\u00e9')")}, ensure_ascii=False)
    with opened(server) as sock:
        sock.sendall(frame(BINARY, latin1.encode("latin-1")))
        error = json.loads(until(sock, TEXT)[1])
        assert error["type"] == "error", error
        assert error["error"]["message"] == messages.frame_not_json().message
        sock.sendall(frame(BINARY, latin1.encode("utf-8")))
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "error"):
            events.append(json.loads(until(sock, TEXT)[1]))
        done = events[-1]
        assert done["type"] == "response.completed", done
        assert done["response"]["output"][-1]["content"][0]["text"] == "caf\u00e9"


def test_a_binary_message_is_decoded_as_an_http_body_is(make_server: Callable[..., EmulatorServer]) -> None:
    """A body starting with a UTF-8 byte-order mark, or in UTF-16 or UTF-32, is accepted over HTTP
    (`json.detect_encoding`); the same bytes as a binary message were refused as not JSON. They
    play, as over HTTP."""
    server = make_server()
    create = {"type": "response.create", "model": "m", "tools": PTC_TOOLS}
    text = json.dumps({**create, "input": program_message("text('caf\u00e9')")}, ensure_ascii=False)
    bodies = [b"\xef\xbb\xbf" + text.encode("utf-8"), text.encode("utf-16"), text.encode("utf-16-le")]
    bodies.append(text.encode("utf-32"))
    with opened(server) as sock:
        for body in bodies:
            sock.sendall(frame(BINARY, body))
            events = []
            while not events or events[-1]["type"] not in ("response.completed", "error"):
                events.append(json.loads(until(sock, TEXT)[1]))
            done = events[-1]
            assert done["type"] == "response.completed", (body[:4], done)
            assert done["response"]["output"][-1]["content"][0]["text"] == "caf\u00e9"
