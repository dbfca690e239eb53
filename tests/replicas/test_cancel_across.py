"""A cancel sent to one replica while another plays the turn's model step (held by the test: its
program waits on an MCP tool the test answers late) ends the turn `cancelled` while the step is
still held: the driving replica finds the cancel asked and drops the step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.agents.agents_support import valid
from tests.agents.cancel_support import CANCEL, HELD_PROGRAM, Held, held_server
from tests.replicas.cluster import Cluster
from tests.replicas.replicas_support import replicas

GUARD_S = 60.0  # the client's timeout on the cancel: a guard, the 202 comes long before


@pytest.fixture
def two(postgres_cluster: Cluster, tmp_path: Any) -> Iterator[list[ServerProcess]]:
    args = ("--mcp-allow-host", "127.0.0.1", "--timeout", "120")
    with replicas(tmp_path, postgres_cluster.database(), 2, args=args) as started:
        yield started


@pytest.fixture
def held() -> Iterator[Held]:
    with held_server() as server:
        yield server


def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-local", max_retries=0, timeout=GUARD_S)


def test_a_cancel_on_another_replica_ends_the_running_step(two: list[ServerProcess], held: Held) -> None:
    first, second = client(two[0]), client(two[1])
    session = valid(
        first.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [held.tool()]}, input=HELD_PROGRAM
        )
    )
    assert held.entered.wait(GUARD_S), "the program never called the held tool"
    # the turn is driven by the replica that made the session: the cancel goes to the other one
    second.beta.agents.sessions.events.create(session.id, events=[CANCEL])
    assert not held.release.is_set()  # answered while the step is still held
    (turn,) = [valid(t) for t in first.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "cancelled"
    assert valid(second.beta.agents.sessions.retrieve(session.id)).status == "idle"
    held.release.set()
    items = [valid(i) for i in second.beta.agents.sessions.items.list(session.id)]
    assert [(i.type, i.role) for i in items] == [("message", "user")]
