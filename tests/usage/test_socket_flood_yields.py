"""A flood of frames on one WebSocket is answered with the event loop turning between its frames
(issue 38): other clients are served meanwhile.

Before, a socket's frames were parsed a read at a time (up to 256 KiB: 3,000 small frames) and the
reader took each one already received without a suspension, so a flood's frames were answered back
to back in one step of the event loop; 20,000 create frames held every other client 0.3-3 s. The
test counts the server's event loop steps (a callback that puts itself back at each step) and
notes the step each frame of a flood sent in one write was parsed and dispatched in: at most two
frames may be dispatched in one step, and at most a slice's (`wsflow.FEED_BYTES`) parsed. Nothing
is timed; the old code dispatched over a thousand in one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from ptc_emulator.api import wsflow
from ptc_emulator.api.routes import websocket as websocket_route
from ptc_emulator.testing.server import EmulatorServer

FRAMES = 3000


def _frame(text: str) -> bytes:
    """A masked client text frame (an all-zero mask: the payload goes as it is)."""
    payload = text.encode()
    return struct.pack("!BB", 0x81, 0x80 | len(payload)) + b"\0\0\0\0" + payload


def _opened(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head[:200]
    return sock


@pytest.mark.parametrize(
    "text",
    [
        "x" * 100,  # each refused with `frame_not_json`
        '{"type":"response.create","model":"m","input":"hi","store":false,"generate":false}',  # 64 queued, then 429s
    ],
)
def test_a_flood_of_frames_is_answered_a_frame_a_step(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    server = make_server()
    loop = server.loop
    assert loop is not None
    steps = [0]
    stop = threading.Event()

    def step() -> None:
        steps[0] += 1
        if not stop.is_set():
            loop.call_soon(step)

    seen: list[int] = []
    all_seen = threading.Event()
    real = websocket_route.Session._dispatch

    async def dispatch(self: Any, data: str) -> None:
        seen.append(steps[0])
        if len(seen) == FRAMES:
            all_seen.set()
        await real(self, data)

    monkeypatch.setattr(websocket_route.Session, "_dispatch", dispatch)
    parsed: list[int] = []
    handed = wsflow.WebSocketProtocol.send_receive_event_to_app

    def hand(self: Any) -> None:
        parsed.append(steps[0])
        handed(self)

    monkeypatch.setattr(wsflow.WebSocketProtocol, "send_receive_event_to_app", hand)
    sock = _opened(server.port)

    def drain() -> None:  # the answers are read: the flood is not held back by backpressure
        with socket.socket(fileno=os.dup(sock.fileno())) as reader, contextlib.suppress(OSError):
            reader.settimeout(120)
            while reader.recv(1 << 20):
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    loop.call_soon_threadsafe(step)
    try:
        sock.sendall(_frame(text) * FRAMES)
        assert all_seen.wait(120), f"{len(seen)} of {FRAMES} frames dispatched"
    finally:
        stop.set()
        sock.close()
    most = Counter(seen).most_common(1)[0][1]
    assert most <= 2, f"{most} frames dispatched in one step of the event loop"
    slice_of = wsflow.FEED_BYTES // len(_frame(text)) + 1
    most = Counter(parsed).most_common(1)[0][1]
    assert most <= slice_of, f"{most} frames parsed in one step of the event loop"
