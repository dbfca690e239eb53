"""The tests of work kept off the event loop share one check: while a large request is held inside
the work (the test holds it on an event), health and a small create are answered."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx

from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message


def others_answered_while_held(
    server: EmulatorServer,
    entered: threading.Event,
    release: threading.Event,
    pending: Future[Any],
    small: bool = True,
) -> None:
    """Once the large request is held (`entered`), health and a small create must be answered
    before it is let go (`release`); the large one must still be pending then. Nothing is timed:
    with the work on the event loop, health gets no answer until the release (the client's 60 s
    timeout ends the test instead). `small=False`: health alone (the tests that check only it)."""
    assert entered.wait(120), "the large request never reached the held work"
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            health = http.get(server.base_url.removesuffix("/v1") + "/_emulator/health")
            created = (
                http.post(
                    "/responses", json={"model": "m", "input": program_message("text('small')"), "tools": PTC_TOOLS}
                )
                if small
                else None
            )
        assert not pending.done(), "the large request should still be held"
    finally:
        release.set()
    assert health.status_code == 200, health.text
    if created is not None:
        assert created.status_code == 200, created.text[:500]
        assert created.json()["output"][-1]["content"][0]["text"] == "small"


def long_create(content: str) -> dict[str, Any]:
    """A create whose first message is `content` (the long part), the program's answering `ok`."""
    return {
        "model": "m",
        "input": [{"role": "user", "content": content}, {"role": "user", "content": program_message("text('ok')")}],
        "tools": PTC_TOOLS,
        "store": False,
    }


class Held:
    """Holds the first call that reaches `hold` (later ones pass) until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            first = not self.entered.is_set()
            self.entered.set()
        if first:
            assert self.release.wait(120), "never released"

    def around(self, real: Callable[..., Any], when: Callable[..., bool] | None = None) -> Callable[..., Any]:
        """`real`, holding first (for `monkeypatch.setattr` over a function or a method); with
        `when`, only the calls it is true of count (the others pass: a server's own warm-up call)."""

        def holding(*args: Any, **kwargs: Any) -> Any:
            if when is None or when(*args, **kwargs):
                self.hold()
            return real(*args, **kwargs)

        return holding


def while_held(
    server: EmulatorServer, held: Held, request: Callable[[httpx.Client], httpx.Response], small: bool = True
) -> Any:
    """`request` sent from another thread; once it is held, `others_answered_while_held` (`small`
    as there); then its answer, which must be a 200, as JSON."""

    def large() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return request(client)

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(large)
        others_answered_while_held(server, held.entered, held.release, pending, small)
        reply = pending.result(timeout=300)
    assert reply.status_code == 200, reply.text[:500]
    return reply.json()
