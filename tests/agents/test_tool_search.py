"""The Agents API's "load functions on demand" flow (the Functions guide): a function with
`defer_loading: true` and `{"type": "tool_search"}` in `agent.tools`. The deferred function is
invisible to the session's programs until a search turn loads it; then a program calls it and
the call surfaces as a required action, answered through `client.beta.agents`."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, customer, events_until, tool_result, valid

DEFERRED = {**GET_CUSTOMER, "defer_loading": True}
SEARCH_THEN_CALL = (
    "```tool_search\nload: get_customer\n```\n"
    "```js\nconst c = await tools.get_customer({customer_id: '123'});\ntext(c.customer.name);\n```"
)


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Any:
    return ptc_emulator.client(max_retries=0)


def _session(client: openai.OpenAI, text: str) -> Any:
    return valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"},
            agent={"model": "gpt-5", "tools": [DEFERRED, {"type": "tool_search"}]},
            input=text,
        )
    )


def test_a_deferred_function_is_loaded_by_a_search_then_called_by_a_program(client: openai.OpenAI) -> None:
    session = _session(client, SEARCH_THEN_CALL)
    last = events_until(
        client, session.id, "agent.session.requires_action", "agent.session.idle", "agent.session.failed"
    )[-1]
    assert last.type == "agent.session.requires_action", last
    (action,) = last.session.required_actions
    assert action.name == "get_customer" and action.arguments == {"customer_id": "123"}
    client.beta.agents.sessions.events.create(session.id, events=[tool_result(action, customer(action.arguments))])
    events_until(client, session.id, "agent.session.idle")
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text == "Example Customer"


def test_before_a_search_the_deferred_function_is_not_there(client: openai.OpenAI) -> None:
    code = (
        "```js\ntry { await tools.get_customer({customer_id: '1'}); text('called'); }\n"
        "catch (e) { text('not loaded: ' + e.message); }\n```"
    )
    session = _session(client, code)
    events_until(client, session.id, "agent.session.idle")
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text.startswith("not loaded: ")
    assert all(i.type != "function_call" for i in items)


def test_deferred_without_a_tool_search_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [DEFERRED]}, input="hi"
        )
    assert "tool_search" in caught.value.message and caught.value.param == "agent.tools[0].defer_loading"
    agent = client.beta.agents.create(model="gpt-5", tools=[DEFERRED, {"type": "tool_search"}])  # type: ignore[list-item]
    shown = json.loads(client.beta.agents.with_raw_response.retrieve(agent.id).text)
    assert {"type": "tool_search"} in shown["tools"] and shown["tools"][0]["defer_loading"] is True
