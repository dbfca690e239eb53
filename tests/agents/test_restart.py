"""A disconnect mid-turn recovers across a server restart: the session is in the store, the program
resumes by replay, and a result sent again is not applied twice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.agents.agents_support import GET_CUSTOMER, customer, events_until, get_customer_code, tool_result, valid

SECRET = "agents-restart-secret"


@contextlib.contextmanager
def server(data_dir: Path) -> Iterator[openai.OpenAI]:
    """A server process over `data_dir`, killed with SIGKILL at the end (no graceful shutdown)."""
    process = ServerProcess(data_dir, store="sqlite", secret=SECRET, workers=1).start()
    try:
        with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as client:
            yield client
    finally:
        process.kill9()


@pytest.mark.parametrize("sent_before", [False, True], ids=["unsent", "sent-then-lost"])
def test_resume_after_a_disconnect_and_a_restart(tmp_path: Path, sent_before: bool) -> None:
    """The client saved the pending call and (maybe) sent its result, then lost the connection and
    the server restarted. It retrieves the session and sends the saved result again."""
    with server(tmp_path) as client:
        session = valid(
            client.beta.agents.sessions.create(
                environment={"type": "none"},
                agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
                input=get_customer_code("123"),
            )
        )
        with client.beta.agents.sessions.events.stream(session.id) as stream:  # closed mid-turn
            for event in stream:
                if valid(event).type == "agent.session.requires_action":
                    (saved,) = event.session.required_actions
                    break
        saved_result = tool_result(saved, customer(saved.arguments))
        if sent_before:
            client.beta.agents.sessions.events.create(session.id, events=[saved_result])

    with server(tmp_path) as client:
        again = valid(client.beta.agents.sessions.retrieve(session.id))
        if not sent_before:
            assert again.status == "requires_action" and again.required_actions == [saved]
        client.beta.agents.sessions.events.create(session.id, events=[saved_result])
        events_until(client, session.id, "agent.session.idle")
        items: list[Any] = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
        turns = [valid(t) for t in client.beta.agents.sessions.turns.list(session.id)]
        final = valid(client.beta.agents.sessions.retrieve(session.id))

    assert [i.type for i in items] == [
        "message",
        "command_execution",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items[-1].content[0].text == '{"found":true,"customer":{"name":"Example Customer","plan":"pro"}}'
    assert [t.status for t in turns] == ["completed"]
    assert final.status == "idle" and final.required_actions == []
