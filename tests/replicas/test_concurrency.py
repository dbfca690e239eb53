"""Two replicas on one database receiving the same continuation at the same instant: the
outcome is what one server alone gives (tests/conversations/test_concurrent_continuations.py),
decided by the database, since neither replica's locks can see the other's request.

The two replicas are two apps in this process, each with its own store (its own connections),
engine and V8 pool, on one PostgreSQL database with one secret. Each app's model is wrapped in
a gate holding its response after it read its history; when both wait, both are let go at once
(no sleep, no race)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from tests.conversations.test_concurrent_continuations import PROGRAM, Gate, create, one_wins
from tests.conversations.test_one_answer_per_continuation import COPIES, one_answer, replica, send_copies
from tests.replicas.replicas_support import SECRET
from tests.support import add_answers, in_process_http, js

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

Replica = tuple[httpx.AsyncClient, Any]


@pytest.fixture
async def two(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    def settings(n: int) -> Settings:
        return Settings(
            data_dir=tmp_path / f"r{n}", store=postgres_url, secret=SECRET, bundled_fixtures=False, pool_size=1
        )

    async with in_process_http(settings(0)) as first, in_process_http(settings(1)) as second:
        yield first, second


async def both_at_once(replicas: tuple[Replica, Replica], **body: Any) -> list[httpx.Response]:
    """The same continuation to each replica, both held in flight together, then both let go."""
    gates = []
    for _, app in replicas:
        engine = app.state.emulator.engine
        gates.append(Gate(engine.model, expected=1))
        engine.model = gates[-1]
    open_ = asyncio.Event()
    for gate in gates:
        gate.open = open_
    try:
        sent = [asyncio.ensure_future(create(http, **body)) for http, _ in replicas]
        await asyncio.wait_for(asyncio.gather(*(g.all_in.wait() for g in gates)), 60)  # (a guard)
        assert not any(task.done() for task in sent)
        open_.set()
        return list(await asyncio.gather(*sent))
    finally:
        for (_, app), gate in zip(replicas, gates, strict=True):
            app.state.emulator.engine.model = gate.model


async def test_two_replicas_continuing_one_paused_program_one_wins(two: tuple[Replica, Replica]) -> None:
    (first, _), (second, _) = two
    paused = (await create(first, input=PROGRAM)).json()
    assert [i["type"] for i in paused["output"]] == ["program", "function_call"]
    body = {"previous_response_id": paused["id"], "input": add_answers(paused["output"])}

    replies = await both_at_once(two, **body)
    won = one_wins(replies, "previous_response_continued", "previous_response_id")
    assert [i["type"] for i in won["output"]] == ["program_output", "message"]
    for http in (first, second):
        assert (await http.get(f"/v1/responses/{won['id']}")).status_code == 200
        assert (await http.get("/_emulator/health")).json()["stored_responses"] == 2, "the paused one and the winner"
    statuses = sorted(e["status"] for e in (await second.get("/_emulator/journal")).json()["data"])
    assert statuses == [200, 200, 400], "one journal for both"
    after = await second.post(
        "/v1/responses", json={"model": "m", "previous_response_id": won["id"], "input": js("text('next');")}
    )
    assert after.status_code == 200, after.text


async def test_two_replicas_continuing_one_conversation_one_appends(two: tuple[Replica, Replica]) -> None:
    (first, _), (second, _) = two
    conv = (await first.post("/v1/conversations", json={})).json()["id"]
    paused = await create(second, conversation=conv, input=PROGRAM)
    assert [i["type"] for i in paused.json()["output"]] == ["program", "function_call"]

    replies = await both_at_once(two, conversation=conv, input=add_answers(paused.json()["output"]))
    won = one_wins(replies, "conversation_locked", "conversation")
    assert [i["type"] for i in won["output"]] == ["program_output", "message"]
    listed = (await first.get(f"/v1/conversations/{conv}/items", params={"order": "asc", "limit": 100})).json()
    ids = [item["id"] for item in listed["data"]]
    assert len(ids) == len(set(ids)), "no item twice"
    kinds = [item["type"] for item in listed["data"]]
    assert kinds == ["message", "program", "function_call", "function_call_output", "program_output", "message"]
    after = await create(second, conversation=conv, input=js("text('next');"))
    assert after.status_code == 200, after.text


async def test_hundreds_of_copies_of_one_continuation_across_two_replicas_keep_one(
    postgres_url: str, tmp_path: Path
) -> None:
    """tests/conversations/test_one_answer_per_continuation.py across two replicas: the copies go
    to each in turn; each lets its first half in at once and the rest once those were answered.
    The database keeps one continuation; every other copy is the lost race's 400, or (sent again
    after it was answered) the one answer itself."""

    def settings(n: int) -> Settings:
        return Settings(
            data_dir=tmp_path / f"r{n}", store=postgres_url, secret=SECRET, bundled_fixtures=False, pool_size=1
        )

    per_replica = COPIES // 2
    async for first in replica(settings(0), per_replica // 2):
        async for second in replica(settings(1), per_replica // 2):
            http = first[0]
            first[2].open.set()
            paused = (await create(http, input=PROGRAM)).json()
            first[2].open.clear()
            first[2].entered = 0
            body = {"previous_response_id": paused["id"], "input": add_answers(paused["output"])}

            replies, played = await send_copies([first, second], body, COPIES)
            won = one_answer(replies, paused["id"], late=COPIES - 2 * (per_replica // 2))
            assert played == [per_replica // 2] * 2, "the late ones played nothing"
            for other in (first[0], second[0]):
                assert (await other.get("/_emulator/health")).json()["stored_responses"] == 2
                assert (await other.get(f"/v1/responses/{won['id']}")).json() == won


class HeldRead:
    """A replica's scenarios part whose first read after its own write waits until `go` is set:
    another replica's write lands in between (no sleep, no race)."""

    def __init__(self, scenarios: Any) -> None:
        self.scenarios = scenarios
        self.armed = False
        self.held = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scenarios, name)

    def put(self, scenario: Any) -> None:
        self.scenarios.put(scenario)
        self.armed = True

    def changes(self, *args: Any) -> Any:  # (called off the event loop, in a thread)
        if self.armed:
            self.armed = False
            self.held.set()
            assert self.go.wait(60)  # (a guard)
        return self.scenarios.changes(*args)


