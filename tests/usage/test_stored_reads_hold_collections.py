"""A long stored response read back holds full garbage collections off until its request has been
answered, on every route that reads one (issue 38).

Reading back a stored response of 200,000 small items (`GET /v1/responses/{id}`, its
`input_items`, `input_tokens` and a create continuing it) makes as many objects as its create did,
but its request's body is small, so full collections were not held off: five to ten of them ran
during each read, each walking the whole heap for 0.1-1.5 s while every other client waited. The
server runs in this process, so the test holds the request just after its record's long text has
been read (`jsonpieces.loads`) and looks at the collector there, while health and a small create
are answered. Nothing is timed: before, full collections were not held off at that point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import collector, jsonpieces
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.collections_back import collections_back, unheld_threshold
from tests.usage.held import Held, while_held

ITEMS = 20_000
"""Enough for a record's text of over 256 K characters (read a piece at a time)."""


class _HeldRead(Held):
    """Holds the first long text read once armed (after the create that stores the record), and
    notes whether full collections were held off there."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.held_off: bool | None = None


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldRead]:
    holder = _HeldRead()
    real = jsonpieces.loads

    def loads(text: str) -> Any:
        value = real(text)
        if holder.armed and len(text) >= jsonpieces.LONG_TEXT and not holder.entered.is_set():
            holder.held_off = collector.held()
            holder.hold()
        return value

    monkeypatch.setattr(jsonpieces, "loads", loads)
    yield holder
    holder.release.set()


def _requests(response_id: str) -> dict[str, Callable[[httpx.Client], httpx.Response]]:
    return {
        "retrieve": lambda c: c.get(f"/responses/{response_id}"),
        "input_items": lambda c: c.get(f"/responses/{response_id}/input_items", params={"limit": 100}),
        "input_tokens": lambda c: c.post(
            "/responses/input_tokens", json={"model": "m", "previous_response_id": response_id, "input": "hi"}
        ),
        "continue": lambda c: c.post(
            "/responses",
            json={
                "model": "m",
                "previous_response_id": response_id,
                "input": program_message("text('again')"),
                "tools": PTC_TOOLS,
            },
        ),
    }


@pytest.mark.parametrize("route", ["retrieve", "input_items", "input_tokens", "continue"])
def test_full_collections_are_held_off_while_a_long_stored_response_is_read(
    make_server: Callable[..., EmulatorServer], read: _HeldRead, route: str
) -> None:
    server = make_server()
    before = unheld_threshold()
    items: list[Any] = [{"role": "user", "content": f"item {n}"} for n in range(ITEMS - 1)]
    items.append({"role": "user", "content": program_message("text('stored')")})
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        created = client.post("/responses", json={"model": "m", "input": items, "tools": PTC_TOOLS, "store": True})
    assert created.status_code == 200, created.text[:500]
    collections_back(before)
    read.armed = True
    answer = while_held(server, read, _requests(created.json()["id"])[route])
    assert read.held_off is True, "full collections ran on while the long record was read back"
    collections_back(before)
    if route == "input_items":
        assert len(answer["data"]) == 100
    elif route == "continue":
        assert answer["output"][-1]["content"][0]["text"] == "again"
