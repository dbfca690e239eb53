"""One client's slow MCP calls do not delay another client's (issue 38). A scope's live listings and
calls run in one MCP client process (`mcp_worker.py`), on its one event loop: what a session does
there with the interpreter held, every other session there waits for (one scope here). Each session read the whole CA
bundle twice (two TLS contexts, some 25-50 ms each): a dozen clients calling a slow server kept
that loop busy, and an unrelated client's quick call waited 1-2.4 s behind them. The process now
makes one context, at start. Its names were resolved on asyncio's default threads, six on two
cores, which six hanging resolutions held for every client; it now has `RESOLVERS` of them.
Nothing caps the sessions in flight across requests (each program step's calls run
`HOSTED_CONCURRENCY` at a time, within its own `--timeout`); the held calls below show it. The
servers are real (`MCPServer`); the slow tool waits on an event the test sets."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from ptc_emulator.emulator.tools import guarded, mcp_worker
from ptc_emulator.emulator.tools.egress import McpPolicy
from ptc_emulator.testing.server import PTCEmulator
from tests.tools.mcp_servers_support import Served, serve
from tests.tools.test_mcp_together import emulator_with, in_background

HELD = 12
"""Slow calls held at once: more than one program step's `HOSTED_CONCURRENCY` (8)."""
CAP_S = 60.0
"""A cap on every wait, never a figure tested: past it the test fails saying what never happened."""


@dataclass
class Held:
    """The slow tool's calls in flight, and the event that lets them answer."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    all_in: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    async def slow(self) -> str:
        with self.lock:
            self.in_flight += 1
            if self.in_flight >= HELD:
                self.all_in.set()
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.005)
        finally:
            with self.lock:
                self.in_flight -= 1
        return "slow"


@contextmanager
def slow_and_fast(held: Held, any_host: bool = False) -> Iterator[Served]:
    """The server's `slow` and `fast` tools; `any_host`: whatever name the client reached it by."""
    server = MCPServer("mixed")
    server.tool(name="slow", description="Answers once the test releases it")(held.slow)

    async def fast() -> str:
        return "fast"

    server.tool(name="fast", description="Answers at once")(fast)
    try:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False) if any_host else None
        with serve(server.streamable_http_app(transport_security=security)) as served:
            yield served
    finally:
        held.release.set()


