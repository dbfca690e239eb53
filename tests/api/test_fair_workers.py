"""No client's programs stall another's (issue 38).

A server with one V8 worker: scope `runaway` sends two `while (true) {}` programs (the first runs,
the second waits for the worker), then scope `other` sends a trivial one. The trivial one must be
answered while both runaway programs are still running. Nothing is timed: the runaway programs
can only end at their 60 s deadline, and the test looks at which request ends first. Before,
programs were dispatched first in, first out, so the trivial one waited for both runaway
programs' deadlines, and the first runaway response ended first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from ptc_emulator.names import SCOPE_HEADER
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

RUNAWAY_TIMEOUT_S = 60.0


def _body(code: str) -> dict[str, Any]:
    return {"model": "m", "input": program_message(code), "tools": PTC_TOOLS, "store": False}


async def _health(http: httpx.AsyncClient) -> dict[str, Any]:
    reply = await http.get("/_emulator/health")
    reply.raise_for_status()
    return dict(reply.json())


async def _until(http: httpx.AsyncClient, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Health, once `ready` holds (polled: the state is the server's, not the test's)."""
    deadline = time.monotonic() + 120
    while True:
        health = await _health(http)
        if ready(health):
            return health
        assert time.monotonic() < deadline, f"the server never reached the state: {health}"
        await asyncio.sleep(0.02)


def test_a_scopes_trivial_program_runs_while_another_scopes_runaways_hold_every_worker(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server(pool_size=1, limits=Limits(timeout_s=RUNAWAY_TIMEOUT_S))
    root = server.base_url.removesuffix("/v1")

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=root, timeout=300) as http:
            runaway = {SCOPE_HEADER: "runaway"}
            spin = _body("while (true) {}")
            first = asyncio.ensure_future(http.post("/v1/responses", json=spin, headers=runaway))
            await _until(http, lambda h: h["sandbox_runs"] >= 1)  # it holds the only worker
            second = asyncio.ensure_future(http.post("/scopes/runaway/v1/responses", json=spin))
            await _until(http, lambda h: h["sandbox_waiting"] >= 1)  # it waits for the worker
            other = asyncio.ensure_future(http.post("/scopes/other/v1/responses", json=_body("text('quick')")))
            try:
                done, _ = await asyncio.wait([first, second, other], return_when=asyncio.FIRST_COMPLETED)
                assert other in done and not first.done() and not second.done(), (
                    "the other scope's program waited for the runaway ones"
                )
                reply = other.result()
                assert reply.status_code == 200, reply.text[:500]
                assert reply.json()["output"][-1]["content"][0]["text"] == "quick"
                health = await _health(http)
                assert health["sandbox_bursts"] == 1
            finally:
                for task in (first, second, other):
                    task.cancel()  # the runaway requests' clients leave: their workers are killed
                await asyncio.gather(first, second, other, return_exceptions=True)
            # Back to one worker: the extra one was retired once the other scope's program ended.
            await _until(http, lambda h: len(h["workers"]) == 1 and h["sandbox_waiting"] == 0)

    asyncio.run(scenario())
