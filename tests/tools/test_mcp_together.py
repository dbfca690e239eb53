"""A program's calls to an MCP server that one step issues together (`Promise.all`) run together,
a bounded number at a time, and all of one run's calls share the program's time limit
(`--timeout`): past it the program ends `incomplete` saying so (docs/limits.md, "MCP"). The
server is real (`MCPServer`); its handlers wait on events the test sets, and count how many calls
are in flight at once."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import Served, serve
from tests.tools.tools_support import emulator_from

PTC = {"type": "programmatic_tool_calling"}
NAMES = ("first", "second", "third", "fourth")


@dataclass
class Gate:
    """What the server's handlers share with the test: each call counts itself in flight, and
    waits until the test releases its tool by name (`release_all`: every one)."""

    together: int
    """How many calls in flight at once set `all_in`."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    all_in: threading.Event = field(default_factory=threading.Event)
    release: dict[str, threading.Event] = field(default_factory=lambda: {n: threading.Event() for n in NAMES})
    release_all: threading.Event = field(default_factory=threading.Event)
    ended: list[str] = field(default_factory=list)
    ended_one: threading.Condition = field(default_factory=threading.Condition)

    async def held(self, name: str) -> str:
        with self.lock:
            self.in_flight += 1
            if self.in_flight >= self.together:
                self.all_in.set()
        try:
            while not (self.release_all.is_set() or self.release.get(name, self.release_all).is_set()):
                await asyncio.sleep(0.005)
        finally:
            with self.lock:
                self.in_flight -= 1
        with self.ended_one:
            self.ended.append(name)
            self.ended_one.notify_all()
        return name


@contextmanager
def gated_server(gate: Gate) -> Iterator[Served]:
    server = MCPServer("gated")
    for name in (*NAMES, "wait"):

        async def tool(name: str = name) -> str:
            return await gate.held(name)

        server.tool(name=name, description=f"Answers {name!r} once released")(tool)
    try:
        with serve(server.streamable_http_app()) as served:
            yield served
    finally:
        gate.release_all.set()


@contextmanager
def emulator_with(tmp_path_factory: pytest.TempPathFactory, timeout_s: float) -> Iterator[PTCEmulator]:
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("together"),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
        limits=Limits(timeout_s=timeout_s),
    )
    with emulator_from(settings) as emulator:
        yield emulator


def mcp_tool(url: str) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "gated",
        "server_url": url,
        "allowed_callers": ["programmatic"],
        "require_approval": "never",
    }


