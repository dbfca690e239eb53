"""A session's settings as openai 3.60-3.63 declare them: `spend_control` on every session body (its
limit kept, replaced and removed as the SDK's docstrings say), `vault_ids` on update, the agent's
`compaction.async` (accepted and ignored: always false), and a session's 8 MiB tool list.

Every body the SDK calls get is validated with the installed SDK's own models (the `client`
fixture); the refusals are checked through raw HTTP, message, type, param and code."""

from __future__ import annotations

import inspect
import json
from typing import Any

import httpx
import openai
import pytest
from openai.resources.beta.agents.sessions import Sessions

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, customer, events_until, js, tool_result, valid

pytestmark = pytest.mark.sdk

SESSIONS = Sessions
needs_spend_control = pytest.mark.skipif(
    "spend_control" not in inspect.signature(SESSIONS.update).parameters,
    reason=f"openai {openai.__version__} has no spend_control on sessions.update (openai 3.60 and later)",
)
needs_vault_update = pytest.mark.skipif(
    "vault_ids" not in inspect.signature(SESSIONS.update).parameters,
    reason=f"openai {openai.__version__} has no vault_ids on sessions.update (openai 3.60 and later)",
)
UNLIMITED = {"consumed": None, "limit": None}


def raw(emulator: PTCEmulator, method: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"Authorization": "Bearer sk-test", "OpenAI-Beta": "agents=v1", **emulator.headers}
    return httpx.request(method, emulator.base_url + path, json=body, headers=headers, timeout=60)


def session_body(**extra: Any) -> dict[str, Any]:
    return {"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "input": js('text("hi")'), **extra}


def spend(obj: Any) -> dict[str, Any]:
    """An SDK object's `spend_control`, as sent (an older SDK keeps it as an extra field)."""
    return dict(obj.to_dict()["spend_control"])


@needs_spend_control
def test_spend_control_is_on_every_session_body_and_its_limit_kept_replaced_removed(client: openai.OpenAI) -> None:
    sessions = client.beta.agents.sessions
    made = sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
        input="Look up customer 123.",
        spend_control={"limit": 500},
    )
    assert spend(made) == {"consumed": None, "limit": 500}
    seen = events_until(client, made.id, "agent.session.requires_action")
    with_session = [e for e in seen if getattr(e, "session", None) is not None]
    assert with_session and all(spend(e.session) == {"consumed": None, "limit": 500} for e in with_session)
    (action,) = seen[-1].session.required_actions
    sessions.events.create(made.id, events=[tool_result(action, customer(action.arguments))])
    done = events_until(client, made.id, "agent.session.idle")
    assert spend(done[-1].session)["limit"] == 500 and done[-1].session.status == "idle"

    assert spend(sessions.retrieve(made.id)) == {"consumed": None, "limit": 500}
    (listed,) = [s for s in sessions.list() if s.id == made.id]
    assert spend(listed) == {"consumed": None, "limit": 500}

    assert spend(sessions.update(made.id, metadata={"k": "v"})) == {"consumed": None, "limit": 500}  # omitted: kept
    assert spend(sessions.update(made.id, spend_control={"limit": 900})) == {"consumed": None, "limit": 900}
    assert spend(sessions.update(made.id, spend_control={"limit": None})) == UNLIMITED  # a null limit: removed
    assert spend(sessions.update(made.id, spend_control={"limit": 300}))["limit"] == 300
    assert spend(sessions.update(made.id, spend_control=None)) == UNLIMITED  # null: removed
    assert spend(sessions.retrieve(made.id)) == UNLIMITED

    plain = sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"}, input=js('text("hi")'))
    assert spend(plain) == UNLIMITED  # omitted: an unlimited session
    assert spend(events_until(client, plain.id, "agent.session.idle")[-1].session) == UNLIMITED


@needs_spend_control
def test_a_limit_is_never_reached_as_the_emulator_charges_nothing(client: openai.OpenAI) -> None:
    """docs/agents.md: spend is not charged, so the smallest limit lets every turn run; `consumed`
    stays null ("unavailable") and no budget status, event or turn error is ever sent."""
    sessions = client.beta.agents.sessions
    made = sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5"},
        input=js('text("one")'),
        spend_control={"limit": 1},
    )
    first = events_until(client, made.id, "agent.session.idle", "agent.session.failed")
    with sessions.events.stream(made.id) as stream:
        sessions.events.create(
            made.id,
            events=[
                {
                    "type": "agent.session.input.message",
                    "input": [{"role": "user", "content": [{"type": "input_text", "text": js('text("two")')}]}],
                }
            ],
        )
        second = []
        for event in stream:
            second.append(valid(event))
            if event.type == "agent.session.idle" and len(second) > 1:
                break
    kinds = [e.type for e in [*first, *second]]
    assert "agent.session.budget_reached" not in kinds and "agent.session.failed" not in kinds
    turns = list(sessions.turns.list(made.id))
    assert [t.status for t in turns] == ["completed", "completed"]
    assert spend(sessions.retrieve(made.id)) == {"consumed": None, "limit": 1}


