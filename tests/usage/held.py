"""The tests of work kept off the event loop share one check: while a large request is held inside
the work (the test holds it on an event), health and a small create are answered."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import httpx

from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message


def others_answered_while_held(
    server: EmulatorServer, entered: threading.Event, release: threading.Event, pending: Future[Any]
) -> None:
    """Once the large request is held (`entered`), health and a small create must be answered
    before it is let go (`release`); the large one must still be pending then. Nothing is timed:
    with the work on the event loop, health gets no answer until the release (the client's 60 s
    timeout ends the test instead)."""
    assert entered.wait(120), "the large request never reached the held work"
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            health = http.get(server.base_url.removesuffix("/v1") + "/_emulator/health")
            small = http.post(
                "/responses", json={"model": "m", "input": program_message("text('small')"), "tools": PTC_TOOLS}
            )
        assert not pending.done(), "the large request should still be held"
    finally:
        release.set()
    assert health.status_code == 200, health.text
    assert small.status_code == 200, small.text[:500]
    assert small.json()["output"][-1]["content"][0]["text"] == "small"
