"""WebSocket mode's lanes, through the official Python SDK's `client.responses.connect()`, as the
SDK's WebSocket README documents the hosted mode: named lanes (`stream_id`) play at once and
their events interleave, each lane in order without overlap; 16 responses play at once per
connection and further creates wait; 32 distinct named lanes; the four error codes; the eviction
rule; a connection lifetime.

What decides the order here is a response the test holds: a turn with a latency far beyond any
test (it never ends on its own; closing the socket cancels it), so "lane B finished while lane A
was still playing" is an event, not a race.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.streaming.streaming_support import SERVER_EVENT, TERMINAL, check_stream, js
from tests.streaming.test_websocket import Event, receive

PTC = [{"type": "programmatic_tool_calling"}]
HOLD = {"match": {"input": "^hold"}, "turns": [{"message": "never", "fault": {"latency_ms": 600_000}}]}


@pytest.fixture
def conn(ptc_emulator: PTCEmulator) -> Iterator[Any]:
    ptc_emulator.add_scenario(HOLD)
    with ptc_emulator.client(max_retries=0).responses.connect() as connection:
        yield connection


def create(conn: Any, text: str, lane: str | None = None, **fields: Any) -> None:
    frame = {"type": "response.create", "model": "m", "input": text, "tools": PTC, **fields}
    if lane is not None:
        frame["stream_id"] = lane
    conn.send(frame)


def until(conn: Any, done: Any) -> list[Event]:
    events: list[Event] = []
    while not done(events):
        events.append(receive(conn))
    return events


def test_sixteen_responses_on_four_lanes_interleave_each_lane_in_order(conn: Any) -> None:
    # Lane a's first response is held (it never ends here), and lane a has three more behind it.
    create(conn, "hold this", "a")
    held = receive(conn)
    assert held["type"] == "response.created" and held["stream_id"] == "a"
    for n in range(1, 4):
        create(conn, js(f"text('a{n}')"), "a")
    lanes = ["b", "c", "d"]
    for n in range(4):
        for lane in lanes:
            create(conn, js(f"text('{lane}{n}: ' + await Promise.resolve({n}))"), lane)
    events = until(conn, lambda seen: sum(e["type"] == "response.completed" for e in seen) == 12)
    by_lane: dict[str, list[Event]] = collections.defaultdict(list)
    for event in events:
        by_lane[event["stream_id"]].append(event)  # every event names its lane
    for lane in lanes:
        finals = []
        current: list[Event] = []
        for event in by_lane[lane]:
            current.append(event)
            if event["type"] in TERMINAL:
                finals.append(check_stream(current, SERVER_EVENT))
                current = []
        # FIFO without overlap: one response's events, then the next's, in the order sent
        assert [f["output"][-1]["content"][0]["text"] for f in finals] == [f"{lane}{n}: {n}" for n in range(4)]
    # The lanes play at once, their events interleaved with the held response's (which is still
    # playing: no terminal event of lane a), and lane a's next three wait behind it.
    assert all(e["type"] not in TERMINAL for e in by_lane["a"])
    assert not any(e["type"] == "response.created" for e in by_lane["a"])


def test_a_held_lane_does_not_hold_the_others(conn: Any) -> None:
    create(conn, "hold this", "slow")
    created = receive(conn)
    assert created["type"] == "response.created" and created["stream_id"] == "slow"
    create(conn, js("text('quick')"), "quick")
    seen = until(conn, lambda seen: bool(seen) and seen[-1]["type"] in TERMINAL)
    quick = [e for e in seen if e["stream_id"] == "quick"]
    assert [e for e in seen if e["stream_id"] == "slow" and e["type"] in TERMINAL] == []  # still playing
    assert check_stream(quick, SERVER_EVENT)["output"][-1]["content"][0]["text"] == "quick"
    # the same lane waits: its second create plays only after its first, which never ends here
    create(conn, js("text('after the held one')"), "slow")
    create(conn, js("text('default lane')"))
    default = until(conn, lambda seen: bool(seen) and seen[-1]["type"] in TERMINAL)
    assert all("stream_id" not in e for e in default)  # the default lane's events omit it
    assert check_stream(default, SERVER_EVENT)["output"][-1]["content"][0]["text"] == "default lane"


def test_sixteen_play_at_once_and_the_seventeenth_waits(conn: Any) -> None:
    for n in range(15):
        create(conn, "hold this", f"held{n}")
    created = until(conn, lambda seen: sum(e["type"] == "response.created" for e in seen) == 15)
    assert {e["stream_id"] for e in created if e["type"] == "response.created"} == {f"held{n}" for n in range(15)}
    create(conn, js("text('sixteenth')"), "sixteenth")
    create(conn, js("text('seventeenth')"), "seventeenth")
    events = until(
        conn, lambda seen: any(e["type"] == "response.completed" and e["stream_id"] == "seventeenth" for e in seen)
    )
    order = [(e["stream_id"], e["type"]) for e in events if e["type"] in ("response.created", "response.completed")]
    # the seventeenth starts only when the sixteenth, the one active response that ends, has ended
    assert order.index(("seventeenth", "response.created")) > order.index(("sixteenth", "response.completed"))


@pytest.mark.ptc_strict(unused=False)  # the conn fixture's HOLD scenario is not needed here
def test_the_limits_and_their_error_codes(conn: Any) -> None:
    for bad in ("", "has space", "x" * 257, 7):
        create(conn, js("text('x')"), stream_id=bad)
        error = receive(conn)
        assert error["type"] == "error" and error["error"]["code"] == "invalid_stream_id", error
        assert error["error"]["param"] == "stream_id"
    for n in range(32):
        create(conn, js(f"text('{n}')"), f"lane{n}")
    until(conn, lambda seen: sum(e["type"] == "response.completed" for e in seen) == 32)
    create(conn, js("text('one too many')"), "lane32")
    error = receive(conn)
    assert error["type"] == "error" and error["error"]["code"] == "websocket_stream_limit_reached"
    assert error["stream_id"] == "lane32"  # a named lane's request error echoes its id
    create(conn, js("text('reused')"), "lane7")  # a lane already named still works
    assert (
        check_stream(until(conn, lambda s: bool(s) and s[-1]["type"] in TERMINAL), SERVER_EVENT)["status"]
        == "completed"
    )
    create(conn, js("text('x')"), "lane7", previous_response_id="resp_nowhere", store=False)
    error = receive(conn)
    assert error["error"]["code"] == "previous_response_not_found" and error["stream_id"] == "lane7"


@pytest.mark.ptc_strict(unused=False)  # the conn fixture's HOLD scenario is not needed here
def test_a_failed_continuation_on_its_own_lane_evicts_the_parent_a_fork_does_not(conn: Any) -> None:
    def parent(lane: str) -> str:
        create(conn, js("text('parent')"), lane, store=False)
        final = check_stream(until(conn, lambda s: bool(s) and s[-1]["type"] in TERMINAL), SERVER_EVENT)
        return str(final["id"])

    def child(lane: str, previous: str, **fields: Any) -> Event:
        create(conn, js("text('child')"), lane, previous_response_id=previous, store=False, **fields)
        return until(conn, lambda s: bool(s) and (s[-1]["type"] in TERMINAL or s[-1]["type"] == "error"))[-1]

    bad_tools = {"tools": [{"type": "function", "name": "bad name"}]}  # a 400 from the engine
    forked = parent("source")
    assert child("fork", forked, **bad_tools)["type"] == "error"  # an errored fork on another lane...
    assert child("source", forked)["type"] == "response.completed"  # ...keeps the parent for its lane
    same = parent("source")
    assert child("source", same, **bad_tools)["type"] == "error"  # an errored same-lane continuation...
    gone = child("source", same)
    assert gone["type"] == "error" and gone["error"]["code"] == "previous_response_not_found"  # ...evicts it


def test_a_connection_ends_when_its_lifetime_does(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, websocket_lifetime_s=0.5)
    server = EmulatorServer(settings).start()
    view = PTCEmulator(server.base_url)
    try:
        with view.client(max_retries=0).responses.connect() as connection:
            create(connection, js("text('before the end')"), "lane")
            events = until(connection, lambda s: bool(s) and s[-1]["type"] == "error")  # the end is an event
            assert events[-1]["error"]["code"] == "websocket_connection_limit_reached"
            assert "stream_id" not in events[-1]  # a connection-scoped error, on the default lane
    finally:
        view.close()
        server.stop()