def test_spend_control_refusals_on_create_and_update(ptc_emulator: PTCEmulator) -> None:
    made = raw(ptc_emulator, "POST", "/agents/sessions", session_body(spend_control={"limit": 7}))
    assert made.status_code == 200 and made.json()["spend_control"] == {"consumed": None, "limit": 7}
    sid = made.json()["id"]
    cases = [
        (
            {"limit": 0},
            "Invalid 'spend_control.limit': integer below minimum value. Expected a value >= 1, but got 0 instead.",
            "spend_control.limit",
            "integer_below_min_value",
        ),
        ({}, "Missing required parameter: 'spend_control.limit'.", "spend_control.limit", "missing_required_parameter"),
        (
            {"limit": 5, "currency": "USD"},
            "Unknown parameter: 'spend_control.currency'.",
            "spend_control.currency",
            "unknown_parameter",
        ),
        (
            {"limit": "5"},
            "Invalid type for 'spend_control.limit': expected an integer, but got a string instead.",
            "spend_control.limit",
            "invalid_type",
        ),
    ]
    for value, message, param, code in cases:
        expected = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
        created = raw(ptc_emulator, "POST", "/agents/sessions", session_body(spend_control=value))
        assert (created.status_code, created.json()) == (400, expected), value
        updated = raw(ptc_emulator, "POST", f"/agents/sessions/{sid}", {"spend_control": value})
        assert (updated.status_code, updated.json()) == (400, expected), value
    assert raw(ptc_emulator, "GET", f"/agents/sessions/{sid}").json()["spend_control"]["limit"] == 7


@needs_vault_update
def test_vault_ids_on_update_null_and_empty_clear_a_list_is_refused_as_on_create(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    sessions = client.beta.agents.sessions
    made = sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"}, input=js('text("hi")'))
    assert valid(sessions.update(made.id, vault_ids=None)).vault_ids == []
    assert valid(sessions.update(made.id, vault_ids=[], metadata={"a": "1"})).vault_ids == []

    refusal = {
        "error": {
            "message": "Vaults are not supported by the emulator.",
            "type": "invalid_request_error",
            "param": "vault_ids",
            "code": "unsupported_parameter",
        }
    }
    created = raw(ptc_emulator, "POST", "/agents/sessions", session_body(vault_ids=["vlt_1"]))
    assert (created.status_code, created.json()) == (400, refusal)
    updated = raw(ptc_emulator, "POST", f"/agents/sessions/{made.id}", {"vault_ids": ["vlt_1"], "metadata": {"b": "2"}})
    assert (updated.status_code, updated.json()) == (400, refusal)
    with pytest.raises(openai.BadRequestError) as caught:
        sessions.update(made.id, vault_ids=["vlt_1"])
    assert caught.value.body == refusal["error"]
    assert valid(sessions.retrieve(made.id)).metadata == {"a": "1"}  # the refused update changed nothing


def test_compaction_async_is_accepted_and_always_false(client: openai.OpenAI) -> None:
    agents = client.beta.agents
    made = valid(agents.create(model="gpt-5", compaction={"async": True}))
    assert made.compaction is not None and made.to_dict()["compaction"] == {"async": False}
    updated = valid(agents.update(made.id, compaction={"async": True}))
    assert updated.to_dict()["compaction"] == {"async": False}
    session = agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "compaction": {"async": True}}, input=js('text("x")')
    )
    assert session.to_dict()["agent"]["compaction"] == {"async": False}
    from_saved = agents.sessions.create(environment={"type": "none"}, agent_id=made.id, input=js('text("x")'))
    assert from_saved.to_dict()["agent"]["compaction"] == {"async": False}


def _tools_of(size: int) -> list[dict[str, Any]]:
    """Function tools whose list is about `size` bytes of compact JSON (in 1 MiB descriptions)."""
    chunk = 2**20
    return [{**GET_CUSTOMER, "name": f"tool_{n}", "description": "d" * chunk} for n in range(max(1, size // chunk))]


def test_a_sessions_tools_fit_in_8_mib_an_agents_in_3(ptc_emulator: PTCEmulator) -> None:
    five = _tools_of(5 * 2**20)
    session = raw(ptc_emulator, "POST", "/agents/sessions", session_body(agent={"model": "gpt-5", "tools": five}))
    assert session.status_code == 200, session.text
    assert len(json.dumps(session.json()["agent"]["tools"], separators=(",", ":"))) > 5 * 2**20
    agent = raw(ptc_emulator, "POST", "/agents", {"model": "gpt-5", "tools": five})
    assert agent.status_code == 400 and agent.json()["error"] == {
        "message": "The tool list must fit within 3 MiB of compact UTF-8 JSON.",
        "type": "invalid_request_error",
        "param": "tools",
        "code": None,
    }
    nine = _tools_of(9 * 2**20)
    over = raw(ptc_emulator, "POST", "/agents/sessions", session_body(agent={"model": "gpt-5", "tools": nine}))
    assert over.status_code == 400 and over.json()["error"] == {
        "message": "The tool list must fit within 8 MiB of compact UTF-8 JSON.",
        "type": "invalid_request_error",
        "param": "agent.tools",
        "code": None,
    }
    update = raw(ptc_emulator, "POST", f"/agents/sessions/{session.json()['id']}", {"agent": {"tools": nine}})
    assert update.status_code == 400 and update.json()["error"]["param"] == "agent.tools"


def test_a_stdio_mcp_server_with_env_gets_the_stdio_refusal(ptc_emulator: PTCEmulator) -> None:
    """`env` is a field of the SDK's stdio transport: a transport that sets it is refused as stdio,
    not as an unknown parameter."""
    transport = {"type": "stdio", "command": "srv", "cwd": "/", "env": {"TOKEN": "t"}}
    tool = {"type": "mcp", "server_label": "local", "transport": transport}
    reply = raw(ptc_emulator, "POST", "/agents/sessions", session_body(agent={"model": "gpt-5", "tools": [tool]}))
    assert (reply.status_code, reply.json()["error"]) == (
        400,
        {
            "message": "MCP servers over the stdio transport are not emulated: they run in the session's environment. "
            "Serve the MCP server over HTTP (transport type 'http').",
            "type": "invalid_request_error",
            "param": "agent.tools[0].transport.type",
            "code": "unsupported_parameter",
        },
    )
