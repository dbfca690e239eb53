"""The Agents API endpoints one by one: agents CRUD, sessions, pages, the beta header, tool result
rules (unknown, already answered, duplicate, failure), Idempotency-Key, cancel, and refusals."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, customer, events_until, js, tool_result, valid

pytestmark = pytest.mark.sdk  # the Agents API's endpoints through the official client, every body validated


def start(client: openai.OpenAI, text: str, **agent: Any) -> tuple[Any, list[Any]]:
    """A session on `text`, streamed until it needs input or is idle: (session, required actions)."""
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER], **agent}, input=text
    )
    last = events_until(client, session.id, "agent.session.requires_action", "agent.session.idle")[-1]
    return valid(session), list(last.session.required_actions)


TWO_CALLS = js(
    "const [a, b] = await Promise.all([tools.get_customer({customer_id: '123'}), "
    "tools.get_customer({customer_id: '7'})]);\ntext(`${a.found} ${b.found}`)"
)


def test_agents_crud_and_a_session_from_a_saved_agent(plain_client: openai.OpenAI) -> None:
    agents = plain_client.beta.agents
    made = valid(agents.create(model="gpt-5", name="support", instructions="Be brief.", tools=[GET_CUSTOMER]))
    assert made.object == "agent" and made.tools[0].to_dict()["defer_loading"] is False
    assert valid(agents.retrieve(made.id)).name == "support"
    updated = valid(agents.update(made.id, name="support-2", metadata={"team": "a"}))
    assert updated.name == "support-2" and updated.instructions == "Be brief." and updated.metadata == {"team": "a"}
    others = [valid(agents.create(model="gpt-5")) for _ in range(2)]
    listed = [valid(a).id for a in agents.list(limit=1)]  # auto-paging, one per page, newest first
    assert listed[:3] == [others[1].id, others[0].id, made.id]

    session = valid(agents.sessions.create(environment={"type": "none"}, agent_id=made.id, input=js('text("hi")')))
    assert session.agent.id == made.id and session.agent.instructions == "Be brief."
    events_until(plain_client, session.id, "agent.session.idle")
    assert [valid(s).id for s in agents.sessions.list(agent_id=made.id)] == [session.id]
    assert valid(agents.sessions.update(session.id, metadata={"k": "v"})).metadata == {"k": "v"}
    assert [s.id for s in agents.sessions.list(metadata={"k": "v"})] == [session.id]
    assert [s.id for s in agents.sessions.list(metadata={"k": "other"})] == []
    deleted = agents.sessions.delete(session.id)
    assert deleted.deleted and deleted.object == "agent.session.deleted"
    with pytest.raises(openai.NotFoundError):
        agents.sessions.retrieve(session.id)
    assert agents.delete(made.id).object == "agent.deleted"
    with pytest.raises(openai.NotFoundError):
        agents.retrieve(made.id)


def test_the_beta_header_is_required(ptc_emulator: PTCEmulator) -> None:
    url = ptc_emulator.base_url + "/agents"
    reply = httpx.post(url, json={"model": "gpt-5"}, headers={"Authorization": "Bearer sk-test"})
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_beta" and "OpenAI-Beta" in reply.json()["error"]["message"]


def test_unknown_call_answered_call_and_duplicate(plain_client: openai.OpenAI) -> None:
    session, (action,) = start(plain_client, "Look up customer 123.")
    events = plain_client.beta.agents.sessions.events
    with pytest.raises(openai.BadRequestError) as caught:
        events.create(session.id, events=[{**tool_result(action, "x"), "call_id": "call_nope"}])
    assert caught.value.body == {
        "message": "Unknown pending tool call: call_nope",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
    with pytest.raises(openai.BadRequestError, match="Unknown pending tool call"):  # the right call, another turn
        events.create(session.id, events=[{**tool_result(action, "x"), "turn_id": "turn_other"}])
    result = tool_result(action, customer(action.arguments))
    events.create(session.id, events=[result])
    events.create(session.id, events=[result])  # the same delivery again: accepted, not applied again
    with pytest.raises(openai.BadRequestError) as caught:
        events.create(session.id, events=[tool_result(action, {"found": False})])
    assert caught.value.code == "tool_result_already_submitted"
    events_until(plain_client, session.id, "agent.session.idle")
    types = [valid(i).type for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert types.count("function_call_output") == 1 and types.count("message") == 2


def test_requires_action_until_every_result_arrived(plain_client: openai.OpenAI) -> None:
    session, actions = start(plain_client, TWO_CALLS)
    assert sorted(a.arguments["customer_id"] for a in actions) == ["123", "7"]
    first, second = actions
    plain_client.beta.agents.sessions.events.create(session.id, events=[tool_result(first, customer(first.arguments))])
    waiting = valid(plain_client.beta.agents.sessions.retrieve(session.id))
    assert waiting.status == "requires_action" and waiting.required_actions == [second]
    (turn,) = plain_client.beta.agents.sessions.turns.list(session.id)
    assert valid(turn).status == "waiting"
    plain_client.beta.agents.sessions.events.create(
        session.id, events=[tool_result(second, customer(second.arguments))]
    )
    events_until(plain_client, session.id, "agent.session.idle")
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text == "true false"
    page = plain_client.beta.agents.sessions.items.list(session.id, limit=2)
    assert len(page.data) == 2 and page.has_more and [i.id for i in page] == [i.id for i in items]
    turn = valid(plain_client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id))
    assert turn.status == "completed" and turn.usage is not None and turn.usage.output_tokens > 0
    in_turn = plain_client.beta.agents.sessions.turns.items.list(turn.id, session_id=session.id)
    assert [i.id for i in in_turn] == [i.id for i in items]


def test_a_failed_result_rejects_the_call(plain_client: openai.OpenAI) -> None:
    code = js(
        "try { await tools.get_customer({customer_id: '1'}); text('ok') }\ncatch (e) { text('error: ' + e.message) }"
    )
    session, (action,) = start(plain_client, code)
    plain_client.beta.agents.sessions.events.create(session.id, events=[tool_result(action, error="no such table")])
    events_until(plain_client, session.id, "agent.session.idle")
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text == "error: no such table"
    output = next(i for i in items if i.type == "function_call_output")
    assert output.status == "failed" and output.error == "no such table" and output.output is None


def test_idempotency_key_applies_input_once(plain_client: openai.OpenAI) -> None:
    session, _ = start(plain_client, js('text("one")'))
    message = {
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": js('text("two")')}]}],
    }
    events = plain_client.beta.agents.sessions.events
    events.create(session.id, events=[message], idempotency_key="key-1")
    events.create(session.id, events=[message], idempotency_key="key-1")  # a retry: applied once
    with pytest.raises(openai.BadRequestError) as caught:
        events.create(session.id, events=[{**message, "input": []}], idempotency_key="key-1")
    assert caught.value.code in ("idempotency_key_reused", "empty_array")
    events_until(plain_client, session.id, "agent.session.idle")
    turns = [valid(t) for t in plain_client.beta.agents.sessions.turns.list(session.id)]
    assert [t.status for t in turns] == ["completed", "completed"]


def test_input_while_busy_and_cancel(plain_client: openai.OpenAI) -> None:
    session, (action,) = start(plain_client, "Look up customer 123.")
    message = {
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}],
    }
    with pytest.raises(openai.BadRequestError) as caught:
        plain_client.beta.agents.sessions.events.create(session.id, events=[message])
    assert caught.value.code == "active_turn_not_steerable"
    plain_client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    idle = valid(plain_client.beta.agents.sessions.retrieve(session.id))
    assert idle.status == "idle" and idle.required_actions == []
    assert [valid(t).status for t in plain_client.beta.agents.sessions.turns.list(session.id)] == ["cancelled"]
    with pytest.raises(openai.BadRequestError, match="Unknown pending tool call"):
        plain_client.beta.agents.sessions.events.create(session.id, events=[tool_result(action, "late")])


def test_a_turn_the_model_cannot_play_fails_clearly(plain_client: openai.OpenAI) -> None:
    session = plain_client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input="What's up?"
    )
    events_until(plain_client, session.id, "agent.session.idle")
    (turn,) = [valid(t) for t in plain_client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "failed" and turn.error is not None and turn.error.code == "invalid_request"
    assert "No scenario matches" in turn.error.message
    assert valid(plain_client.beta.agents.sessions.retrieve(session.id)).status == "idle"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"environment": {"type": "openai_hosted"}}, "environment.type"),
        ({"environment": {"type": "self_hosted", "workspace_directory": "/w"}}, "environment.type"),
        ({"agent": {"model": "m", "tools": [{"type": "mcp", "server_label": "x"}]}}, "agent.tools[0].type"),
        ({"agent": {"model": "m", "tools": [{**GET_CUSTOMER, "defer_loading": True}]}}, "agent.tools[0].defer_loading"),
        ({"agent": {"model": "m", "tools": [{"type": "function", "name": "f"}]}}, "agent.tools[0].description"),
        ({"agent": {"tools": []}}, "agent.model"),
        ({"input": None}, "input"),
        ({"agent": {"model": "m", "multi_agent": {"enabled": True}}}, "agent.multi_agent.enabled"),
    ],
)
def test_what_the_emulator_cannot_honour_is_refused(
    plain_client: openai.OpenAI, body: dict[str, Any], param: str
) -> None:
    base: dict[str, Any] = {"environment": {"type": "none"}, "agent": {"model": "m"}, "input": "hi"}
    with pytest.raises(openai.BadRequestError) as caught:
        plain_client.post(
            "/agents/sessions", body={**base, **body}, cast_to=object, options={"headers": {"OpenAI-Beta": "agents=v1"}}
        )
    assert caught.value.param == param, caught.value.body


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ({"k": "v" * 513}, "metadata value for 'k' is longer than 512 characters"),
        ({"k" * 65: "v"}, f"metadata key '{'k' * 64}...' is longer than 64 characters"),
    ],
)
def test_an_agents_metadata_out_of_bounds_is_worded_as_a_responses(
    plain_client: openai.OpenAI, metadata: dict[str, str], reason: str
) -> None:
    """Before, the Agents API said `metadata keys are at most 64 characters and values at most 512`
    where /v1/responses and /v1/conversations name the key and the bound it passed."""
    with pytest.raises(openai.BadRequestError) as agent_refused:
        plain_client.beta.agents.create(model="m", metadata=metadata)
    with pytest.raises(openai.BadRequestError) as response_refused:
        plain_client.responses.create(model="m", input="hi", metadata=metadata)
    for refused in (agent_refused, response_refused):
        error: Any = refused.value.body
        assert error["message"] == f"Invalid 'metadata': {reason}."
        assert (error["param"], error["code"]) == ("metadata", "invalid_value")
