"""MCP tools in agent sessions, through `client.beta.agents`: a session's program calls a real MCP
server (the official SDK's `MCPServer` on 127.0.0.1); a call of a tool the server does not mark
read-only pauses the program and surfaces an `mcp_approval_request` required action, answered by
`agent.session.input.mcp_approval_request_result` (approve, deny or cancel)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import events_until, js, valid
from tests.tools.tools_support import DocsServer, docs_server

DELETE = (
    "let out;\ntry { out = await tools.docs.delete_page({page: 'old'}); }\n"
    "catch (e) { out = 'caught: ' + e.message; }\ntext(out);"
)


@pytest.fixture
def docs() -> Iterator[DocsServer]:
    with docs_server() as server:
        yield server


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Any:
    return ptc_emulator.client(max_retries=0)


def mcp(docs: DocsServer) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "docs", "transport": {"type": "http", "server_url": docs.url}}


def paused(client: openai.OpenAI, docs: DocsServer) -> tuple[Any, Any]:
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [mcp(docs)]}, input=js(DELETE)
        )
    )
    last = events_until(client, session.id, "agent.session.requires_action", "agent.session.idle")[-1]
    assert last.type == "agent.session.requires_action", last
    (action,) = last.session.required_actions
    return session, action


def answer(client: openai.OpenAI, session: Any, action: Any, decision: str) -> Any:
    event = {
        "type": "agent.session.input.mcp_approval_request_result",
        "request_id": action.request_id,
        "response": {"type": "mcp_tool_call", "decision": decision},
    }
    client.beta.agents.sessions.events.create(session.id, events=[event])  # type: ignore[list-item]
    events_until(client, session.id, "agent.session.idle")
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    return items[-1].content[0].text


def test_an_approved_mcp_call_runs_once(client: openai.OpenAI, docs: DocsServer) -> None:
    session, action = paused(client, docs)
    assert action.type == "mcp_approval_request"
    request = action.request
    assert (request.type, request.server_label, request.name) == ("mcp_tool_call", "docs", "delete_page")
    assert request.arguments == {"page": "old"} and request.message
    assert docs.calls == []  # nothing ran before the approval
    assert answer(client, session, action, "approve") == "deleted old"
    assert docs.calls == [("delete_page", {"page": "old"})]
    assert valid(client.beta.agents.sessions.retrieve(session.id)).status == "idle"


@pytest.mark.parametrize("decision", ["deny", "cancel"])
def test_a_denied_or_dismissed_call_is_not_made_and_the_turn_goes_on(
    client: openai.OpenAI, docs: DocsServer, decision: str
) -> None:
    session, action = paused(client, docs)
    text = answer(client, session, action, decision)
    assert text.startswith("caught: The call to docs.delete_page was not approved"), text
    assert docs.calls == []
    (turn,) = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "completed"  # cancel dismisses the request, not the turn


def test_an_unknown_or_answered_request_is_refused(client: openai.OpenAI, docs: DocsServer) -> None:
    session, action = paused(client, docs)
    answer(client, session, action, "approve")
    with pytest.raises(openai.BadRequestError) as caught:
        answer(client, session, action, "approve")
    assert "Unknown pending approval request" in caught.value.message


def test_the_agent_shows_its_mcp_tool_and_refuses_what_is_not_emulated(client: openai.OpenAI, docs: DocsServer) -> None:
    agent = client.beta.agents.create(model="gpt-5", tools=[mcp(docs)])  # type: ignore[list-item]
    shown = json.loads(client.beta.agents.with_raw_response.retrieve(agent.id).text)["tools"][0]
    valid(client.beta.agents.retrieve(agent.id))
    assert (
        shown["transport"] == {"type": "http", "server_url": docs.url, "headers": {}}
        and shown["connection_origin"] == "service"
    )
    stdio = {"type": "mcp", "server_label": "s", "transport": {"type": "stdio", "command": "srv", "cwd": "/"}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.beta.agents.create(model="gpt-5", tools=[stdio])  # type: ignore[list-item]
    assert caught.value.param == "tools[0].transport.type" and "stdio" in caught.value.message


def test_auto_review_surfaces_no_approval_and_denies_the_fallback(client: openai.OpenAI, docs: DocsServer) -> None:
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"},
            agent={"model": "gpt-5", "tools": [mcp(docs)]},
            input=js(DELETE),
            review="auto_review",
        )
    )
    seen = events_until(client, session.id, "agent.session.idle")
    assert all(e.type != "agent.session.requires_action" for e in seen)
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert items[-1].content[0].text.startswith("caught: The call to docs.delete_page was not approved")
    assert docs.calls == []


def test_a_direct_mcp_call_in_a_session_is_approved_then_shown(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "session-direct-mcp",
            "match": {"input": "^look ptc up$"},
            "turns": [
                {"mcp": {"server_label": "docs", "name": "lookup", "arguments": {"topic": "ptc"}}},
                {"message": "{{ output }}"},
            ],
        }
    )
    session = valid(
        client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [mcp(docs)]}, input="look ptc up"
        )
    )
    last = events_until(client, session.id, "agent.session.requires_action", "agent.session.idle")[-1]
    assert last.type == "agent.session.requires_action", last
    (action,) = last.session.required_actions
    assert action.request.name == "lookup" and action.request.arguments == {"topic": "ptc"}
    assert answer(client, session, action, "approve") == "The docs say ptc is fine."
    items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    (call,) = [i for i in items if i.type == "mcp_call"]
    assert (call.name, call.arguments, call.output, call.status) == (
        "lookup",
        {"topic": "ptc"},
        "The docs say ptc is fine.",
        "completed",
    )
