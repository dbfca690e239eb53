"""Every field of a session, agent, turn and item is sent, null when it has no value.

openai-python marks these fields optional (`Optional[...] = None`), so its models accept a body
without them; openai-go and openai-java, generated from the same spec, declare them required (a
null value is how the API spells "none"), and openai-go reads each one it misses as a zero value.
So the server sends the key: an unfailed session's `error`, a disabled `multi_agent`'s
`max_concurrent_subagents`, a turn's `completed_at` (until it ends), `error` and `subagent_id`, a
program's `command_execution` `cwd` (a session with no environment has no working directory),
`duration_ms`, `exit_code` and `output` (until it ends), a user message's `phase`, and the
`function_call_output`'s `error` when it succeeded or `output` when it failed, and an event's
`output_index` for an item that is no agent output (the user's message, the client's tool result).

What the tests read is validated with the SDK's models too (`valid`), and read as sent (`to_dict`
keeps the keys the body had, null ones included)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.agents.harness import AGENT, SESSION
from ptc_emulator.emulator.storage import open_store
from tests.agents.agents_support import GET_CUSTOMER, customer, js, tool_result, valid
from tests.support import in_process

pytestmark = pytest.mark.sdk

MULTI_AGENT_OFF = {"enabled": False, "max_concurrent_subagents": None}
WAITED_S = 0.3
"""How long the client takes to answer the program's call: the program's duration covers it."""


def sent(obj: Any) -> dict[str, Any]:
    """The body as the server sent it (the SDK object's keys are the body's)."""
    data: dict[str, Any] = valid(obj).to_dict()
    return data


def test_an_agent_shows_its_subagents_off(plain_client: openai.OpenAI) -> None:
    agents = plain_client.beta.agents
    made = agents.create(model="gpt-5", multi_agent={"enabled": False, "max_concurrent_subagents": 3})
    assert sent(made)["multi_agent"] == MULTI_AGENT_OFF  # "null when disabled"
    assert sent(agents.retrieve(made.id))["multi_agent"] == MULTI_AGENT_OFF
    plain = agents.create(model="gpt-5")
    assert sent(plain)["multi_agent"] == MULTI_AGENT_OFF
    session = plain_client.beta.agents.sessions.create(
        environment={"type": "none"}, agent_id=made.id, input="Look up customer 123."
    )
    assert sent(session)["agent"]["multi_agent"] == MULTI_AGENT_OFF


@pytest.mark.parametrize("succeeds", [True, False], ids=["succeeded", "failed"])
def test_a_turn_s_objects_carry_every_field(plain_client: openai.OpenAI, succeeds: bool) -> None:
    sessions = plain_client.beta.agents.sessions
    seen: list[dict[str, Any]] = []
    with sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
        input="Look up customer 123.",
        stream=True,
    ) as stream:
        for event in stream:
            seen.append(sent(event))
            if event.type == "agent.session.requires_action":
                (action,) = event.session.required_actions
                time.sleep(WAITED_S)  # the program waits for the client's answer
                error = None if succeeds else "no such CRM"
                answer = tool_result(action, customer(action.arguments) if succeeds else None, error=error)
                sessions.events.create(event.session.id, events=[answer])
            if event.type == "agent.session.idle":
                break
    session_id = seen[0]["session"]["id"]

    # As the events told it.
    assert all(e["session"]["error"] is None for e in seen if "session" in e)
    assert seen[0]["session"]["agent"]["multi_agent"] == MULTI_AGENT_OFF
    turns = [e["turn"] for e in seen if "turn" in e]
    assert {t["status"] for t in turns} == {"in_progress", "completed"}
    assert all(t["error"] is None and t["subagent_id"] is None for t in turns)
    assert all((t["completed_at"] is None) == (t["status"] == "in_progress") for t in turns)
    items = [(e["type"], e["item"]) for e in seen if e["type"].startswith("agent.session.turn.item.")]
    # The output index is "the index of the item in the turn output, when the item is agent output":
    # null for the user's message and the client's tool result.
    indexes = {(e["item"]["type"], e["item"].get("role")): e["output_index"] for e in seen if "item" in e}
    assert indexes[("message", "user")] is None and indexes[("function_call_output", None)] is None
    assert indexes[("command_execution", None)] == 0 and indexes[("function_call", None)] == 1
    (user,) = [i for _, i in items if i["type"] == "message" and i["role"] == "user"]
    assert user["phase"] is None
    running, done = [i for _, i in items if i["type"] == "command_execution"]
    assert {k: running[k] for k in ("cwd", "duration_ms", "exit_code", "output")} == dict.fromkeys(
        ("cwd", "duration_ms", "exit_code", "output")
    )
    assert done["cwd"] is None and done["duration_ms"] >= WAITED_S * 1000
    assert (done["exit_code"], done["status"]) == ((0, "completed") if succeeds else (1, "failed"))
    assert isinstance(done["output"], str)
    (output,) = [i for _, i in items if i["type"] == "function_call_output"]
    if succeeds:
        assert output["error"] is None and output["output"]
    else:
        assert output["output"] is None and output["error"] == "no such CRM"

    # As the server keeps it.
    kept = {f"{i['type']}:{i.get('role', '')}": i for i in map(sent, sessions.items.list(session_id))}
    assert (kept["message:user"], kept["command_execution:"], kept["function_call_output:"]) == (user, done, output)
    (turn,) = [sent(t) for t in sessions.turns.list(session_id)]
    assert turn == turns[-1]
    assert sent(sessions.retrieve(session_id))["error"] is None


@pytest.mark.anyio
async def test_a_session_stored_by_an_earlier_version_shows_them_too(tmp_path: Path) -> None:
    """A session and an agent stored without these fields (as an earlier version wrote them) are
    read with them, null."""
    settings = Settings(data_dir=tmp_path, store="sqlite", secret="s", bundled_fixtures=False, pool_size=1)
    async with in_process(settings) as client:
        agent = await client.beta.agents.create(model="gpt-5", tools=[GET_CUSTOMER])
        session = await client.beta.agents.sessions.create(
            environment={"type": "none"}, agent_id=agent.id, input=js('text("done")')
        )
        for _ in range(2400):  # polled: the ASGI transport buffers a whole event stream
            if (await client.beta.agents.sessions.retrieve(session.id)).status == "idle":
                break
            await asyncio.sleep(0.05)

    store = open_store("sqlite", tmp_path)
    doc, record = store.sessions.get(SESSION, session.id), store.sessions.get(AGENT, agent.id)
    assert doc is not None and record is not None
    for agent_shown in (record, doc["session"]["agent"]):
        assert agent_shown["multi_agent"].pop("max_concurrent_subagents", "sent") is None
    assert doc["session"].pop("error", "sent") is None
    assert all(turn.pop(key, "sent") is None for turn in doc["turns"] for key in ("error", "subagent_id"))
    user, program = doc["items"][:2]
    assert (user["role"], program["type"]) == ("user", "command_execution")
    assert (user.pop("phase", "sent"), program.pop("cwd", "sent")) == (None, None)
    program.pop("duration_ms")
    store.sessions.put(AGENT, agent.id, record)
    store.sessions.put(SESSION, session.id, doc)
    store.close()

    async with in_process(settings) as client:
        agents, sessions = client.beta.agents, client.beta.agents.sessions
        assert sent(await agents.retrieve(agent.id))["multi_agent"] == MULTI_AGENT_OFF
        shown = sent(await sessions.retrieve(session.id))
        assert shown["error"] is None and shown["agent"]["multi_agent"] == MULTI_AGENT_OFF
        (turn,) = [sent(t) async for t in sessions.turns.list(session.id)]
        assert (turn["error"], turn["subagent_id"]) == (None, None)
        user, program = [sent(i) async for i in sessions.items.list(session.id)][:2]
        assert (user["phase"], program["cwd"], program["duration_ms"]) == (None, None, None)
