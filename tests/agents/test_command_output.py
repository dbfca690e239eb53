"""A session's program (`command_execution` item) streams its output as
`agent.output.command_execution_output.delta` before the item is done, as the types describe it."""

from __future__ import annotations

import openai

from tests.agents.agents_support import GET_CUSTOMER, js, valid


def test_a_program_s_output_arrives_as_a_command_execution_delta(plain_client: openai.OpenAI) -> None:
    seen = []
    with plain_client.beta.agents.sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
        input=js("text('forty-two: ' + 6 * 7)"),
        stream=True,
    ) as stream:
        for event in stream:
            seen.append(valid(event))
            if event.type == "agent.session.idle":
                break
    session_id = seen[0].session.id
    deltas = [e for e in seen if e.type == "agent.output.command_execution_output.delta"]
    assert len(deltas) == 1 and deltas[0].delta == "forty-two: 42"
    done = next(e for e in seen if e.type == "agent.session.turn.item.done" and e.item.type == "command_execution")
    assert deltas[0].item_id == done.item.id and seen.index(deltas[0]) < seen.index(done)
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session_id)]
    assert [i.output for i in items if i.type == "command_execution"] == ["forty-two: 42"]
