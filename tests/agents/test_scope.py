"""Agents API sessions are visible only in the scope that made them, and what a client asks for
leaves nothing behind that it does not own.

* A session made in one test's scope is a 404 in another scope, for every route (retrieve,
  update, delete, events in and out, items, turns), and is not listed there; an unscoped session
  is seen everywhere, as unscoped scenarios are.
* A request naming an unknown session leaves no lock behind.
* Idempotency keys are kept apart from the session's document, which therefore does not grow with
  them, and expire (the test sets the harness's clock).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.agents.harness import SESSION
from ptc_emulator.emulator.agents.keys import IDEMPOTENCY_TTL_S
from ptc_emulator.names import SCOPE_HEADER
from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, events_until, js
from tests.support import in_process_http

BETA = {"OpenAI-Beta": "agents=v1"}


def _start(client: openai.OpenAI) -> Any:
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input=js('text("hi")')
    )
    events_until(client, session.id, "agent.session.idle")
    return session


def test_a_session_is_invisible_from_another_scope(ptc_emulator: PTCEmulator) -> None:
    mine = ptc_emulator.client(max_retries=0)
    other = ptc_emulator.client(max_retries=0, default_headers={SCOPE_HEADER: "another-test"})
    session = _start(mine)
    sessions = other.beta.agents.sessions
    message = {
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": js('text("stolen")')}]}],
    }
    attempts = [
        lambda: sessions.retrieve(session.id),
        lambda: sessions.update(session.id, metadata={"k": "v"}),
        lambda: sessions.events.create(session.id, events=[message]),
        lambda: sessions.items.list(session.id),
        lambda: sessions.turns.list(session.id),
        lambda: sessions.delete(session.id),
    ]
    for attempt in attempts:
        with pytest.raises(openai.NotFoundError) as caught:
            attempt()
        assert caught.value.body["message"] == f"No session found with id '{session.id}'."  # type: ignore[index]
    stream = httpx.get(
        f"{ptc_emulator.server_url}/agents/sessions/{session.id}/events",
        headers={**BETA, SCOPE_HEADER: "another-test", "Authorization": f"Bearer {ptc_emulator.api_key}"},
        timeout=30,
    )
    assert stream.status_code == 404  # not even its events
    assert session.id not in [s.id for s in sessions.list()]
    # ... and everything still works in its own scope, untouched
    assert mine.beta.agents.sessions.retrieve(session.id).metadata == {}
    assert [t.status for t in mine.beta.agents.sessions.turns.list(session.id)] == ["completed"]
    assert session.id in [s.id for s in mine.beta.agents.sessions.list()]


def test_an_agent_is_invisible_from_another_scope(ptc_emulator: PTCEmulator) -> None:
    """Agents were kept apart from no scope: another test's client listed, read, changed and
    deleted them, and started sessions of them."""
    mine = ptc_emulator.client(max_retries=0)
    other = ptc_emulator.client(max_retries=0, default_headers={SCOPE_HEADER: "another-test"})
    agent = mine.beta.agents.create(model="gpt-5", name="mine", tools=[GET_CUSTOMER])
    agents = other.beta.agents
    attempts = [
        lambda: agents.retrieve(agent.id),
        lambda: agents.update(agent.id, name="stolen"),
        lambda: agents.delete(agent.id),
        lambda: agents.sessions.create(environment={"type": "none"}, agent_id=agent.id, input=js('text("hi")')),
    ]
    for attempt in attempts:
        with pytest.raises(openai.NotFoundError) as caught:
            attempt()
        assert caught.value.body["message"] == f"No agent found with id '{agent.id}'."  # type: ignore[index]
    assert agent.id not in [a.id for a in agents.list()]
    # ... and in its own scope it is as it was made, its scope never shown
    kept = mine.beta.agents.retrieve(agent.id)
    assert kept.name == "mine" and kept.model_dump() == agent.model_dump()
    assert [a.id for a in mine.beta.agents.list()] == [agent.id]
    assert mine.beta.agents.update(agent.id, name="renamed").name == "renamed"
    assert "scope" not in json.dumps(mine.beta.agents.retrieve(agent.id).model_dump())
    with pytest.raises(openai.NotFoundError):
        agents.retrieve(agent.id)  # still not seen once updated
    assert mine.beta.agents.delete(agent.id).deleted


@pytest.mark.anyio
async def test_unknown_ids_leave_nothing_and_keys_live_apart_and_expire(tmp_path: Any) -> None:
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False)
    async with in_process_http(settings, base_url="http://127.0.0.1") as (http, app):
        harness = app.state.emulator.agents
        headers = {**BETA, "content-type": "application/json"}
        text = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
        body = {"events": [{"type": "agent.session.input.message", "input": text}]}
        for i in range(300):
            reply = await http.post(f"/v1/agents/sessions/sess_missing{i}/events", json=body, headers=headers)
            assert reply.status_code == 404
            assert (await http.get(f"/v1/agents/sessions/sess_missing{i}", headers=BETA)).status_code == 404
        assert harness._locks == {} and harness._subscribers == {}

        created = await http.post(
            "/v1/agents/sessions",
            headers=headers,
            content=json.dumps(
                {"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "input": js('text("one")')}
            ),
        )
        sid = created.json()["id"]
        await _idle(http, sid)
        now = [1_000_000.0]
        harness.clock = lambda: now[0]
        message = {
            "type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": js('text("again")')}]}],
        }
        size = len(json.dumps(harness.records.get(SESSION, sid)))
        for i in range(200):
            key = {"Idempotency-Key": f"key-{i}"}
            reply = await http.post(
                f"/v1/agents/sessions/{sid}/events",
                json={"events": [{**message, "input": []}]},
                headers={**headers, **key},
            )
            assert reply.status_code == 400  # refused input: no key remembered for it
        reply = await http.post(
            f"/v1/agents/sessions/{sid}/events", json={"events": [message]}, headers={**headers, "Idempotency-Key": "k"}
        )
        assert reply.status_code == 202
        await _idle(http, sid)
        doc = harness.records.get(SESSION, sid)
        assert "idempotency" not in doc and len(json.dumps(doc)) < size + 20_000
        different = [{"role": "user", "content": [{"type": "input_text", "text": js('text("other")')}]}]
        other = {"events": [{**message, "input": different}]}
        reused = await http.post(
            f"/v1/agents/sessions/{sid}/events", json=other, headers={**headers, "Idempotency-Key": "k"}
        )
        assert reused.status_code == 400 and reused.json()["error"]["code"] == "idempotency_key_reused"
        now[0] += IDEMPOTENCY_TTL_S  # the key has expired: the same key is a new request
        assert harness.keys.sweep() == 1
        again = await http.post(
            f"/v1/agents/sessions/{sid}/events", json=other, headers={**headers, "Idempotency-Key": "k"}
        )
        assert again.status_code == 202, again.text


async def _idle(http: httpx.AsyncClient, sid: str) -> None:
    for _ in range(600):
        status = (await http.get(f"/v1/agents/sessions/{sid}", headers=BETA)).json()["status"]
        if status in ("idle", "failed"):
            return
        import asyncio

        await asyncio.sleep(0.05)
    raise AssertionError(f"session {sid} stayed busy")
