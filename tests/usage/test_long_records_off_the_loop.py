"""A long stored record (a response of many input items, a conversation of many items) is read
without holding the event loop: its JSON text a piece at a time in a worker thread (continuing
its chain, retrieving it, listing its input items), a conversation's items in a worker thread
(listing them, retrieving one). Health and a small create are answered while the reading is held.

The server runs in this process, so each test holds the reading on an event the test sets:
between two pieces of the record's text (`jsonpieces.between`), or inside the conversation's
items read. Nothing is timed (issue 38: with a record of 200,000 items read in one `json.loads`
call, or a listing read on the event loop, every other client waited 0.5 to 1.6 s).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.storage.sql import SqlConversations
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, others_answered_while_held, while_held

ITEMS = 3 * jsonpieces.PIECE
"""Enough items for a record's text to be read in pieces."""


def _long_input(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"hi {n}"} for n in range(ITEMS)] + [
        {"role": "user", "content": program_message(text)}
    ]


@pytest.fixture
def long_response(make_server: Callable[..., EmulatorServer]) -> tuple[EmulatorServer, str]:
    """A server holding a stored response of `ITEMS` and more input items, and its id."""
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        first = client.post(
            "/responses", json={"model": "m", "input": _long_input("text('first')"), "tools": PTC_TOOLS}
        )
    assert first.status_code == 200, first.text[:500]
    return server, first.json()["id"]


def _hold_between_pieces(held: Held, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonpieces, "between", held.hold)


def test_a_continuation_reads_its_long_record_a_piece_at_a_time(
    long_response: tuple[EmulatorServer, str], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, previous = long_response
    _hold_between_pieces(held, monkeypatch)
    body = {
        "model": "m",
        "previous_response_id": previous,
        "input": program_message("text('next')"),
        "tools": PTC_TOOLS,
    }
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "next"


def test_a_long_records_input_items_are_listed_off_the_loop(
    long_response: tuple[EmulatorServer, str], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, response_id = long_response
    _hold_between_pieces(held, monkeypatch)
    listed = while_held(server, held, lambda client: client.get(f"/responses/{response_id}/input_items?limit=3"))
    assert [item["content"][0]["text"] for item in listed["data"]][1:] == [f"hi {ITEMS - 1}", f"hi {ITEMS - 2}"]
    assert listed["has_more"] is True


def test_a_long_record_is_retrieved_off_the_loop(
    long_response: tuple[EmulatorServer, str], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, response_id = long_response
    _hold_between_pieces(held, monkeypatch)
    retrieved = while_held(server, held, lambda client: client.get(f"/responses/{response_id}"))
    assert retrieved["id"] == response_id
    assert retrieved["output"][-1]["content"][0]["text"] == "first"


def test_a_long_record_is_streamed_back_off_the_loop(
    long_response: tuple[EmulatorServer, str], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`?stream=true` reads the record in a worker thread too, before the first byte and as it
    polls (on the code before, `engine.retrieve` ran on the event loop: the held piece held every
    other client, and the test failed there)."""
    server, response_id = long_response
    _hold_between_pieces(held, monkeypatch)

    def streamed() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return client.get(f"/responses/{response_id}?stream=true")

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(streamed)
        others_answered_while_held(server, held.entered, held.release, pending)
        reply = pending.result(timeout=300)
    assert reply.status_code == 200, reply.text[:500]
    kinds = [json.loads(line[6:])["type"] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"


def test_a_long_conversations_items_are_listed_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()  # the SQLite store
    items = [{"type": "message", "role": "user", "content": f"hi {n}"} for n in range(ITEMS)]
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        made = client.post("/conversations", json={"items": items[:20]})
        assert made.status_code == 200, made.text[:500]
        conversation = made.json()["id"]
        for start in range(20, ITEMS, 20):  # (at most 20 items a request)
            added = client.post(f"/conversations/{conversation}/items", json={"items": items[start : start + 20]})
            assert added.status_code == 200, added.text[:500]
    real = SqlConversations.item_page  # (a page reads the ids, and decodes only its items)

    def read(self: SqlConversations, conversation_id: str, pick: Callable[[list[str]], list[int]]) -> list[Any]:
        held.hold()
        return real(self, conversation_id, pick)

    monkeypatch.setattr(SqlConversations, "item_page", read)
    listed = while_held(server, held, lambda client: client.get(f"/conversations/{conversation}/items?limit=2"))
    assert [item["content"][0]["text"] for item in listed["data"]] == [f"hi {ITEMS - 1}", f"hi {ITEMS - 2}"]
    first_id = listed["data"][0]["id"]
    held.entered.clear()
    held.release.clear()
    one = while_held(server, held, lambda client: client.get(f"/conversations/{conversation}/items/{first_id}"))
    assert one["id"] == first_id


def test_a_long_windows_compaction_is_rendered_a_piece_at_a_time(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction of a long window returns its user messages (thousands of items): its JSON
    text is written a piece at a time in the worker thread that made it, not encoded value by
    value on the event loop (200,000 items: every other client waited over a second)."""
    server = make_server()
    _hold_between_pieces(held, monkeypatch)
    body = {"model": "m", "input": _long_input("text('first')")}
    compacted = while_held(server, held, lambda client: client.post("/responses/compact", json=body))
    texts = [item["content"][0]["text"] for item in compacted["output"] if item.get("role") == "user"]
    assert texts[:2] == ["hi 0", "hi 1"] and len(texts) > ITEMS


def test_a_long_create_body_is_parsed_a_piece_at_a_time(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create body of many items (here no stored history and `store: false`: nothing else reads
    pieces) is parsed a piece at a time in its worker thread, not in one `json.loads` call that
    holds the interpreter for all of it (a 16 MiB body: a fifth of a second)."""
    reading = threading.local()
    real_loads = jsonpieces.loads

    def loads(text: str) -> Any:
        reading.on = True
        try:
            return real_loads(text)
        finally:
            reading.on = False

    def between() -> None:
        if getattr(reading, "on", False):
            held.hold()

    monkeypatch.setattr(jsonpieces, "loads", loads)
    monkeypatch.setattr(jsonpieces, "between", between)
    server = make_server()
    items = 12 * jsonpieces.PIECE  # a body longer than jsonpieces reads in one call
    body = {
        "model": "m",
        "store": False,
        "input": [{"role": "user", "content": f"hi {n}"} for n in range(items)]
        + [{"role": "user", "content": program_message("text('long')")}],
        "tools": PTC_TOOLS,
    }
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "long"
