"""A client that sends pings and never reads cannot grow the server's memory (docs/limits.md,
"Memory"): uvicorn wrote each pong at once, and a write buffer nobody drained grew as fast as the
pings came. The server now stops reading such a socket until its pongs drain.

Nothing is timed: the client sends on a blocking socket; once the server stops reading, the
kernel's buffers fill and the send cannot finish (the socket's timeout ends it). Without the
bound, the server read on and all 64 MiB went through.
"""

from __future__ import annotations

import base64
import os
import socket
from urllib.parse import urlsplit

from ptc_emulator.testing.server import PTCEmulator

FLOOD_BYTES = 64 * 2**20


def test_a_client_that_floods_pings_and_never_reads_is_not_read_on(ptc_emulator: PTCEmulator) -> None:
    parts = urlsplit(ptc_emulator.server_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /v1/responses HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert sock.recv(12) == b"HTTP/1.1 101"
        ping = bytes([0x89, 0x80 | 125]) + b"\0\0\0\0" + b"p" * 125  # masked, the largest payload
        block = ping * 1024
        sock.settimeout(10)
        sent = 0
        try:
            while sent < FLOOD_BYTES:
                sock.sendall(block)
                sent += len(block)
        except TimeoutError:
            pass
        assert sent < FLOOD_BYTES, "the server read every ping while nobody read its pongs"
    assert isinstance(ptc_emulator.journal, list)  # the server answers others all the while
