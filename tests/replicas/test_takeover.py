"""A replica killed (SIGKILL) while it runs an Agents API turn: once its lease expires, another
replica takes the turn over from the session's last stored state, and the tool result the client
then sends, to two replicas, is applied once.

The test chooses the instant: the turn's program spins before its tool call, and the test kills
the replica whose lease row the database shows for the session while the program still runs (the
session is still in progress, its call not made yet)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psycopg
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import StoreUnavailable
from ptc_emulator.testing.process import ServerProcess
from tests.agents.agents_support import GET_CUSTOMER, customer, get_customer_code, js, tool_result, valid
from tests.conversations.test_concurrent_continuations import Gate
from tests.replicas.cluster import Cluster
from tests.replicas.replicas_support import SECRET, admin, replicas
from tests.support import in_process_http

LEASE_S = "1"
SPIN = js(
    "let n = 0; for (let i = 0; i < 3e8; i++) { n = (n + i) % 7; }\n"
    'const c = await tools.get_customer({customer_id: "123"});\n'
    "text(JSON.stringify({spun: n, customer: c}))"
)


@pytest.fixture
def three(postgres_cluster: Cluster, tmp_path: Any) -> Iterator[tuple[str, list[ServerProcess]]]:
    url = postgres_cluster.database()
    args = ("--lease-seconds", LEASE_S, "--timeout", "120")
    with replicas(tmp_path, url, 3, args=args) as started:
        yield url, started


def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-local", max_retries=0)


def until(what: str, check: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout  # a guard: each wait ends on the condition, long before
    while (found := check()) is None or found is False:
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)
    return found


def lease_holder(url: str, session_id: str) -> str | None:
    with psycopg.connect(url) as db:
        row = db.execute("SELECT owner FROM leases WHERE key = %s AND expires_at > now()", (session_id,)).fetchone()
    return str(row[0]) if row else None


def test_a_killed_replicas_turn_is_taken_over_and_its_result_applied_once(
    three: tuple[str, list[ServerProcess]],
) -> None:
    url, servers = three
    first = client(servers[0])
    session = valid(
        first.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input=SPIN
        )
    )
    owner = until("a replica to claim the turn", lambda: lease_holder(url, session.id))
    [running] = [s for s in servers if s.proc is not None and f":{s.proc.pid}:" in owner]
    running.kill9()  # mid-turn: its program spins, its call is not made yet
    others = [s for s in servers if s is not running]
    seen = valid(client(others[0]).beta.agents.sessions.retrieve(session.id))
    assert seen.status == "in_progress" and seen.required_actions == [], "killed before the turn paused"

    # Another replica claims the expired lease and runs the turn again from what was stored.
    until("another replica to take the turn over", lambda: lease_holder(url, session.id) not in (None, owner))
    paused = until(
        "the taken-over turn to ask for its tool call",
        lambda: (s := client(others[1]).beta.agents.sessions.retrieve(session.id)).status == "requires_action" and s,
    )
    (action,) = paused.required_actions
    result = tool_result(action, customer(action.arguments))
    # The result sent to both live replicas (a client retrying elsewhere): applied once.
    for server in others:
        client(server).beta.agents.sessions.events.create(
            session.id, events=[result], extra_headers={"Idempotency-Key": "result-1"}
        )
    client(others[0]).beta.agents.sessions.events.create(session.id, events=[result])  # and without the key
    done = until(
        "the turn to finish",
        lambda: (s := client(others[1]).beta.agents.sessions.retrieve(session.id)).status == "idle" and s,
    )
    assert done.status == "idle"
    items = [valid(i) for i in client(others[0]).beta.agents.sessions.items.list(session.id)]
    outputs = [i for i in items if i.type == "function_call_output"]
    calls = [i for i in items if i.type == "function_call"]
    assert len(outputs) == 1 and len(calls) == 1, [i.type for i in items]
    turns = [valid(t) for t in client(others[1]).beta.agents.sessions.turns.list(session.id)]
    assert [t.status for t in turns] == ["completed"]
    final = [i for i in items if i.type == "message"][-1]
    assert "Example Customer" in final.content[0].text


def test_a_killed_replicas_background_response_fails_once_its_lease_expired(
    three: tuple[str, list[ServerProcess]],
) -> None:
    """Any replica reading it then finds it failed, as a restarted server fails the background
    responses it was running; the replicas alive go on serving."""
    url, servers = three
    spin = js("let n = 0; for (let i = 0; i < 3e9; i++) { n = (n + i) % 7; }\ntext(String(n))")
    ptc = [{"type": "programmatic_tool_calling"}]
    queued = client(servers[0]).responses.create(model="m", input=spin, background=True, tools=ptc)
    owner = until("the background response's lease", lambda: lease_holder(url, queued.id))
    [running] = [s for s in servers if s.proc is not None and f":{s.proc.pid}:" in owner]
    others = [s for s in servers if s is not running]
    assert client(others[0]).responses.retrieve(queued.id).status in ("queued", "in_progress"), "still running"
    running.kill9()
    failed = until(
        "the response to be found failed",
        lambda: (r := client(others[0]).responses.retrieve(queued.id)).status == "failed" and r,
    )
    assert failed.error is not None and failed.error.code == "server_error"
    again = client(others[1]).responses.retrieve(queued.id)
    assert again.status == "failed", "stored as failed, for every replica"


def test_a_background_response_cancelled_through_another_replica_stops_where_it_runs(
    three: tuple[str, list[ServerProcess]],
) -> None:
    url, servers = three
    spin = js("let n = 0; for (let i = 0; i < 3e9; i++) { n = (n + i) % 7; }\ntext(String(n))")
    ptc = [{"type": "programmatic_tool_calling"}]
    queued = client(servers[0]).responses.create(model="m", input=spin, background=True, tools=ptc)
    owner = until("the background response's lease", lambda: lease_holder(url, queued.id))
    [running] = [s for s in servers if s.proc is not None and f":{s.proc.pid}:" in owner]
    other = next(s for s in servers if s is not running)
    cancelled = client(other).responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    # The running replica hears of the cancel, stops, and gives the lease up.
    until("the running replica to stop", lambda: lease_holder(url, queued.id) is None)
    for server in servers:
        assert client(server).responses.retrieve(queued.id).status == "cancelled"


@pytest.fixture
def three_slow(postgres_cluster: Cluster, tmp_path: Any) -> Iterator[tuple[str, list[ServerProcess]]]:
    """Three replicas whose leases are renewed only every 100 s: what happens sooner is told to
    the replicas, not found at a renewal."""
    url = postgres_cluster.database()
    args = ("--lease-seconds", "300", "--timeout", "600")
    with replicas(tmp_path, url, 3, args=args) as started:
        yield url, started


def test_a_cancel_through_another_replica_is_heard_at_once_and_is_what_every_replica_reports(
    three_slow: tuple[str, list[ServerProcess]],
) -> None:
    """Two background responses, each cancelled through a replica that does not run it. One runs a
    program that never ends: its replica lets its lease go only once the cancel reached it (its
    next renewal is 100 s away). The other waits out a scripted latency and would then finish at
    once: it stays cancelled wherever it is read, never finished over the cancel."""
    url, servers = three_slow
    runner = servers[0].proc
    assert runner is not None
    ptc = [{"type": "programmatic_tool_calling"}]
    forever = client(servers[0]).responses.create(model="m", input=js("while (true) {}"), background=True, tools=ptc)
    owner = until("the background response's lease", lambda: lease_holder(url, forever.id))
    assert f":{runner.pid}:" in owner, "the replica that created it runs it"
    assert client(servers[1]).responses.cancel(forever.id).status == "cancelled"
    until("the running replica to stop", lambda: lease_holder(url, forever.id) is None, timeout=60)
    for server in servers:
        assert client(server).responses.retrieve(forever.id).status == "cancelled"
    again = client(servers[0]).responses.create(model="m", input=js("text('still serving')"), tools=ptc)
    assert again.output_text == "still serving", "its worker was given back"

    slow = {"name": "slow", "match": {"input": "slow"}, "turns": [{"message": "done", "fault": {"latency_ms": 20_000}}]}
    admin(servers[0], "POST", "/scenarios", json=slow).raise_for_status()
    queued = client(servers[0]).responses.create(model="m", input="slow", background=True)
    until("the background response's lease", lambda: lease_holder(url, queued.id))
    assert client(servers[2]).responses.cancel(queued.id).status == "cancelled"
    until("the running replica to stop", lambda: lease_holder(url, queued.id) is None, timeout=60)
    for server in servers:
        assert client(server).responses.retrieve(queued.id).status == "cancelled"


class _Renewals:
    """A replica's leases, saying when a renewal found the database away."""

    def __init__(self, leases: Any) -> None:
        self.leases = leases
        self.failed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leases, name)

    def claim(self, key: str, owner: str, seconds: float) -> bool:
        try:
            return bool(self.leases.claim(key, owner, seconds))
        except StoreUnavailable:
            self.failed.set()  # (set from the renewal's thread: read once the test wakes)
            raise


