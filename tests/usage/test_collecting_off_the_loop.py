"""No full garbage collection runs while a large request is worked on, and full collections come
back once it has been answered, whatever ended it (issue 38).

A full collection (generation 2) walks every object of the process and holds the interpreter the
whole time: while a worker thread built a 200,000-item request's objects, CPython started several,
each holding the event loop some 70-700 ms, and freeing nothing. The server runs in this process,
so the test counts the collector's passes by generation (`gc.callbacks`) from the moment the large
request is sent until its answer is back, while it is held inside its validation (health and a
small create must be answered meanwhile). Nothing is timed: before, the count was not zero.
"""

from __future__ import annotations

import gc
import json
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import collector
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.collections_back import collections_back, unheld_threshold
from tests.usage.held import Held, others_answered_while_held

ITEMS = 200_000
HELD_ITEMS = 100_000


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """A create of more than `HELD_ITEMS` input items waits inside its validation."""
    holder = Held()
    real = CreateRequest.model_validate

    def model_validate(value: Any, *args: Any, **kwargs: Any) -> CreateRequest:
        given = value.get("input") if isinstance(value, dict) else None
        if given is not None and not isinstance(given, str) and len(given) > HELD_ITEMS:
            holder.hold()
        return real(value, *args, **kwargs)

    monkeypatch.setattr(CreateRequest, "model_validate", model_validate)
    yield holder
    holder.release.set()


class _Passes:
    """The collector's passes, by generation, while counting."""

    def __init__(self) -> None:
        self.counting = False
        self.started: list[int] = []

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if self.counting and phase == "start":
            self.started.append(info["generation"])


@pytest.fixture
def passes() -> Iterator[_Passes]:
    counted = _Passes()
    gc.callbacks.append(counted)
    yield counted
    gc.callbacks.remove(counted)


def _body(last: Any) -> bytes:
    items: list[Any] = [{"role": "user", "content": "hi"}] * (ITEMS - 1) + [last]
    return json.dumps({"model": "m", "input": items, "tools": PTC_TOOLS, "store": False}).encode()


def test_no_full_collection_runs_while_a_large_request_is_worked_on(
    make_server: Callable[..., EmulatorServer], held: Held, passes: _Passes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One hold lasts at most MAX_HELD_S (30 s): a busy machine can take longer over this request,
    # and full collections would then come back, as they should. That bound is not what is tested.
    monkeypatch.setattr(collector, "MAX_HELD_S", 3600.0)
    server = make_server()
    before = unheld_threshold()
    body = _body({"role": "user", "content": program_message("text('big')")})

    def big() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return client.post("/responses", content=body, headers={"content-type": "application/json"})

    gc.collect()
    passes.counting = True
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(big)
        others_answered_while_held(server, held.entered, held.release, pending)
        large = pending.result(timeout=300)
    passes.counting = False
    assert large.status_code == 200, large.text[:500]
    assert large.json()["output"][-1]["content"][0]["text"] == "big"
    assert 2 not in passes.started, f"full collections while the large request was worked on: {passes.started}"
    assert passes.started, "the young generations are still collected meanwhile"
    collections_back(before)


def test_full_collections_come_back_after_a_large_request_that_fails_validation(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    before = unheld_threshold()
    body = _body({"role": "user", "content": 7})
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        refused = client.post("/responses", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 400, refused.text[:500]
    assert refused.json()["error"]["param"] == f"input[{ITEMS - 1}].content"
    collections_back(before)


def test_full_collections_come_back_after_the_client_of_a_large_request_hangs_up(
    make_server: Callable[..., EmulatorServer], held: Held
) -> None:
    server = make_server()
    before = unheld_threshold()
    body = _body({"role": "user", "content": program_message("text('gone')")})
    head = (
        f"POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
        conn.sendall(head + body)
        assert held.entered.wait(120), "the large request never reached its validation"
    # The client is gone; the held request goes on once let go, and its answer finds no one.
    held.release.set()
    collections_back(before)
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        small = http.post(
            "/responses", json={"model": "m", "input": program_message("text('after')"), "tools": PTC_TOOLS}
        )
    assert small.status_code == 200, small.text[:500]
