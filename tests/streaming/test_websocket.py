"""WebSocket mode through the official Python SDK's `client.responses.connect()`.

Every frame the emulator sends is validated strictly against the SDK's `ResponsesServerEvent`
union; each response's events must also pass the same stream checks as SSE.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect as ws_connect

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import (
    ADD_TOOLS,
    SERVER_EVENT,
    SLOW_WORKERS,
    TERMINAL,
    THREE_PAUSES,
    THREE_PAUSES_ANSWER,
    add_outputs,
    as_input,
    check_event,
    check_stream,
    decode,
    get_stream,
    js,
    post_stream,
)
from tests.support import ClientVersion

pytestmark = pytest.mark.sdk  # every frame, through the official client's connect() and its event union

Event = dict[str, Any]


def receive(conn: Any) -> Event:
    raw: Event = json.loads(conn.recv_bytes())
    check_event(raw, SERVER_EVENT)
    return raw


def read_response(conn: Any, notes: list[Event] | None = None) -> list[Event]:
    """The events of one response, up to its terminal event or an error; steer events aside."""
    events: list[Event] = []
    while True:
        event = receive(conn)
        if event["type"].startswith("response.steer."):
            assert notes is not None, f"unexpected {event}"
            notes.append(event)
            continue
        events.append(event)
        if event["type"] in TERMINAL or event["type"] == "error":
            return events


def final_of(events: list[Event], stream_id: str | None = None) -> Event:
    if stream_id is not None:
        assert all(e.get("stream_id") == stream_id for e in events)
    return check_stream(events, SERVER_EVENT)


@pytest.fixture
def conn(ptc_emulator: PTCEmulator) -> Iterator[Any]:
    with ptc_emulator.client(max_retries=0).responses.connect() as connection:
        yield connection


def test_loop_with_previous_response_id_on_one_socket(
    ptc_emulator: PTCEmulator, conn: Any, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    conn.response.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, stream_id="lane-1")
    finals = [final_of(read_response(conn), "lane-1")]
    while outputs := add_outputs(finals[-1]["output"]):
        conn.response.create(
            model="emulated", input=outputs, tools=ADD_TOOLS, previous_response_id=finals[-1]["id"], stream_id="lane-1"
        )
        finals.append(final_of(read_response(conn), "lane-1"))
    assert len(finals) == 4
    assert finals[-1]["output"][-1]["content"][0]["text"] == THREE_PAUSES_ANSWER
    client = ptc_emulator.client(max_retries=0)
    assert client.responses.retrieve(finals[-1]["id"]).output_text == THREE_PAUSES_ANSWER
    journal = ptc_emulator.journal
    assert [(e["method"], e["status"], e["response_id"]) for e in journal] == [("WS", 200, f["id"]) for f in finals]


def test_loop_with_store_false_replay_on_one_socket(
    ptc_emulator: PTCEmulator, conn: Any, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    items: list[Event] = [{"role": "user", "content": js(THREE_PAUSES)}]
    finals = []
    for _ in range(6):
        # The Agents SDK's WebSocket transport sends `stream: true` in its frames.
        conn.response.create(model="emulated", input=items, tools=ADD_TOOLS, store=False, stream=True)
        final = final_of(read_response(conn))
        finals.append(final)
        outputs = add_outputs(final["output"])
        if not outputs:
            break
        items = [*items, *as_input(final["output"]), *outputs]
    assert len(finals) == 4 and all(f["store"] is False for f in finals)
    assert finals[-1]["output"][-1]["content"][0]["text"] == THREE_PAUSES_ANSWER
    with pytest.raises(openai.NotFoundError):
        ptc_emulator.client(max_retries=0).responses.retrieve(finals[0]["id"])


def test_store_false_with_previous_response_id_on_the_same_socket(ptc_emulator: PTCEmulator, conn: Any) -> None:
    """The socket keeps its own store:false responses while open; nothing reaches the server's store."""
    conn.response.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, store=False)
    finals = [final_of(read_response(conn))]
    while outputs := add_outputs(finals[-1]["output"]):
        conn.response.create(
            model="emulated", input=outputs, tools=ADD_TOOLS, store=False, previous_response_id=finals[-1]["id"]
        )
        finals.append(final_of(read_response(conn)))
    assert len(finals) == 4 and all(f["store"] is False for f in finals)
    assert finals[-1]["output"][-1]["content"][0]["text"] == THREE_PAUSES_ANSWER
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(finals[0]["id"])
    with pytest.raises(openai.BadRequestError) as caught:  # another connection cannot see them
        client.responses.create(model="emulated", input="x", previous_response_id=finals[0]["id"], store=False)
    assert caught.value.code == "previous_response_not_found"