def in_background(emulator: PTCEmulator, url: str, code: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Create a response running `code`, in a thread; the dict gets its output items."""
    got: dict[str, Any] = {}

    def create() -> None:
        try:
            with validating_client(emulator) as client:
                response = client.responses.create(model="gpt-test", tools=[PTC, mcp_tool(url)], input=js(code))
            got["output"] = [i.model_dump(mode="json", exclude_none=True) for i in response.output]
        except Exception as e:  # the test reports it
            got["error"] = e

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    return thread, got


def test_the_calls_of_one_step_are_in_flight_together_and_journaled_in_issue_order(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Four calls under one `Promise.all` reach the server together: it sees all four in flight
    before any is answered. Released last to first, they are journaled first to last, as the
    program issued them. Before, the calls were made one after another: the server never saw a
    second one while the first waited, and the first waited until the program's timeout (this
    test fails on the old code)."""
    gate = Gate(together=len(NAMES))
    calls = ", ".join(f"tools.gated.{name}({{}})" for name in NAMES)
    code = f"const got = await Promise.all([{calls}]); text(got.join(','));"
    with emulator_with(tmp_path_factory, timeout_s=30.0) as emulator, gated_server(gate) as served:
        thread, got = in_background(emulator, served.url, code)
        waited = time.monotonic() + 45  # a cap on the wait, not a figure tested
        while thread.is_alive() and not gate.all_in.wait(0.05) and time.monotonic() < waited:
            pass
        if not gate.all_in.is_set():
            gate.release_all.set()
            thread.join(60)
            pytest.fail("the server never saw the program's calls in flight together")
        for name in reversed(NAMES):  # answered last to first
            gate.release[name].set()
            with gate.ended_one:
                gate.ended_one.wait_for(lambda name=name: name in gate.ended or not thread.is_alive(), timeout=60)
        thread.join(60)
        assert "error" not in got, got
        [done] = [i for i in got["output"] if i["type"] == "program_output"]
        assert (done["status"], done["result"]) == ("completed", ",".join(NAMES))
        [entry] = [e for e in emulator.journal if e.get("hosted_calls")][-1:]
    assert gate.ended == list(reversed(NAMES))
    assert [(c["name"], c["status"]) for c in entry["hosted_calls"]] == [(n, "completed") for n in NAMES]


def never_answered(
    tmp_path_factory: pytest.TempPathFactory, code: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """`code` run under a 1 s `--timeout` against the gated server, no call ever released (never
    all in): what the create got, its `program_output` item and the run's journal entry."""
    gate = Gate(together=10**6)  # never all in: nothing is released until the end
    with emulator_with(tmp_path_factory, timeout_s=1.0) as emulator, gated_server(gate) as served:
        thread, got = in_background(emulator, served.url, code)
        thread.join(120)
        assert not thread.is_alive() and "error" not in got, got
        [done] = [i for i in got["output"] if i["type"] == "program_output"]
        [entry] = [e for e in emulator.journal if e.get("hosted_calls")][-1:]
    return got, done, entry


def test_calls_past_the_programs_time_limit_together_end_the_program_incomplete(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Twelve calls to a server that never answers (more than run at once), under a 1 s
    `--timeout`: together they may take the program's time limit, not twelve of them one after
    another. The program ends `incomplete` saying so (a 200, not a 500), the calls cut journaled
    `incomplete`. Before, each call had the whole timeout to itself, one after another (N times
    the timeout for one request), and the program ended on the first call's rejection with no word
    of the limit (this test fails on the old code)."""
    code = "await Promise.all(Array.from({length: 12}, () => tools.gated.wait({}))); text('never');"
    got, done, entry = never_answered(tmp_path_factory, code)
    assert done["status"] == "incomplete"
    assert done["result"].startswith(
        "limit: the program's calls to MCP servers took its time limit of 1 s (--timeout) together, with "
    )
    assert done["result"].endswith(
        ' still waiting for an answer or to start, so the program stopped (docs/limits.md "MCP")'
    )
    statuses = [c["status"] for c in entry["hosted_calls"]]
    assert "incomplete" in statuses and set(statuses) <= {"incomplete", "failed"}, statuses
    assert output_text(got["output"]) != "never"


def output_text(output: list[dict[str, Any]]) -> str:
    return "".join(part.get("text", "") for i in output if i["type"] == "message" for part in i.get("content", []))


def test_the_time_limit_counts_every_step_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A call that takes the whole time limit rejects at its own deadline, as alone, and the
    program may catch it; a call it makes after that has no time left, is not made, and the
    program ends `incomplete` saying so. Before, every step's call had the whole timeout again
    (the program went on calling for as long as it liked; this test fails on the old code)."""
    code = (
        "try { await tools.gated.wait({}); } catch (e) { text('caught: ' + e.message); }\n"
        "await tools.gated.first({}); text('never');"
    )
    _, done, entry = never_answered(tmp_path_factory, code)
    assert done["status"] == "incomplete"
    assert done["result"] == (
        "caught: the MCP server did not answer within 1 s (the program's --timeout)\n"
        "limit: the program's calls to MCP servers took its time limit of 1 s (--timeout) together, with 1 still "
        'waiting for an answer or to start, so the program stopped (docs/limits.md "MCP")'
    )
    assert [(c["name"], c["status"]) for c in entry["hosted_calls"]] == [("wait", "failed")]
