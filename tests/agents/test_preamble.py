"""A scenario turn's `preamble` (a message with `phase: commentary` said before a call or a program
in the same response) in an Agents API session, through `client.beta.agents`: it is the agent's
commentary, stored and streamed as such, and the turn goes on to its final answer."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, events_until, js, valid

pytestmark = pytest.mark.sdk


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Any:
    return ptc_emulator.client(max_retries=0)


def assistant_messages(client: openai.OpenAI, session_id: str) -> list[tuple[str | None, str]]:
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session_id)]
    return [(i.phase, i.content[0].text) for i in items if i.type == "message" and i.role == "assistant"]


def test_a_program_with_a_preamble_ends_with_the_final_message(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    """The program ends in the step that began it (no tool call): the turn goes on to the next
    response, the scenario's message, as over /v1/responses."""
    ptc_emulator.add_scenario(
        {
            "name": "agents-preamble-program",
            "match": {"input": "^preamble program$"},
            "turns": [
                {"preamble": "Computing now.", "program": 'text("42");', "with_output": False},
                {"message": "Result {{ result }}"},
            ],
        }
    )
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": []}, input="preamble program"
        )
    )
    events_until(client, session.id, "agent.session.idle")
    (turn,) = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "completed", turn
    assert assistant_messages(client, session.id) == [("commentary", "Computing now."), ("final_answer", "Result 42")]
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items] == ["message", "message", "command_execution", "message"]


def test_the_stream_helpers_output_text_leaves_the_preamble_out(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "agents-preamble-call",
            "match": {"input": "^preamble call$"},
            "turns": [
                {"preamble": "Looking up.", "call": {"name": "get_customer", "arguments": {"customer_id": "1"}}},
                {"message": "Final: {{ output }}"},
            ],
        }
    )
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input=js('text("ready")')
        )
    )
    events_until(client, session.id, "agent.session.idle")
    with client.beta.agents.sessions.stream(
        session.id, input="preamble call", tool_handlers={"get_customer": lambda args: "cust"}
    ) as stream:
        assert stream.get_final_result().output_text == "Final: cust"
    said = assistant_messages(client, session.id)[-2:]
    assert said == [("commentary", "Looking up."), ("final_answer", "Final: cust")]
