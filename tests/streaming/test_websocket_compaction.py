"""Compaction in WebSocket mode, through `client.responses.connect()`: automatic compaction
(`context_management`) continues by the latest response id on the socket, with a program paused
across every compaction; a standalone compaction's output starts a new chain on the socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import (
    ADD_TOOLS,
    SERVER_EVENT,
    TERMINAL,
    THREE_PAUSES,
    THREE_PAUSES_ANSWER,
    add_outputs,
    check_event,
    check_stream,
    js,
)

Event = dict[str, Any]
COMPACT_ALWAYS = [{"type": "compaction", "compact_threshold": 1}]


@pytest.fixture
def conn(ptc_emulator: PTCEmulator) -> Iterator[Any]:
    with ptc_emulator.client(max_retries=0).responses.connect() as connection:
        yield connection


def read_response(conn: Any) -> list[Event]:
    events: list[Event] = []
    while True:
        event: Event = json.loads(conn.recv_bytes())
        check_event(event, SERVER_EVENT)
        events.append(event)
        if event["type"] in TERMINAL or event["type"] == "error":
            return events


@pytest.mark.parametrize("store", [True, False])
def test_automatic_compaction_continues_by_id_with_a_paused_program(conn: Any, store: bool) -> None:
    conn.response.create(
        model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, store=store, context_management=COMPACT_ALWAYS
    )
    events = read_response(conn)
    finals = [check_stream(events, SERVER_EVENT)]
    compacting = [e for e in events if e["type"] == "response.compaction.compacting"]
    assert [(e["output_index"], e["item_id"]) for e in compacting] == [(0, finals[0]["output"][0]["id"])]
    while outputs := add_outputs(finals[-1]["output"]):
        conn.response.create(
            model="emulated",
            input=outputs,
            tools=ADD_TOOLS,
            store=store,
            previous_response_id=finals[-1]["id"],
            context_management=COMPACT_ALWAYS,
        )
        finals.append(check_stream(read_response(conn), SERVER_EVENT))
    assert len(finals) == 4
    assert all(f["output"][0]["type"] == "compaction" for f in finals)  # compacted before every turn
    assert finals[-1]["output"][-1]["content"][0]["text"] == THREE_PAUSES_ANSWER


def test_a_standalone_compaction_starts_a_new_chain(ptc_emulator: PTCEmulator, conn: Any) -> None:
    conn.response.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, store=False)
    first = check_stream(read_response(conn), SERVER_EVENT)
    history = [{"type": "message", "role": "user", "content": js(THREE_PAUSES)}, *first["output"]]
    compacted = ptc_emulator.client(max_retries=0).responses.compact(model="emulated", input=history)  # type: ignore[arg-type]
    window = [item.model_dump(mode="json", exclude_none=True, warnings=False) for item in compacted.output]
    finals = [first]
    items = window
    while outputs := add_outputs(finals[-1]["output"]):
        conn.response.create(model="emulated", input=[*items, *outputs], tools=ADD_TOOLS, store=False)
        finals.append(check_stream(read_response(conn), SERVER_EVENT))
        items = [*items, *outputs, *finals[-1]["output"]]
    assert finals[-1]["output"][-1]["content"][0]["text"] == THREE_PAUSES_ANSWER