async def test_concurrent_scenario_writes_to_one_name_converge_on_the_databases_last(
    two: tuple[Replica, Replica],
) -> None:
    """Replica A writes version 2 of a scenario; before A reads the scenarios back, replica B
    writes version 1 of it, which the database keeps last. Both replicas then serve version 1."""
    (first, first_app), (second, _) = two
    scope = {"x-ptc-emulator-scope": "test-order"}

    def version(n: int) -> dict[str, Any]:
        return {"name": "same", "match": {"input": "which"}, "turns": [{"message": f"version {n}"}]}

    async def served(http: httpx.AsyncClient) -> str:
        reply = await http.post("/v1/responses", json={"model": "m", "input": "which"}, headers=scope)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["output"][0]["content"][0]["text"])

    assert (await first.post("/_emulator/scenarios", json=version(1), headers=scope)).status_code == 201
    assert [await served(http) for http in (first, second)] == ["version 1", "version 1"]

    store = first_app.state.emulator.store
    held = store.scenarios = HeldRead(store.scenarios)
    try:
        writing = asyncio.ensure_future(first.post("/_emulator/scenarios", json=version(2), headers=scope))
        assert await asyncio.to_thread(held.held.wait, 60)  # A wrote version 2, and reads
        assert (await second.post("/_emulator/scenarios", json=version(1), headers=scope)).status_code == 201
        held.go.set()
        assert (await writing).status_code == 201
    finally:
        held.go.set()
        store.scenarios = held.scenarios
    assert [await served(http) for http in (first, second)] == ["version 1", "version 1"]
    for http in (first, second):
        listed = (await http.get("/_emulator/scenarios", headers=scope)).json()["data"]
        assert [s["name"] for s in listed if s["scope"] == "test-order"] == ["same"]