def test_a_quick_call_is_answered_while_other_requests_hold_twelve_slow_ones(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Twelve responses, each in a scope of its own, each a program whose call to the slow tool the
    server holds; while all twelve are held, a response in another scope calls the fast tool and
    is answered, and the twelve are still held when it is. A cap on MCP calls shared across
    requests (eight, as one step's are) would hold the quick call until the test released them."""
    held = Held()
    with emulator_with(tmp_path_factory, timeout_s=CAP_S) as emulator, slow_and_fast(held) as served:
        slow = [
            in_background(PTCEmulator(emulator.server_url), served.url, "text(await tools.gated.slow({}));")
            for _ in range(HELD)
        ]
        waited = time.monotonic() + CAP_S
        while not held.all_in.wait(0.05) and time.monotonic() < waited:
            if not any(thread.is_alive() for thread, _ in slow):
                break
        assert held.all_in.is_set(), ("the server never held the twelve calls at once", [g for _, g in slow])
        thread, got = in_background(PTCEmulator(emulator.server_url), served.url, "text(await tools.gated.fast({}));")
        thread.join(CAP_S)
        still_held = held.in_flight
        held.release.set()
        for other, _ in slow:
            other.join(CAP_S)
    assert not thread.is_alive(), "the quick call was not answered while the slow ones were held"
    assert still_held == HELD
    assert "error" not in got, got
    [done] = [i for i in got["output"] if i["type"] == "program_output"]
    assert (done["status"], done["result"]) == ("completed", "fast")
    for other, answered in slow:
        assert not other.is_alive() and "error" not in answered, answered
        [done] = [i for i in answered["output"] if i["type"] == "program_output"]
        assert (done["status"], done["result"]) == ("completed", "slow")


def test_the_mcp_clients_sessions_read_the_ca_bundle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP client process's sessions (its own functions, here in this process) share one TLS
    context: twelve calls held together, a listing and a quick call meanwhile, read the CA bundle
    once in all. Before, every session made two contexts (its transport's and its pool's), each
    reading the whole bundle with the interpreter held (this test fails on the old code: 28 reads)."""
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    reads = []
    made = httpcore2.default_ssl_context

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return made(*args, **kwargs)

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    monkeypatch.setattr(guarded, "_TRUST", None)
    policy = McpPolicy(allow_hosts=("127.0.0.1",), timeout_s=CAP_S)
    held = Held()

    async def run(url: str) -> tuple[list[dict[str, Any]], dict[str, Any], int, list[dict[str, Any]]]:
        slow = [asyncio.ensure_future(mcp_worker.call(url, {}, policy, "slow", {})) for _ in range(HELD)]
        waited = time.monotonic() + CAP_S
        while not held.all_in.is_set() and time.monotonic() < waited:
            await asyncio.sleep(0.01)
        listed = await mcp_worker.listing(url, {}, policy)
        quick = await mcp_worker.call(url, {}, policy, "fast", {})
        still_held = held.in_flight
        held.release.set()
        return listed, quick, still_held, list(await asyncio.gather(*slow))

    with slow_and_fast(held) as served:
        listed, quick, still_held, answers = asyncio.run(run(served.url))
    assert [m["entry"]["name"] for m in listed[:-1]] == ["slow", "fast"]
    assert quick == {"output": "fast"}
    assert still_held == HELD
    assert answers == [{"output": "slow"}] * HELD
    assert len(reads) == 1


def test_a_name_resolved_while_twelve_resolutions_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve calls to a server whose name's resolution hangs (the test holds it), from the MCP
    client's own functions on a loop set up as its process's is (`mcp_worker.resolvers`); a call
    to another name meanwhile is resolved and answered, the twelve still held. Before, the
    resolutions ran on asyncio's default threads, six on two cores: the quick call waited for a
    thread until its own deadline and failed (`did not answer within`), as every session to a
    name did while six hung (this test fails on the old code: never more than those threads'
    resolutions at once)."""
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    held = Held()
    resolving = Held()
    """Resolutions of `held.test` begun (none ends before the test releases them)."""
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name == "held.test":
            with resolving.lock:
                resolving.in_flight += 1
                if resolving.in_flight >= HELD:
                    resolving.all_in.set()
            resolving.release.wait(CAP_S)
            raise socket.gaierror(socket.EAI_AGAIN, "held")
        return real("127.0.0.1" if name == "quick.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    policy = McpPolicy(allow_hosts=("held.test", "quick.test"), timeout_s=CAP_S)

    async def run(port: int) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
        mcp_worker.resolvers(asyncio.get_running_loop())
        url = f"http://held.test:{port}/mcp"
        slow = [asyncio.ensure_future(mcp_worker.call(url, {}, policy, "fast", {})) for _ in range(HELD)]
        waited = time.monotonic() + CAP_S
        while not resolving.all_in.is_set() and time.monotonic() < waited:
            await asyncio.sleep(0.01)
        assert resolving.all_in.is_set(), f"only {resolving.in_flight} resolutions ever ran at once"
        quick = await mcp_worker.call(f"http://quick.test:{port}/mcp", {}, policy, "fast", {})
        still = resolving.in_flight
        resolving.release.set()
        return quick, still, list(await asyncio.gather(*slow))

    try:
        with slow_and_fast(held, any_host=True) as served:
            port = int(served.url.rsplit(":", 1)[1].split("/")[0])
            quick, still, answers = asyncio.run(run(port))
    finally:
        resolving.release.set()
    assert quick == {"output": "fast"}
    assert still == HELD
    assert all(a["error"]["type"] == "http_error" for a in answers), answers
