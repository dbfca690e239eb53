"""A non-streaming client that disconnects cancels its program: the worker running it is replaced
long before the program's own deadline, and the journal records a 499.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest

from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

TIMEOUT_S = 120.0  # the program's own deadline: the test must end long before it


def workers(server: EmulatorServer) -> list[int]:
    reply = httpx.get(server.base_url[: -len("/v1")] + "/_emulator/health", timeout=30)
    return sorted(reply.json()["workers"])


def test_a_disconnected_non_streaming_client_cancels_its_program(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server(pool_size=1, limits=Limits(timeout_s=TIMEOUT_S))
    before = workers(server)
    body = {"model": "m", "input": program_message("text('spinning');\nwhile (true) {}"), "tools": PTC_TOOLS}
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        # The client gives up after two seconds and closes its connection.
        httpx.post(
            f"{server.base_url}/responses",
            content=json.dumps(body),
            timeout=2.0,
            headers={"content-type": "application/json"},
        )
    deadline = time.monotonic() + TIMEOUT_S / 2
    while True:
        after = workers(server)
        if after and after != before:
            break
        assert time.monotonic() < deadline, f"the worker was not replaced: {before} -> {after}"
        time.sleep(0.05)
    assert time.monotonic() - started < TIMEOUT_S / 2
    journal = httpx.get(server.base_url[: -len("/v1")] + "/_emulator/journal", timeout=30).json()["data"]
    entry = journal[-1]
    assert entry["status"] == 499 and entry["response"]["error"]["type"] == "client_closed_request", entry
    # The next request runs at once on the fresh worker.
    reply = httpx.post(
        f"{server.base_url}/responses",
        content=json.dumps({**body, "input": program_message("text('next');")}),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert reply.status_code == 200 and "next" in reply.text
