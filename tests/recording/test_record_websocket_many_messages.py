"""An upstream WebSocket that sends many small messages at once: the proxy lets the event loop in
while it passes them on (issue 38: 200,000 small `response.in_progress` events held every client
about 8 s).

The websockets library fed a whole socket read to its parser and queued every message in it, and
the proxy's relay took queued messages without a suspension; compressed, alike small messages take
a few bytes each, so one read held thousands. Nothing is timed: the fake upstream writes all its
messages in one write, and the test counts the loop's turns (a callback that puts itself back on
the loop each time it runs) while the proxy passes them on. Before, it ran about once per read (a
few times); now about once per `RELAY_YIELD_EVERY` messages. The messages the library queues
between two turns are counted too: a read is parsed a slice at a time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.messages import Assembler

from ptc_emulator.api import proxy
from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import ws_upstream

MANY = 10_000


def _event(kind: str, status: str, output: list[Any]) -> str:
    response = {"id": "resp_many", "object": "response", "status": status, "model": "gpt-x", "output": output}
    return json.dumps({"type": kind, "response": response})


def test_many_small_upstream_messages_give_the_loop_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from websockets.sync.client import connect

    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
    message["content"] = [{"type": "output_text", "text": "done", "annotations": []}]
    events = [
        _event("response.created", "in_progress", []),
        *[_event("response.in_progress", "in_progress", [])] * MANY,
        _event("response.completed", "completed", [message]),
    ]

    async def flood(socket: Any) -> None:
        await socket.recv()
        for text in events:  # queued, then written in one go: the proxy reads them in a few reads
            socket.protocol.send_text(text.encode())
        socket.send_data()
        await socket.wait_closed()

    turns = {"now": 0, "by the last": -1, "messages": 0, "queued": 0, "most queued in a turn": 0}
    real = proxy._parsed
    put = Assembler.put

    def queued(self: Assembler, frame: Any) -> None:
        turns["queued"] += 1
        turns["most queued in a turn"] = max(turns["most queued in a turn"], turns["queued"])
        put(self, frame)

    def turn(loop: asyncio.AbstractEventLoop) -> None:
        turns["now"] += 1
        turns["queued"] = 0
        if turns["by the last"] < 0:
            loop.call_soon(turn, loop)

    async def parsed(data: bytes) -> Any:
        turns["messages"] += 1
        if turns["messages"] == 1:
            asyncio.get_running_loop().call_soon(turn, asyncio.get_running_loop())
        if b"response.completed" in data:
            turns["by the last"] = turns["now"]
        return await real(data)

    monkeypatch.setattr(proxy, "_parsed", parsed)
    monkeypatch.setattr(Assembler, "put", queued)
    with ws_upstream(flood) as url, recorder(tmp_path, url, tmp_path / "recordings", mode="all") as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses", max_size=None) as socket:
            socket.send(json.dumps({"type": "response.create", "model": "gpt-x", "input": "many"}))
            got = 0
            while True:
                kind = json.loads(socket.recv(timeout=120))["type"]
                got += 1
                if kind == "response.completed":
                    break
        assert got == MANY + 2
        health = httpx.get(rec.server_url.removesuffix("/v1") + "/_emulator/health", timeout=60)
        assert health.status_code == 200
    # One turn per 16 messages now (so about 600); before, one per read of the socket (a few).
    assert turns["by the last"] >= MANY // 64, f"the loop had {turns['by the last']} turns in {MANY} messages"
    # A read is parsed a slice at a time (at most 512 messages); before, whole (thousands at once).
    assert turns["most queued in a turn"] <= 1024, turns
