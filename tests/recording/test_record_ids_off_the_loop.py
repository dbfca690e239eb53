"""What the recording proxy does with each upstream event runs off the event loop when the event is
long: the ids a response lists (noted so that a request continuing it goes upstream) and the key taken
out of a long binary WebSocket message. Shown by recording whether the work ran with an event loop
running in its thread, not by timing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api import proxy
from ptc_emulator.emulator.model.upstream import redaction
from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import raw_upstream, ws_upstream
from tests.recording.test_record_key_redacted import CREATE, KEY, _keyed
from tests.recording.test_record_second_end import QUESTION, _sse, response


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Watched(list):  # type: ignore[type-arg]
    """A response's `output` that notes, each time it is walked, whether that was on the event loop."""

    walks: list[bool] = []

    def __iter__(self) -> Any:
        _Watched.walks.append(_on_loop())
        return super().__iter__()

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            _Watched.walks.append(_on_loop())
        return super().__getitem__(index)


def test_a_long_output_is_walked_for_its_ids_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, each lifecycle event's whole `output` was walked on the event loop to note its ids
    (`_note_ids`); a list longer than a step is walked in a worker thread now, and its ids are
    still noted: a request for one of them goes upstream."""
    many = 12_288  # three of the proxy's steps (`_NOTE_STEP`)
    end = response("completed")
    end["output"] = [*end["output"], *({"type": "reasoning", "id": f"rs_{i}", "summary": []} for i in range(many))]
    said = [
        {"type": "response.created", "sequence_number": 0, "response": {**response("in_progress"), "output": []}},
        {"type": "response.completed", "sequence_number": 1, "response": end},
    ]
    real = proxy._json

    def parse(body: bytes) -> Any:
        found = real(body)
        output = found.get("response", {}).get("output") if isinstance(found, dict) else None
        if isinstance(output, list) and len(output) > 4_096:
            found["response"]["output"] = _Watched(output)
        return found

    monkeypatch.setattr(proxy, "_json", parse)
    _Watched.walks = []
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, tmp_path / "recordings") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            answer = http.post("/responses", json={**QUESTION, "stream": True})
            assert answer.status_code == 200 and f"rs_{many - 1}" in answer.text
    assert _Watched.walks and not any(_Watched.walks), _Watched.walks


def test_a_long_binary_message_has_the_key_taken_out_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the key was taken out of a binary WebSocket message whole on the event loop (60 MB:
    half a second, every client waiting); a long one is done in a worker thread, and messages keep
    their order."""
    from websockets.sync.client import connect

    long = b"\xff" * proxy._OFF_LOOP_BYTES + KEY.encode() + b"\xfe"
    short = b"\xff" + KEY.encode()
    calls: list[tuple[int, bool]] = []
    real = redaction.RedactingBytes.__call__

    def redact(self: redaction.RedactingBytes, chunk: bytes) -> bytes:
        calls.append((len(chunk), _on_loop()))
        return real(self, chunk)

    monkeypatch.setattr(redaction.RedactingBytes, "__call__", redact)

    async def answer(socket: Any) -> None:
        await socket.recv()
        await socket.send(long)
        await socket.send(short)
        await socket.send(json.dumps({"type": "response.completed", "response": response("completed")}))
        await socket.wait_closed()

    with ws_upstream(answer) as url, _keyed(tmp_path, url, monkeypatch, mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses", max_size=2**24) as socket:
            socket.send(json.dumps({"type": "response.create", **CREATE}))
            first, second = socket.recv(timeout=60), socket.recv(timeout=60)
    assert first == b"\xff" * proxy._OFF_LOOP_BYTES + b"[redacted]\xfe"
    assert second == b"\xff[redacted]"
    long_calls = [on_loop for size, on_loop in calls if size >= proxy._OFF_LOOP_BYTES]
    assert long_calls and not any(long_calls), calls
