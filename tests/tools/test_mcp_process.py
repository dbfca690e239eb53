"""The MCP client runs in a process of its own (issue 38): the `mcp` package validates a whole
answer with the interpreter held (a 7 MB listing: some 100-250 ms per C call), and in the
server's process every other client waited meanwhile. These tests go through the HTTP API: a
7 MB listing is served while the server answers others and without the server importing `mcp`;
the MCP client's process killed mid-session fails that session cleanly, and the next one works.
Nothing is timed: the MCP servers wait on events the tests set.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools import mcp_child
from ptc_emulator.testing.server import EmulatorServer
from tests.support import js
from tests.tools.mcp_servers_support import _body, _mcp_server, _method, _replay, serve

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, os, subprocess, sys, tempfile, threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.tools import mcp_child
from ptc_emulator.testing.server import EmulatorServer

held = subprocess.Popen(
    [sys.executable, "-m", "tests.tools.mcp_held_server", "1550"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    text=True,
)
url = held.stdout.readline().strip()
# 24 MiB of body: the 7 MB listing's item fits what a store: false client can send back (11 MiB).
settings = Settings(data_dir=Path(tempfile.mkdtemp()), store="memory", pool_size=1, mcp_allow_private=True,
                    max_body_bytes=24 * 2**20)
server = EmulatorServer(settings).start()
found = {"before": "mcp" in sys.modules, "pids_before": mcp_child.pids()}
program = "Run this program.\n```js\ntext('listed')\n```"
tool = {"type": "mcp", "server_label": "big", "server_url": url, "require_approval": "never"}
body = {"model": "m", "input": program, "tools": [{"type": "programmatic_tool_calling"}, tool], "store": False}
try:
    with ThreadPoolExecutor(1) as pool, httpx.Client(base_url=server.base_url, timeout=300) as http:
        pending = pool.submit(http.post, "/responses", json=body)
        found["held"] = held.stdout.readline().strip()  # the MCP client's process waits on the listing
        health = http.get(server.base_url.removesuffix("/v1") + "/_emulator/health")
        small = http.post("/responses", json={"model": "m", "input": "Run this program.\n```js\ntext('small')\n```",
                                               "tools": [{"type": "programmatic_tool_calling"}]})
        found["pending_meanwhile"] = not pending.done()
        found["pids_meanwhile"] = mcp_child.pids()
        held.stdin.write("go\n")
        held.stdin.flush()
        answer = pending.result(timeout=300)
    found["health"] = health.status_code
    found["small"] = small.json()["output"][-1]["content"][0]["text"]
    found["status"] = answer.status_code
    listing = [item for item in answer.json()["output"] if item["type"] == "mcp_list_tools"]
    found["tools"] = len(listing[0]["tools"]) if listing else answer.text[:500]
    found["after"] = "mcp" in sys.modules or any(name.startswith("mcp.") for name in sys.modules)
    found["me"] = os.getpid()
finally:
    server.stop()
    held.kill()
    found["pids_after_stop"] = mcp_child.pids()
print(json.dumps(found))
"""


def test_a_large_listing_is_parsed_in_another_process_while_others_are_answered() -> None:
    """A fresh interpreter holds the server (so `mcp` is not imported yet) and lists 1,550 tools
    (7 MB) from a server in a third process, which holds the listing until the others were
    answered. On the code before, the server imported `mcp` and parsed the listing in a thread of
    its own process (the check of `sys.modules` fails there)."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["before"] is False and found["pids_before"] == [], found  # nothing started with the server
    assert found["held"] == "held", found
    assert found["pending_meanwhile"] is True, found
    assert found["health"] == 200 and found["small"] == "small", found
    assert len(found["pids_meanwhile"]) == 1 and found["pids_meanwhile"][0] != found["me"], found
    assert found["status"] == 200 and found["tools"] == 1550, found
    assert found["after"] is False, found  # the listing was read and validated in the other process
    assert found["pids_after_stop"] == [], found  # stopped with the app


# ---- the MCP client's process killed mid-session --------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("mcp-process"), store="memory", pool_size=1, mcp_allow_private=True
    )
    running = EmulatorServer(settings).start()
    try:
        yield running
    finally:
        running.stop()


class _Holding:
    """An MCP server whose `tools/list` (or `tools/call`) waits forever once `hold` says so, and
    notes that it was reached."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.hold = False
        self.reached = threading.Event()
        self.inner = _mcp_server(0).streamable_http_app()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.inner(scope, receive, send)
            return
        body = await _body(receive)
        if self.hold and _method(body) == self.method:
            self.reached.set()
            await asyncio.Event().wait()  # never set: the client's process dies meanwhile
        await self.inner(scope, _replay(body), send)


