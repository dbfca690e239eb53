"""A client's long compressed WebSocket frame is inflated off the event loop.

The frame parser inflated a permessage-deflate frame (which the websockets library, and so the SDK,
offers) on the event loop in one step: 16 MiB, the message limit, from a few KiB of text that
compresses well, every other client waiting. Now the slice of the read that ends a compressed frame
of over `wsflow.INFLATE_ON_LOOP` bytes is parsed in a worker thread; short frames as before.

Nothing is timed: the server's inflater notes whether each frame was inflated on a thread running
an event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets.sync.client
from websockets.extensions.permessage_deflate import PerMessageDeflate

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer

LONG = 4 * 2**20
"""A message of 4 MiB that deflates to some 4 KiB."""
SHORT_FRAME = 1024
"""`wsflow.INFLATE_ON_LOOP`: a compressed frame this long or shorter is inflated on the loop."""
PROGRAM = "\n```js\ntext('ok')\n```"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("ws-inflation")), store="memory", pool_size=1)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


@pytest.fixture
def inflated(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, int, int, bool]]:
    """(the inflater, bytes sent, bytes inflated, on an event loop's thread) of each compressed data
    frame any permessage-deflate inflater read."""
    seen: list[tuple[Any, int, int, bool]] = []
    decode = PerMessageDeflate.decode

    def noted(self: PerMessageDeflate, frame: Any, **options: Any) -> Any:
        result = decode(self, frame, **options)
        if frame.opcode.name in ("TEXT", "BINARY", "CONT") and frame.rsv1:
            on_loop = asyncio._get_running_loop() is not None
            seen.append((self, len(frame.data), len(result.data), on_loop))
        return result

    monkeypatch.setattr(PerMessageDeflate, "decode", noted)
    return seen


def _create(ws: Any, text: str) -> list[str]:
    ws.send(json.dumps({"type": "response.create", "model": "gpt-5", "store": False, "input": text}))
    kinds: list[str] = []
    while not kinds or kinds[-1] not in ("error", "response.completed", "response.failed"):
        kinds.append(json.loads(ws.recv(timeout=120))["type"])
    return kinds


def test_a_long_compressed_frame_is_inflated_off_the_event_loop(
    server: EmulatorServer, inflated: list[tuple[Any, int, int, bool]]
) -> None:
    with websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", max_size=None) as ws:
        assert ws.protocol.extensions, "the client negotiated no compression"
        long_kinds = _create(ws, "x" * LONG + PROGRAM)
        short_kinds = _create(ws, PROGRAM)  # the socket reads on, in order, after the long frame
        mine = ws.protocol.extensions
    at_server = [(sent, size, on_loop) for inflater, sent, size, on_loop in inflated if inflater not in mine]
    assert long_kinds[-1] == short_kinds[-1] == "response.completed", (long_kinds, short_kinds)
    long = [on_loop for sent, size, on_loop in at_server if size > LONG]
    short = [on_loop for sent, size, on_loop in at_server if sent <= SHORT_FRAME]
    assert long == [False], at_server  # before: [True], all of it inflated on the event loop
    assert short and all(short), at_server  # a short frame is inflated on the loop, as before