@pytest.mark.ptc_strict(unmatched=False)  # one of its errors is a request nothing answers
def test_errors_are_error_events_and_the_socket_stays_open(ptc_emulator: PTCEmulator, conn: Any) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)fail after a program"},
            "turns": [
                {"program": "text('ran')"},
                {"error": {"status": 503, "message": "Busy.", "type": "server_error"}},
            ],
        }
    )
    conn.send({"type": "response.create", "model": "emulated", "input": 5, "stream_id": "s"})
    status, body = post_stream(ptc_emulator, {"model": "emulated", "input": 5})
    assert receive(conn) == {"type": "error", "status": status, "error": json.loads(body)["error"], "stream_id": "s"}
    conn.response.create(model="emulated", input="no scenario matches this")
    assert receive(conn)["error"]["code"] == "no_scenario_matched"
    conn.response.create(model="emulated", input="x", previous_response_id="resp_missing")
    assert receive(conn)["error"]["code"] == "previous_response_not_found"
    conn.response.create(model="emulated", input=js("text(1)"), tools=ADD_TOOLS, background=True)
    background = receive(conn)
    assert background["error"]["param"] == "background" and background["status"] == 400
    conn.response.create(model="emulated", input="fail after a program", tools=ADD_TOOLS)
    late = read_response(conn)
    assert [e["type"] for e in late] == ["response.created", "response.in_progress", "error"]
    assert late[-1]["status"] == 503 and late[-1]["sequence_number"] == 2
    assert late[-1]["error"]["message"] == "Busy."
    conn.response.create(model="emulated", input=js("text('still open')"), tools=ADD_TOOLS)
    assert final_of(read_response(conn))["output"][-1]["content"][0]["text"] == "still open"


def test_raw_frames_that_are_not_events_get_error_events(ptc_emulator: PTCEmulator) -> None:
    url = ptc_emulator.base_url.replace("http://", "ws://") + "/responses"
    headers = {**ptc_emulator.headers, "Authorization": f"Bearer {ptc_emulator.api_key}"}
    with ws_connect(url, additional_headers=headers) as ws:
        for frame in ("not json", json.dumps({"type": "session.update"}), json.dumps([1, 2])):
            ws.send(frame)
            error = json.loads(ws.recv(timeout=10))
            check_event(error, SERVER_EVENT)
            assert error["type"] == "error" and error["status"] == 400
        ws.send(
            json.dumps({"type": "response.create", "model": "emulated", "input": js("text('ok')"), "tools": ADD_TOOLS})
        )
        events = []
        while not events or events[-1]["type"] not in TERMINAL:
            events.append(json.loads(ws.recv(timeout=10)))
        assert final_of(events)["status"] == "completed"


def test_generate_false_prepares_state_for_the_next_response(ptc_emulator: PTCEmulator, conn: Any) -> None:
    conn.response.create(
        model="emulated", input=[{"role": "developer", "content": "Be brief."}], tools=ADD_TOOLS, generate=False
    )
    warm = read_response(conn)
    assert [e["type"] for e in warm] == ["response.created", "response.in_progress", "response.completed"]
    warmed = final_of(warm)
    assert warmed["output"] == [] and warmed["status"] == "completed"
    conn.response.create(model="emulated", input=js("text('warm')"), tools=ADD_TOOLS, previous_response_id=warmed["id"])
    final = final_of(read_response(conn))
    assert final["previous_response_id"] == warmed["id"]
    assert final["output"][-1]["content"][0]["text"] == "warm"
    items = ptc_emulator.client(max_retries=0).responses.input_items.list(warmed["id"], order="asc")
    assert [(i.type, getattr(i, "role", None)) for i in items.data] == [("message", "developer")]


def test_steer_answers(ptc_emulator: PTCEmulator, conn: Any) -> None:
    conn.response.steer(input="hello?", previous_response_id="resp_elsewhere")
    missing = receive(conn)
    assert missing["type"] == "response.steer.failed" and missing["error"]["code"] == "response_not_found"
    assert missing["steer"] == {"input": "hello?", "previous_response_id": "resp_elsewhere"}

    conn.response.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, stream_id="main")
    first = final_of(read_response(conn))
    call = first["output"][-1]
    for bad in ([], [{"type": "function_call_output", "call_id": call["call_id"], "output": "3"}], ""):
        conn.response.steer(input=bad, previous_response_id=first["id"])
        refused = receive(conn)
        assert refused["error"]["code"] == "invalid_input" and refused["stream_id"] == "main"
    conn.send({"type": "response.steer", "input": "x", "previous_response_id": first["id"], "stream_id": "other"})
    assert receive(conn)["error"]["code"] == "invalid_input"

    steering = js("text('steered')")
    conn.response.steer(
        input=[{"type": "message", "role": "user", "content": steering}], previous_response_id=first["id"]
    )
    accepted, pending = receive(conn), receive(conn)
    assert accepted["type"] == "response.steer.accepted" and pending["type"] == "response.steer.pending"
    assert accepted["steer"] == pending["steer"] and accepted["steer"]["previous_response_id"] == first["id"]
    assert pending["reason"] == "waiting_for_required_input"
    assert pending["required_input"] == [{"type": "function_call_output", "call_id": call["call_id"], "name": "add"}]
    assert pending["sequence_number"] > accepted["sequence_number"] > missing["sequence_number"]

    conn.response.create(
        model="emulated",
        input=add_outputs(first["output"]),
        tools=ADD_TOOLS,
        previous_response_id=first["id"],
        stream_id="main",
    )
    successor = final_of(read_response(conn), "main")
    items = ptc_emulator.client(max_retries=0).responses.input_items.list(successor["id"], order="asc").data
    assert [i.type for i in items] == ["message", "function_call_output"], "the steer goes first"
    while outputs := add_outputs(successor["output"]):
        conn.response.create(model="emulated", input=outputs, tools=ADD_TOOLS, previous_response_id=successor["id"])
        successor = final_of(read_response(conn))
    assert successor["output"][-1]["content"][0]["text"] == "steered", "the model answered the steering message"

    conn.response.steer(input="more", previous_response_id=successor["id"])
    done = receive(conn)
    assert done["type"] == "response.steer.failed" and done["error"]["code"] == "response_already_completed"
    conn.response.steer(input="late", previous_response_id=first["id"])
    assert receive(conn)["error"]["code"] == "response_not_active", "a continued response takes no steering"


