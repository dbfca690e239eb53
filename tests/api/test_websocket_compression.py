"""A long WebSocket message goes to the client uncompressed (issue h8b-1).

uvicorn compressed every message on the event loop in one step when the client offered
permessage-deflate (the websockets library, and so the SDK, does): one 16 MB message that
compresses badly held every client about a second, through the recording proxy as from the
emulator's own route. Now a message over `wsflow.COMPRESS_BYTES` is framed without compression
(RFC 7692 lets each message say whether it is compressed), the small ones as before; and the
proxy's socket to its upstream offers no compression, so no message is inflated on the loop, and
reads a long message a piece at a time in a worker thread (one `json.loads` held the interpreter).
Nothing is timed: the client's own inflater notes which frames came compressed (the RSV1 bit).
Before, the long message came compressed and the upstream socket negotiated permessage-deflate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets.sync.client
from websockets.extensions.permessage_deflate import PerMessageDeflate

from ptc_emulator.api import wsflow
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import jsonpieces, jsonreply
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import ws_upstream

LONG = 4 * wsflow.COMPRESS_BYTES


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, int, bool]]:
    """(the inflater, length, compressed) of each data frame any permessage-deflate inflater read."""
    seen: list[tuple[Any, int, bool]] = []
    decode = PerMessageDeflate.decode

    def noted(self: PerMessageDeflate, frame: Any, **options: Any) -> Any:
        result = decode(self, frame, **options)
        if frame.opcode.name in ("TEXT", "BINARY"):
            seen.append((self, len(result.data), bool(frame.rsv1)))
        return result

    monkeypatch.setattr(PerMessageDeflate, "decode", noted)
    return seen


def _received(ws: Any, decoded: list[tuple[Any, int, bool]]) -> list[tuple[int, bool]]:
    """(length, compressed) of each data frame the client `ws` received."""
    assert ws.protocol.extensions, "the client negotiated no compression"
    return [(length, compressed) for inflater, length, compressed in decoded if inflater in ws.protocol.extensions]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=Path(tmp_path_factory.mktemp("ws-compression")), pool_size=1)).start()
    yield server
    server.stop()


def test_a_long_event_from_the_emulator_goes_uncompressed(
    server: EmulatorServer, decoded: list[tuple[Any, int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    texts = jsonreply.texts

    def pieces(value: Any, **options: Any) -> list[str]:
        written.append(value.get("type", "") if isinstance(value, dict) else "")
        return texts(value, **options)

    monkeypatch.setattr(jsonreply, "texts", pieces)
    code = f"text('x'.repeat({LONG}))"
    with websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", max_size=None) as ws:
        request = {"model": "m", "input": program_message(code), "tools": PTC_TOOLS}
        ws.send(json.dumps({"type": "response.create", **request}))
        while True:
            event = json.loads(ws.recv(timeout=60))
            if event["type"] in ("error", "response.completed"):
                break
        frames_seen = _received(ws, decoded)
    assert event["type"] == "response.completed", event
    long = [compressed for length, compressed in frames_seen if length > wsflow.COMPRESS_BYTES]
    short = [compressed for length, compressed in frames_seen if length <= wsflow.COMPRESS_BYTES]
    assert long and not any(long), frames_seen  # before: compressed, on the event loop
    assert short and all(short), frames_seen  # the socket still compresses the small ones
    assert "response.completed" in written, written  # before: one json.dumps on the event loop


def test_a_long_upstream_message_is_relayed_uncompressed(
    tmp_path: Path, decoded: list[tuple[Any, int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pad = os.urandom(2 * LONG).hex()  # 1 MiB that compresses badly
    pauses: list[int] = []
    between = jsonpieces.between

    def paused() -> None:
        pauses.append(1)
        between()

    monkeypatch.setattr(jsonpieces, "between", paused)
    upstream_extensions: list[Any] = []

    def event(kind: str, status: str, **extra: Any) -> str:
        response = {"id": "resp_long", "object": "response", "status": status, "model": "gpt-x", "output": []}
        return json.dumps({"type": kind, "response": response, **extra})

    async def answer(socket: Any) -> None:
        upstream_extensions.extend(socket.protocol.extensions)
        await socket.recv()
        await socket.send(event("response.created", "in_progress"))
        await socket.send(event("response.in_progress", "in_progress", pad=pad))
        await socket.send(event("response.completed", "completed"))
        await socket.wait_closed()

    with ws_upstream(answer) as url, recorder(tmp_path, url, tmp_path / "recordings", mode="all") as rec:
        socket_url = rec.server_url.replace("http", "ws", 1) + "/responses"
        with websockets.sync.client.connect(socket_url, max_size=None) as ws:
            ws.send(json.dumps({"type": "response.create", "model": "gpt-x", "input": "long"}))
            kinds = []
            while not kinds or kinds[-1] not in ("error", "response.completed"):
                kinds.append(json.loads(ws.recv(timeout=60))["type"])
            frames_seen = _received(ws, decoded)
    assert kinds == ["response.created", "response.in_progress", "response.completed"], kinds
    assert upstream_extensions == [], upstream_extensions  # before: permessage-deflate, inflated on the loop
    long = [compressed for length, compressed in frames_seen if length > wsflow.COMPRESS_BYTES]
    short = [compressed for length, compressed in frames_seen if length <= wsflow.COMPRESS_BYTES]
    assert long == [False], frames_seen  # before: compressed again for the client, on the event loop
    assert short and all(short), frames_seen
    assert pauses, "the long message was read in one json.loads call"  # before: one call, holding the interpreter
