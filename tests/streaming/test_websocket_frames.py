"""WebSocket frames are validated like request bodies (a lone surrogate is an error event, not a
dropped socket), and the creates one socket may have waiting are bounded."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

from websockets.sync.client import connect

from ptc_emulator.api.routes.websocket import MAX_QUEUED_CHARS, MAX_QUEUED_CREATES
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message


def events_until(ws: Any, done: Callable[[dict[str, Any]], bool], limit: int = 10_000) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while len(seen) < limit:
        event = json.loads(ws.recv(timeout=60))
        seen.append(event)
        if done(event):
            return seen
    raise AssertionError(f"no matching event in {len(seen)}")


def test_a_steer_frame_with_a_lone_surrogate_is_an_error_event_and_the_socket_stays_open(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    url = server.base_url.replace("http://", "ws://") + "/responses"
    with connect(url) as ws:
        ws.send('{"type": "response.steer", "previous_response_id": "resp_x", "input": "\\ud800"}')
        [error] = events_until(ws, lambda e: e["type"] == "error")
        assert error["status"] == 400 and "surrogate" in error["error"]["message"], error
        ws.send("[" * 5000 + "]" * 5000)
        [error] = events_until(ws, lambda e: e["type"] == "error")
        assert error["status"] == 400 and "nested deeper" in error["error"]["message"], error
        create = {"type": "response.create", "model": "m", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
        ws.send(json.dumps(create))
        final = events_until(ws, lambda e: e["type"] == "response.completed")[-1]
        assert final["response"]["status"] == "completed"


def test_the_creates_waiting_on_one_socket_are_bounded(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server(limits=Limits(timeout_s=30))
    url = server.base_url.replace("http://", "ws://") + "/responses"
    spin = {"type": "response.create", "model": "m", "input": program_message("while (true) {}"), "tools": PTC_TOOLS}
    extra = 5
    with connect(url) as ws:
        # One plays, MAX_QUEUED_CREATES wait, the rest are refused at once.
        for _ in range(1 + MAX_QUEUED_CREATES + extra):
            ws.send(json.dumps(spin))
        refused = [
            e
            for e in events_until(
                ws,
                lambda e: e["type"] == "error" and e["error"]["code"] == "too_many_queued_requests",
            )
            if e["type"] == "error"
        ]
        for _ in range(extra - 1):
            refused += events_until(ws, lambda e: e["type"] == "error")[-1:]
        assert len(refused) == extra
        assert all(e["status"] == 429 and e["error"]["code"] == "too_many_queued_requests" for e in refused), refused
        wording = f"Too many response.create frames are waiting on this socket (at most {MAX_QUEUED_CREATES})"
        assert all(e["error"]["message"].startswith(wording) for e in refused), refused


def test_the_text_of_waiting_creates_is_bounded(make_server: Callable[..., EmulatorServer]) -> None:
    """Creates of a few MB each waiting on one socket are bounded by their text in all, not only by
    their count: 64 frames of 200,000 items each held some 4 GB parsed. One plays (held by its
    program), and those past MAX_QUEUED_CHARS waiting are refused at once."""
    server = make_server(limits=Limits(timeout_s=30))
    url = server.base_url.replace("http://", "ws://") + "/responses"
    spin = {"type": "response.create", "model": "m", "input": program_message("while (true) {}"), "tools": PTC_TOOLS}
    big = {"type": "response.create", "model": "m", "store": False, "input": "x" * (4 * 2**20)}
    fit = MAX_QUEUED_CHARS // len(json.dumps(big))
    with connect(url, max_size=None) as ws:
        ws.send(json.dumps(spin))
        for _ in range(fit + 2):
            ws.send(json.dumps(big))
        refused = events_until(ws, lambda e: e["type"] == "error")[-1]
        assert refused["status"] == 429 and refused["error"]["code"] == "too_many_queued_requests", refused
        wording = "Too many characters of response.create frames are waiting on this socket "
        wording += f"(at most {MAX_QUEUED_CHARS} in all)"
        assert refused["error"]["message"].startswith(wording), refused


def test_a_frame_holding_one_long_string_is_read_in_memory_linear_in_it(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """The frame's nesting is measured before it is parsed. That measure matched each string whole
    with a regular expression that kept a backtracking entry per character: a frame holding one
    2 MB string took some 300 MB, and held the interpreter (the event loop too) while it did. The
    server runs in this process, so its allocations are traced here; the frame's own copies
    (socket buffer, text, parsed value) take a few times its size."""
    server = make_server()
    url = server.base_url.replace("http://", "ws://") + "/responses"
    size = 2_000_000
    with connect(url, max_size=None) as ws:
        tracemalloc.start()
        try:
            ws.send(json.dumps({"type": "response.create", "model": 5, "input": "a" * size}))
            [error] = events_until(ws, lambda e: e["type"] == "error")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert "Invalid type for 'model'" in error["error"]["message"], error
        assert peak < 25 * size, f"{peak:,} bytes traced at the peak for a frame of {size:,}"
        create = {"type": "response.create", "model": "m", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
        ws.send(json.dumps(create))
        final = events_until(ws, lambda e: e["type"] == "response.completed")[-1]
        assert final["response"]["status"] == "completed"


def test_a_frame_that_is_not_an_object_is_the_invalid_type_http_gives(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """As an HTTP body that is not an object: before, an array or a string frame was answered
    "Missing required parameter: 'type'", as if an object had come without it. A large array is
    refused the same way (it used to reach a lookup of its `type` key)."""
    server = make_server()
    url = server.base_url.replace("http://", "ws://") + "/responses"
    frames = {
        "[1]": "an array",
        '"response.create"': "a string",
        "5": "an integer",
        "null": "null",
        json.dumps(["type", "x" * 2_000_000]): "an array",
    }
    with connect(url, max_size=None) as ws:
        for frame, got in frames.items():
            ws.send(frame)
            [error] = events_until(ws, lambda e: e["type"] == "error")
            assert error["status"] == 400, error
            assert error["error"] == {
                "message": f"Invalid type for 'body': expected an object, but got {got} instead.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_type",
            }
        create = {"type": "response.create", "model": "m", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
        ws.send(json.dumps(create))
        final = events_until(ws, lambda e: e["type"] == "response.completed")[-1]
        assert final["response"]["status"] == "completed"
