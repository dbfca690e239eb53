"""A replica that stalls past its lease (a paused VM) and then goes on: what it then saves of the
session is refused, so the turn another replica took over, the client's tool result, a delete
and another replica's update all stay as they were.

Two replicas in this process on one PostgreSQL database. The test decides every instant instead
of racing time: the stalled replica's model step is held at a gate (`Gate`), and its lease is no
longer renewed in the database while it "stalls" (`_Stalled`: its renewals answer yes without
asking, as a paused process asks nothing), so its lease expires by the database's clock and the
other replica takes the turn over, as it would from a paused one. The gate is then opened: the
stalled replica's step goes on from the document it read before the stall. Before, its save was
an unconditional upsert: it wrote its stale step over the other replica's (the client's tool result
and the final answer gone, a completed turn `requires_action` again under a new call id) and put
a deleted session back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from tests.agents.agents_support import GET_CUSTOMER, get_customer_code
from tests.conversations.test_concurrent_continuations import Gate
from tests.replicas.replicas_support import SECRET
from tests.replicas.test_takeover import lease_holder
from tests.support import in_process_http

BETA = {"OpenAI-Beta": "agents=v1"}
LEASE_S = 1.0
GUARD_S = 90.0
"""A guard only: each wait ends on its condition, long before."""


class _Stalled:
    """A replica's leases: while `stalled`, a claim of a key it holds answers yes without asking
    the database (a paused process renews nothing), so the lease expires there."""

    def __init__(self, leases: Any) -> None:
        self.leases = leases
        self.stalled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leases, name)

    def claim(self, key: str, owner: str, seconds: float) -> bool:
        if self.stalled:
            return True
        return bool(self.leases.claim(key, owner, seconds))


@contextlib.asynccontextmanager
async def _two(url: str, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any, httpx.AsyncClient, Any]]:
    def settings(name: str) -> Settings:
        return Settings(
            data_dir=tmp_path / name, store=url, secret=SECRET, bundled_fixtures=False, pool_size=2, lease_s=LEASE_S
        )

    async with in_process_http(settings("a")) as (a, app_a), in_process_http(settings("b")) as (b, app_b):
        yield a, app_a, b, app_b


async def _until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + GUARD_S
    while not (found := await check()):
        assert time.monotonic() < deadline, f"still waiting for {what}"
        await asyncio.sleep(0.02)
    return found


async def _session(http: httpx.AsyncClient, sid: str) -> dict[str, Any] | None:
    reply = await http.get(f"/v1/agents/sessions/{sid}", headers=BETA)
    return reply.json() if reply.status_code == 200 else None


async def _status(http: httpx.AsyncClient, sid: str, status: str) -> dict[str, Any] | None:
    found = await _session(http, sid)
    return found if found is not None and found["status"] == status else None


async def _create(http: httpx.AsyncClient) -> str:
    made = await http.post(
        "/v1/agents/sessions",
        headers=BETA,
        json={
            "environment": {"type": "none"},
            "agent": {"model": "gpt-5", "tools": [GET_CUSTOMER]},
            "input": get_customer_code("123"),
        },
    )
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def _refusals(caplog: pytest.LogCaptureFixture, sid: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if sid in r.getMessage() and "a save was refused" in r.getMessage()]


@pytest.mark.anyio
async def test_a_replica_stalled_past_its_lease_cannot_save_over_the_turn_taken_over_nor_undo_a_delete(
    postgres_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ptc_emulator.emulator.agents.harness")
    async with _two(postgres_url, tmp_path) as (a, app_a, b, app_b):
        engine = app_a.state.emulator.engine
        gate = Gate(engine.model, expected=2)
        engine.model = gate
        harness_a = app_a.state.emulator.agents
        stalled = _Stalled(harness_a.ownership.leases)
        harness_a.ownership.leases = stalled
        answered, deleted = await _create(a), await _create(a)
        await asyncio.wait_for(gate.all_in.wait(), GUARD_S)  # (a guard) both steps play on A, leases held
        owner_a = harness_a.ownership.owner
        for sid in (answered, deleted):
            assert await asyncio.to_thread(lease_holder, postgres_url, sid) == owner_a
        stalled.stalled = True  # A stalls: its step is held, its leases expire

        # B takes both turns over and pauses them for their tool call.
        paused = await _until("B to take the first turn over", lambda: _status(b, answered, "requires_action"))
        await _until("B to take the second turn over", lambda: _status(b, deleted, "requires_action"))
        (action,) = paused["required_actions"]
        result = {
            "type": "agent.session.input.tool_result",
            "turn_id": action["turn_id"],
            "call_id": action["call_id"],
            "success": True,
            "output": json.dumps({"found": True, "customer": {"name": "Example Customer"}}),
        }
        sent = await b.post(f"/v1/agents/sessions/{answered}/events", headers=BETA, json={"events": [result]})
        assert sent.status_code == 202, sent.text
        done = await _until("the taken-over turn to finish", lambda: _status(b, answered, "idle"))
        assert (await b.delete(f"/v1/agents/sessions/{deleted}", headers=BETA)).status_code == 200
        events = app_b.state.emulator.store.events
        logged = [await asyncio.to_thread(events.last, sid) for sid in (answered, deleted)]

        # A goes on: its held steps end, each from the document it read before it stalled.
        stalled.stalled = False
        gate.open.set()
        while answered in harness_a._driving or deleted in harness_a._driving:  # its drives end
            await asyncio.sleep(0.02)

        for http in (a, b):
            seen = await _session(http, answered)
            assert seen == done, "the taken-over turn, finished, is as it was"
            items = (await http.get(f"/v1/agents/sessions/{answered}/items", headers=BETA)).json()["data"]
            kinds = [i["type"] for i in items]
            assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1, kinds
            assert [i["call_id"] for i in items if i["type"] == "function_call"] == [action["call_id"]]
            assert "Example Customer" in items[-1]["content"][0]["text"]
            turns = (await http.get(f"/v1/agents/sessions/{answered}/turns", headers=BETA)).json()["data"]
            assert [t["status"] for t in turns] == ["completed"]
            assert await _session(http, deleted) is None, "the deleted session stays deleted"
        after = [await asyncio.to_thread(events.last, sid) for sid in (answered, deleted)]
        assert after == logged, "no event of a stale step was appended"
        assert _refusals(caplog, answered) and _refusals(caplog, deleted), "each refusal is logged"


class _HeldPut:
    """A replica's session records, whose first `put` of a session waits in its worker thread
    until `go` is set (`entered` says it waits): the replica stalls between its read and its save."""

    def __init__(self, records: Any) -> None:
        self.records = records
        self.entered = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.records, name)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            assert self.go.wait(GUARD_S), "a guard"
        return self.records.put(*args, **kwargs)


@pytest.mark.anyio
async def test_an_update_from_a_replica_stalled_past_its_lease_is_applied_to_the_session_as_it_stands(
    postgres_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every writer of a session saves at the version it read: a stalled update is refused, then
    read and applied again, so neither its change nor the one made meanwhile is lost."""
    caplog.set_level(logging.WARNING, logger="ptc_emulator.emulator.agents.harness")
    async with _two(postgres_url, tmp_path) as (a, app_a, b, _):
        made = await b.post(
            "/v1/agents/sessions",
            headers=BETA,
            json={"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "input": "hello", "metadata": {}},
        )
        assert made.status_code == 200, made.text
        sid = made.json()["id"]
        await _until("the first turn to end", lambda: _status(b, sid, "idle"))
        harness_a = app_a.state.emulator.agents
        stalled = _Stalled(harness_a.ownership.leases)
        harness_a.ownership.leases = stalled
        held = _HeldPut(harness_a.records)
        harness_a.records = held
        update = asyncio.ensure_future(
            a.post(f"/v1/agents/sessions/{sid}", headers=BETA, json={"agent": {"model": "gpt-5-mini"}})
        )
        assert await asyncio.to_thread(held.entered.wait, GUARD_S), "A's update reached its save"
        stalled.stalled = True  # A stalls there: its lease expires
        meanwhile = await b.post(f"/v1/agents/sessions/{sid}", headers=BETA, json={"metadata": {"by": "b"}})
        assert meanwhile.status_code == 200, meanwhile.text  # once A's lease expired
        stalled.stalled = False
        held.go.set()
        updated = await update
        assert updated.status_code == 200, updated.text
        assert updated.json()["agent"]["model"] == "gpt-5-mini" and updated.json()["metadata"] == {"by": "b"}
        for http in (a, b):
            seen = await _session(http, sid)
            assert seen is not None
            assert seen["agent"]["model"] == "gpt-5-mini" and seen["metadata"] == {"by": "b"}, "both changes kept"
        assert _refusals(caplog, sid), "the refusal is logged"