@pytest.mark.anyio
async def test_a_turn_whose_lease_renewal_found_the_database_away_gives_its_lease_up_when_it_pauses(
    tmp_path: Path,
) -> None:
    """The database goes away while a turn runs, long enough for a renewal of its lease to fail,
    and comes back before the turn pauses for its tool call. The turn pauses and gives the lease
    up, so another replica takes the tool result at once. The code before let the failed renewal
    end the heartbeat with the error, re-raised when the turn ended: the lease was never given up,
    and another replica waited for it to expire (30 s) before it could apply the result."""
    with Cluster.started() as cluster:
        url = cluster.database()
        settings = Settings(
            data_dir=tmp_path, store=url, secret=SECRET, bundled_fixtures=False, pool_size=1, lease_s=15.0
        )
        async with in_process_http(settings) as (http, app):
            engine = app.state.emulator.engine
            gate = Gate(engine.model, expected=1)
            engine.model = gate
            ownership = app.state.emulator.agents.ownership
            renewals = _Renewals(ownership.leases)
            ownership.leases = renewals
            beta = {"OpenAI-Beta": "agents=v1"}
            made = await http.post(
                "/v1/agents/sessions",
                headers=beta,
                json={
                    "environment": {"type": "none"},
                    "agent": {"model": "gpt-5", "tools": [GET_CUSTOMER]},
                    "input": get_customer_code("123"),
                },
            )
            assert made.status_code == 200, made.text
            session_id = made.json()["id"]
            await asyncio.wait_for(gate.all_in.wait(), 60)  # (a guard) the turn runs, its lease held
            await asyncio.to_thread(cluster.halt)
            deadline = time.monotonic() + 60  # a guard: a renewal comes every 5 s
            while not renewals.failed.is_set():
                assert time.monotonic() < deadline, "no renewal found the database away"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(cluster.resume)
            gate.open.set()
            deadline = time.monotonic() + 60  # a guard
            while True:
                seen = await http.get(f"/v1/agents/sessions/{session_id}", headers=beta)
                if seen.status_code == 200 and seen.json()["status"] == "requires_action":
                    break
                assert seen.status_code in (200, 503) and time.monotonic() < deadline, seen.text
                await asyncio.sleep(0.05)
            harness = app.state.emulator.agents
            while session_id in harness._driving:  # the turn's task ends (a guard: the deadline above)
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # Its last renewal before the failed one was a third of the lease (5 s) earlier at most: the
            # lease would still be held for 10 s had the turn not given it up.
            assert await asyncio.to_thread(lease_holder, url, session_id) is None, "the paused turn's lease is given up"