@pytest.mark.parametrize("store", [True, False], ids=["stored", "store-false"])
def test_steer_while_playing_starts_a_successor(ptc_emulator: PTCEmulator, conn: Any, store: bool) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": "(?i)think slowly"}, "turns": [{"message": "slow answer", "fault": {"latency_ms": 500}}]}
    )
    conn.response.create(model="emulated", input="think slowly", tools=ADD_TOOLS, stream_id="slow", store=store)
    created = receive(conn)
    assert created["type"] == "response.created"
    conn.response.steer(input=js("text('after the steer')"), previous_response_id=created["response"]["id"])
    notes: list[Event] = []
    first = final_of([created, *read_response(conn, notes)], "slow")
    assert [n["type"] for n in notes] == ["response.steer.accepted"] and notes[0]["stream_id"] == "slow"
    assert first["output"][0]["content"][0]["text"] == "slow answer"
    successor = final_of(read_response(conn), "slow")
    assert successor["store"] is store
    # Stored: the successor continues by id; not stored: it replays the conversation.
    assert successor["previous_response_id"] == (first["id"] if store else None)
    assert successor["output"][-1]["content"][0]["text"] == "after the steer"


def test_closing_the_socket_cancels_the_program(slow: PTCEmulator) -> None:
    def workers() -> list[int]:
        deadline = time.monotonic() + 10
        while len(pids := slow.admin.get("/health").json()["workers"]) != SLOW_WORKERS:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        return list(pids)

    before = workers()
    with slow.client(max_retries=0).responses.connect() as connection:
        connection.response.create(model="emulated", input=js("while (true) {}"), tools=ADD_TOOLS)
        assert receive(connection)["type"] == "response.created"
        assert receive(connection)["type"] == "response.in_progress"
        time.sleep(0.2)  # the program is spinning in a worker
    deadline = time.monotonic() + 5
    while set(workers()) == set(before):
        assert time.monotonic() < deadline, "the worker running the program was not replaced"
        time.sleep(0.02)
    deadline = time.monotonic() + 5
    while not slow.journal or slow.journal[-1]["status"] != 499:
        assert time.monotonic() < deadline, slow.journal
        time.sleep(0.02)


def test_cut_stream_closes_the_socket_and_the_response_still_finishes(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": "(?i)cut the socket"}, "turns": [{"message": "whole", "fault": {"cut_stream_after": 3}}]}
    )
    url = ptc_emulator.base_url.replace("http://", "ws://") + "/responses"
    headers = {**ptc_emulator.headers, "Authorization": f"Bearer {ptc_emulator.api_key}"}
    with ws_connect(url, additional_headers=headers) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "emulated", "input": "cut the socket"}))
        head = [json.loads(ws.recv(timeout=10)) for _ in range(3)]
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert [e["sequence_number"] for e in head] == [0, 1, 2]
    rest = decode(get_stream(ptc_emulator, head[0]["response"]["id"], starting_after=2))
    assert check_stream([*head, *rest])["output"][0]["content"][0]["text"] == "whole"


def test_steer_on_a_response_that_fails_comes_back(ptc_emulator: PTCEmulator, conn: Any) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)fail slowly"},
            "turns": [
                {
                    "error": {"status": 500, "message": "Late failure.", "type": "server_error"},
                    "fault": {"latency_ms": 300},
                }
            ],
        }
    )
    conn.response.create(model="emulated", input="fail slowly")
    created = receive(conn)
    assert created["type"] == "response.created"
    conn.response.steer(input="never mind", previous_response_id=created["response"]["id"])
    notes: list[Event] = []
    events = [created, *read_response(conn, notes)]
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1]["error"]["message"] == "Late failure."
    failed = receive(conn)
    assert [n["type"] for n in notes] == ["response.steer.accepted"]
    assert failed["type"] == "response.steer.failed" and failed["error"]["code"] == "response_not_active"
    assert failed["steer"] == {
        "id": notes[0]["steer"]["id"],
        "input": "never mind",
        "previous_response_id": created["response"]["id"],
    }
