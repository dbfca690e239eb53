"""A conversation's items are made and added in a worker thread: each of its up to 20 items may be
as long as a body allows (200,000 content parts), and adding them reads every kept item's id (an
id comes once in a conversation). Health and a small create are answered while that work is held.

The server runs in this process; each test holds the service's work on an event the test sets.
Nothing is timed (before, both ran on the event loop: a conversation of 200,000 content parts
made held every other client some 0.3 s on an idle machine, and the add's read of the kept ids
grows with the conversation).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ptc_emulator.emulator.conversations.service import Conversations
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import Held, while_held

ITEM = {"role": "user", "content": [{"type": "input_text", "text": "part"}] * 1000}


def test_a_conversation_is_made_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    monkeypatch.setattr(Conversations, "create", held.around(Conversations.create))
    made = while_held(server, held, lambda client: client.post("/conversations", json={"items": [ITEM]}))
    assert made["object"] == "conversation"


def test_items_are_added_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        conversation = client.post("/conversations", json={}).json()["id"]
    monkeypatch.setattr(Conversations, "add_items", held.around(Conversations.add_items))
    added = while_held(
        server, held, lambda client: client.post(f"/conversations/{conversation}/items", json={"items": [ITEM]})
    )
    assert added["object"] == "list" and len(added["data"]) == 1