def test_a_taken_over_turn_plays_the_scenario_the_store_holds_not_the_one_its_replica_last_read(
    three: tuple[str, list[ServerProcess]],
) -> None:
    """The scenario changed through one replica while another's turn runs; both die; the last one
    takes the turn over with no request having made it read the scenarios since: it plays the
    changed scenario (before, the one it held at its last request)."""
    url, servers = three
    driver, taker, writer = servers
    # The driver's model step waits 10 minutes (a scripted latency, which no load shortens: a
    # program spinning the CPU ended early on a busy machine, and the turn with it, before the kill).
    turns = [{"message": "VERSION 1", "fault": {"latency_ms": 600_000}}]
    first = {"name": "versioned", "match": {"input": "versioned turn"}, "turns": turns}
    assert admin(writer, "POST", "/scenarios", json=first).status_code == 201
    assert "versioned" in [s["name"] for s in admin(taker, "GET", "/scenarios").json()["data"]]  # taker: version 1
    session = valid(
        client(driver).beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5"}, input="versioned turn"
        )
    )
    owner = until("the driver to claim the turn", lambda: lease_holder(url, session.id))
    assert driver.proc is not None and f":{driver.proc.pid}:" in owner
    second = {"name": "versioned", "match": {"input": "versioned turn"}, "turns": [{"message": "VERSION 2"}]}
    assert admin(writer, "POST", "/scenarios", json=second).status_code == 201
    writer.kill9()
    driver.kill9()  # mid-turn: its model step waits
    seen = valid(client(taker).beta.agents.sessions.retrieve(session.id))  # a read: no refresh
    assert seen.status == "in_progress", "killed after the turn ended"
    done = until(
        "the taken-over turn to finish",
        lambda: (s := client(taker).beta.agents.sessions.retrieve(session.id)).status != "in_progress" and s,
    )
    assert done.status == "idle"
    items = [valid(i) for i in client(taker).beta.agents.sessions.items.list(session.id)]
    texts = [c.text for i in items if i.type == "message" and i.role == "assistant" for c in i.content]
    assert texts == ["VERSION 2"], texts
