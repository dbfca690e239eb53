"""`agent.session.input.cancel` sent while a model step plays (the step held by the test: its
program waits on an MCP tool the test answers late) ends the turn `cancelled` at once: the 202
comes while the step is still held, the step's output is dropped, and the session takes a new turn."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import events_until, js, valid
from tests.agents.cancel_support import CANCEL, HELD_PROGRAM, Held, held_server

pytestmark = pytest.mark.sdk

GUARD_S = 60.0
"""The client's timeout on the cancel: a guard (before the fix the 202 came only once the step
ended, here never, as the test holds it)."""


@pytest.fixture
def held() -> Any:
    with held_server() as server:
        yield server


def test_a_cancel_during_a_step_ends_the_turn_cancelled(ptc_emulator: PTCEmulator, held: Held) -> None:
    client = ptc_emulator.client(max_retries=0)
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [held.tool()]}, input=HELD_PROGRAM
        )
    )
    assert held.entered.wait(GUARD_S), "the program never called the held tool"
    with client.beta.agents.sessions.events.stream(session.id) as stream:
        client.with_options(timeout=GUARD_S).beta.agents.sessions.events.create(session.id, events=[CANCEL])
        assert not held.release.is_set()  # answered while the step is still held
        seen = []
        for event in stream:
            seen.append(valid(event).type)
            if event.type == "agent.session.idle":
                break
    assert seen[0] == "agent.session.in_progress" and "agent.session.turn.cancelled" in seen, seen
    (turn,) = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "cancelled"
    assert valid(client.beta.agents.sessions.retrieve(session.id)).status == "idle"
    held.release.set()
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert [(i.type, i.role) for i in items] == [("message", "user")]  # the dropped step left nothing
    again = [{"role": "user", "content": [{"type": "input_text", "text": js('text("again")')}]}]
    follow = {"type": "agent.session.input.message", "input": again}
    client.beta.agents.sessions.events.create(session.id, events=[follow])  # type: ignore[list-item]
    events_until(client, session.id, "agent.session.idle")
    turns = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
    assert [t.status for t in turns] == ["cancelled", "completed"]
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text == "again"
    assert all(i.turn_id == turns[1].id for i in items[1:])  # the held step's late output never landed


def test_a_refused_cancel_body_cancels_nothing(ptc_emulator: PTCEmulator, held: Held) -> None:
    """A body with a cancel and an event that is refused is refused whole: the turn plays on."""
    client = ptc_emulator.client(max_retries=0)
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [held.tool()]}, input=HELD_PROGRAM
        )
    )
    assert held.entered.wait(GUARD_S)
    result = {"type": "agent.session.input.tool_result", "turn_id": "turn_x", "call_id": "call_x", "success": True,
              "output": "x"}  # fmt: skip
    with pytest.raises(openai.BadRequestError):
        client.with_options(timeout=GUARD_S).beta.agents.sessions.events.create(
            session.id,
            events=[CANCEL, result],  # type: ignore[list-item]
        )
    held.release.set()
    events_until(client, session.id, "agent.session.idle")
    (turn,) = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "completed"
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text == "released"
