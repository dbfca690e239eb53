"""A stream on a real socket: keep-alive comments, a client that leaves, and SSE framing.

These use the `slow` server (keep-alive every 0.1 s, two workers, 300 s program deadline).
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import (
    ADD_TOOLS,
    SLOW_KEEPALIVE_S,
    SLOW_TIMEOUT_S,
    SLOW_WORKERS,
    check_stream,
    decode,
    js,
)

SPIN = "while (true) {}"


def _health(emulator: PTCEmulator) -> dict[str, Any]:
    reply = emulator.admin.get("/health")
    reply.raise_for_status()
    return dict(reply.json())


def _settled_workers(emulator: PTCEmulator, timeout: float = 10.0) -> list[int]:
    """The worker pids once the pool is back to full size (replacements are asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = list(_health(emulator)["workers"])
        if len(pids) == SLOW_WORKERS or time.monotonic() > deadline:
            return pids
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _post(emulator: PTCEmulator, http: httpx.Client, body: dict[str, Any]) -> Any:
    return http.stream(
        "POST",
        f"{emulator.base_url}/responses",
        json={**body, "stream": True},
        headers={**emulator.headers, "Authorization": f"Bearer {emulator.api_key}"},
    )


def test_keep_alive_comments_while_the_response_is_being_made(slow: PTCEmulator) -> None:
    delay_ms = 600
    slow.add_scenario(
        {"match": {"input": "(?i)take your time"}, "turns": [{"message": "done", "fault": {"latency_ms": delay_ms}}]}
    )
    with httpx.Client(timeout=30) as http, _post(slow, http, {"model": "emulated", "input": "take your time"}) as reply:
        assert reply.status_code == 200
        raw = reply.read()
    comments = raw.count(b": keep-alive\n\n")
    assert comments >= (delay_ms / 1000 / SLOW_KEEPALIVE_S) / 2, raw
    head, _, tail = raw.partition(b": keep-alive\n\n")
    assert [e["type"] for e in decode(head)] == ["response.created", "response.in_progress"], (
        "comments come after these"
    )
    assert b"response.completed" in tail
    final = check_stream(decode(raw))
    assert final["output"][0]["content"][0]["text"] == "done"
    client = slow.client(max_retries=0)
    with client.responses.stream(model="emulated", input="take your time") as stream:
        assert stream.get_final_response().output_text == "done"


def test_disconnect_cancels_the_program_and_replaces_its_worker(slow: PTCEmulator) -> None:
    before = _settled_workers(slow)
    assert len(before) == SLOW_WORKERS
    started = time.monotonic()
    with (
        httpx.Client(timeout=30) as http,
        _post(slow, http, {"model": "emulated", "input": js(SPIN), "tools": ADD_TOOLS}) as reply,
    ):
        assert reply.status_code == 200
        seen = b""
        for chunk in reply.iter_bytes():
            seen += chunk
            if seen.count(b": keep-alive") >= 2:  # the program is running
                break
    assert b"response.in_progress" in seen and b"response.completed" not in seen
    deadline = time.monotonic() + 120
    while True:
        after = _settled_workers(slow)
        if set(after) != set(before) and len(after) == SLOW_WORKERS:
            break
        assert time.monotonic() < deadline, f"the worker was not replaced: {before} -> {after}"
        time.sleep(0.02)
    assert time.monotonic() - started < SLOW_TIMEOUT_S / 2, "replaced by the program's deadline, not the disconnect"
    killed = set(before) - set(after)
    assert len(killed) == 1 and not any(_alive(pid) for pid in killed), "the cancelled worker must be gone"
    entry = slow.journal[-1]
    assert entry["status"] == 499 and entry["response"]["error"]["type"] == "client_closed_request"
    client = slow.client(max_retries=0)
    response = client.responses.create(model="emulated", input=js("text('still serving')"), tools=ADD_TOOLS)
    assert response.output_text == "still serving"
    assert len(_settled_workers(slow)) == SLOW_WORKERS


def test_sse_framing_survives_a_split_at_every_byte(slow: PTCEmulator) -> None:
    slow.add_scenario(
        {
            "match": {"input": "(?i)frame me"},
            "turns": [{"message": "Ünïcödé ✓ — 𝄞 ok\nsecond line", "fault": {"latency_ms": 250}}],
        }
    )
    with httpx.Client(timeout=30) as http, _post(slow, http, {"model": "emulated", "input": "frame me"}) as reply:
        raw = reply.read()
    assert b": keep-alive" in raw and "𝄞".encode() in raw
    whole = decode(raw)
    check_stream(whole)
    for cut in range(1, len(raw)):
        assert decode(iter([raw[:cut], raw[cut:]])) == whole, f"split at byte {cut}"
    assert decode(iter(raw[i : i + 1] for i in range(len(raw)))) == whole