def _create(server: EmulatorServer, url: str, code: str) -> httpx.Response:
    tool = {
        "type": "mcp",
        "server_label": "m",
        "server_url": url,
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    body = {"model": "m", "input": js(code), "tools": [{"type": "programmatic_tool_calling"}, tool], "store": False}
    return httpx.post(f"{server.base_url}/responses", json=body, timeout=300)


def _killed_while_held(server: EmulatorServer, app: _Holding, url: str, code: str) -> httpx.Response:
    app.hold = True
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_create, server, url, code)
        assert app.reached.wait(120), "the MCP server was never reached"
        (pid,) = mcp_child.pids(server.loop)
        os.kill(pid, signal.SIGKILL)
        answer = pending.result(timeout=300)
    app.hold = False
    return answer


CALL = "try { text(await tools.m.ping({})); } catch (e) { text('caught: ' + e.message); }"


def test_a_call_whose_client_process_dies_fails_cleanly_and_the_next_works(server: EmulatorServer) -> None:
    app = _Holding("tools/call")
    with serve(app) as served:
        assert _create(server, served.url, CALL).json()["output"][-1]["content"][0]["text"] == "pong"
        (first,) = mcp_child.pids(server.loop)
        answer = _killed_while_held(server, app, served.url, CALL)
        assert answer.status_code == 200, answer.text[:500]
        assert answer.json()["output"][-1]["content"][0]["text"] == "caught: " + messages.mcp_client_gone()
        again = _create(server, served.url, CALL)
    assert again.status_code == 200, again.text[:500]
    assert again.json()["output"][-1]["content"][0]["text"] == "pong"
    assert mcp_child.pids(server.loop) != [first]  # a new process


def test_a_listing_whose_client_process_dies_fails_cleanly_and_the_next_works(server: EmulatorServer) -> None:
    app = _Holding("tools/list")
    with serve(app) as served:
        answer = _killed_while_held(server, app, served.url, CALL)
        assert answer.status_code == 424, answer.text[:500]
        assert answer.json()["error"]["message"] == messages.listing_failed("m", messages.mcp_client_gone())
        again = _create(server, served.url, CALL)
    assert again.status_code == 200, again.text[:500]
    assert again.json()["output"][-1]["content"][0]["text"] == "pong"


# ---- one client's process held: another client's calls go on -------------------------------------


class _Releasable(_Holding):
    """A `_Holding` server whose held `tools/call` answers once the test sets `release`."""

    def __init__(self) -> None:
        super().__init__("tools/call")
        self.release = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.inner(scope, receive, send)
            return
        body = await _body(receive)
        if self.hold and _method(body) == self.method:
            self.reached.set()
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        await self.inner(scope, _replay(body), send)


def _scoped(server: EmulatorServer, url: str, scope: str) -> httpx.Response:
    tool = {
        "type": "mcp",
        "server_label": "m",
        "server_url": url,
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    body = {"model": "m", "input": js(CALL), "tools": [{"type": "programmatic_tool_calling"}, tool], "store": False}
    headers = {"x-ptc-emulator-scope": scope}
    return httpx.post(f"{server.base_url}/responses", json=body, headers=headers, timeout=300)


def test_a_client_whose_mcp_process_is_stopped_does_not_hold_another_clients_calls(tmp_path: Path) -> None:
    """Scope A's call is held at its MCP server, and the test stops (SIGSTOP) the one MCP client
    process, which serves it: as when the `mcp` package validates A's large answers there with
    the interpreter held. Scope B's listing and call then go to another process and are answered.
    On the code before (one process for every client) B's sessions waited in the stopped one
    until their deadline (a 424 listing failure)."""
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=2, mcp_allow_private=True, mcp_timeout_s=20)
    running = EmulatorServer(settings).start()
    held, plain = _Releasable(), _Releasable()
    held.hold = True
    stopped: int | None = None
    try:
        with serve(held) as a_server, serve(plain) as b_server, ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_scoped, running, a_server.url, "client-a")
            assert held.reached.wait(120), "scope A's call never reached its MCP server"
            (stopped,) = mcp_child.pids(running.loop)  # the process serving A's session
            os.kill(stopped, signal.SIGSTOP)
            answer = _scoped(running, b_server.url, "client-b")
            assert answer.status_code == 200, answer.text[:500]
            assert answer.json()["output"][-1]["content"][0]["text"] == "pong"
            assert stopped in mcp_child.pids(running.loop) and len(mcp_child.pids(running.loop)) == 2
            os.kill(stopped, signal.SIGCONT)
            stopped = None
            held.release.set()
            assert pending.result(timeout=300).status_code == 200  # (its call may have met its deadline)
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        held.release.set()
        running.stop()


def test_clients_are_spread_over_the_processes_and_keep_theirs_while_a_session_lives() -> None:
    """`_bound`, without processes: a client with a live session keeps its slot; another client goes
    to the slot serving the fewest; a client alone (nothing live) goes back to a started slot."""
    place = mcp_child._Place()
    with mcp_child._bound(place, "a") as a1, mcp_child._bound(place, "a") as a2, mcp_child._bound(place, "b") as b:
        assert a1 is a2 and b is not a1
        assert (a1.clients, a1.sessions, b.clients, b.sessions) == (1, 2, 1, 1)
    assert place.bound == {} and all(s.clients == 0 == s.sessions for s in place.slots)
    assert len(place.slots) == mcp_child.CHILDREN >= 2
