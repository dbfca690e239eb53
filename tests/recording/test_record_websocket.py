"""Recording over WebSocket mode (`client.responses.connect()`): frames pass through both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptc_emulator.testing.server import PTCEmulator
from tests.recording.recording_support import client, journal, recorder, replayer, upstream
from tests.recording.test_record_replay import PARCEL_QUESTION, PARCEL_TOOLS, PARCELS, recorded
from tests.streaming.streaming_support import SERVER_EVENT, TERMINAL, check_event, check_stream

Event = dict[str, Any]


def read_response(conn: Any) -> Event:
    """The final response of the next response's events, each validated by the SDK's models."""
    events: list[Event] = []
    while True:
        event: Event = json.loads(conn.recv_bytes())
        check_event(event, SERVER_EVENT)
        assert event["type"] != "error", event
        events.append(event)
        if event["type"] in TERMINAL:
            return check_stream(events, SERVER_EVENT)


def answers(output: list[Event], status: str) -> list[Event]:
    return [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": json.dumps({"id": json.loads(item["arguments"])["id"], "status": status}),
            "caller": item.get("caller"),
        }
        for item in output
        if item["type"] == "function_call"
    ]


def socket_loop(view: PTCEmulator, *, store: bool, status: str = "shipped") -> list[Event]:
    """The parcels conversation on one socket: chained (store) or replaying every item."""
    finals: list[Event] = []
    items: list[Event] = [{"role": "user", "content": PARCEL_QUESTION}]
    outputs: list[Event] = []
    with client(view).responses.connect() as conn:
        while True:
            if store and finals:
                params: dict[str, Any] = {"previous_response_id": finals[-1]["id"], "input": outputs}
            elif store:
                params = {"input": PARCEL_QUESTION}
            else:
                params = {"input": items, "store": False}
            conn.response.create(model="gpt-test", tools=PARCEL_TOOLS, **params)
            finals.append(read_response(conn))
            outputs = answers(finals[-1]["output"], status)
            if not outputs:
                return finals
            items = [*items, *finals[-1]["output"], *outputs]
            assert len(finals) < 10


def text_of(final: Event) -> str:
    return str(final["output"][-1]["content"][0]["text"])


def test_a_socket_conversation_is_recorded_and_replays_over_a_socket(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            live = socket_loop(rec, store=False)
            seen = len(journal(up, len(live)))
            # Recorded now: the next conversation on a socket is played here (mode new).
            local = socket_loop(rec, store=True)
            assert len(journal(up, seen)) == seen == 4
        assert [f["id"] for f in live] == [e["response_id"] for e in up.journal]
        assert all(e["method"] == "WS" for e in up.journal)
    assert len(live) == 4 and text_of(live[-1]) == "3 parcels: P1 shipped; P2 shipped; P3 shipped."
    assert text_of(local[-1]) == text_of(live[-1])
    [text] = recorded(cassettes).values()
    assert "{{ data.summary }}" in text
    with replayer(tmp_path, cassettes) as rep:
        assert text_of(socket_loop(rep, store=True, status="lost")[-1]) == "3 parcels: P1 lost; P2 lost; P3 lost."


def test_a_chained_socket_conversation_records_the_same_file(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes, mode="all") as rec:
            socket_loop(rec, store=False)
            first = recorded(cassettes)
            socket_loop(rec, store=True)
        assert len(journal(up, 8)) == 8
    assert recorded(cassettes) == first
