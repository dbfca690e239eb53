"""A long conversation's items read back hold full garbage collections off until the request has
been answered, as a long stored response's do (`test_stored_reads_hold_collections`).

A conversation's items are stored one short text each, so no single long text was read through
`jsonpieces.loads`, which takes the hold: continuing a conversation of 150,000 items (through the
Conversations API, `store` true or false) started full collections of 0.15-1.3 s each in the worker
reading them, every other client waiting (issue 38). The test wraps the store's read and looks at
the collector just after it returns, inside the request. Nothing is timed: before, full collections
were not held off there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import collector
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.collections_back import collections_back, unheld_threshold

ITEMS = 20_000
"""Enough for over 256 K characters of item text."""


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("stored", [True, False])
def test_full_collections_are_held_off_while_a_long_conversation_is_read(
    make_server: Callable[..., EmulatorServer], store: str, stored: bool
) -> None:
    server = make_server(store=store)
    conversations = server.app.state.emulator.store.conversations
    seen: list[bool] = []
    real = conversations.read

    def read(conversation_id: str, **bound: Any) -> Any:
        found = real(conversation_id, **bound)
        seen.append(collector.held())
        return found

    conversations.read = read
    before = unheld_threshold()
    items: list[Any] = [{"role": "user", "content": f"item {n}"} for n in range(ITEMS - 1)]
    items.append({"role": "user", "content": program_message("text('stored')")})
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        cid = client.post("/conversations", json={}).json()["id"]
        first = client.post("/responses", json={"model": "m", "conversation": cid, "input": items, "tools": PTC_TOOLS})
        assert first.status_code == 200, first.text[:500]
        seen.clear()
        again = client.post(
            "/responses",
            json={
                "model": "m",
                "conversation": cid,
                "input": program_message("text('again')"),
                "tools": PTC_TOOLS,
                "store": stored,
            },
        )
    assert again.status_code == 200, again.text[:500]
    assert again.json()["output"][-1]["content"][0]["text"] == "again"
    assert seen and all(seen), "full collections ran on while the long conversation was read back"
    collections_back(before)
