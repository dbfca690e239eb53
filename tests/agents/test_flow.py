"""The seed's get_customer flow through openai 3.51's `client.beta.agents`, against a real server.

Every event and object the tests receive is validated against the SDK's models (`valid`). The
guide's own Python code runs too, unchanged, as a program of its own (seeds/function_tool.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import (
    GET_CUSTOMER,
    customer,
    events_until,
    get_customer_code,
    js,
    kinds,
    tool_result,
    valid,
)
from tests.support import ClientVersion

pytestmark = pytest.mark.sdk  # the official client's Agents API surface, against what the server sends

SEED_ANSWER = "Customer 123 is Example Customer, on the pro plan."
SEEDS = Path(__file__).parent / "seeds"


def new_session(client: openai.OpenAI, text: str, tools: list[dict[str, Any]] | None = None) -> Any:
    session = client.beta.agents.sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5", "tools": tools if tools is not None else [GET_CUSTOMER]},
        input=text,
    )
    return valid(session)


def idle_session(client: openai.OpenAI, tools: list[dict[str, Any]] | None = None) -> Any:
    """A session whose first turn (a program with no tool call) is over, ready for `sessions.stream`."""
    session = new_session(client, js('text("ready")'), tools)
    events_until(client, session.id, "agent.session.idle")
    return session


def test_the_guide_flow_runs_verbatim_in_its_own_process(
    ptc_emulator: PTCEmulator, plain_client: openai.OpenAI, client_version: ClientVersion
) -> None:
    """The guide's tool definition and tool_result code, in a program that builds its own `OpenAI()`."""
    client_version("openai-python", openai.__version__)
    done = subprocess.run(
        [sys.executable, str(SEEDS / "function_tool.py")],
        env={**os.environ, **ptc_emulator.env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == SEED_ANSWER
    # What the program sent, as the session keeps it: the guide's result, for the call it answered.
    (session,) = [valid(s) for s in plain_client.beta.agents.sessions.list()]
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items] == [
        "message",
        "command_execution",
        "function_call",
        "function_call_output",
        "message",
    ]
    call, output = items[2:4]
    assert call.arguments == {"customer_id": "123"} and output.call_id == call.call_id
    assert json.loads(output.output) == {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}
    assert valid(plain_client.beta.agents.sessions.retrieve(session.id)).status == "idle"


def test_the_seed_flow_with_events_and_tool_result(plain_client: openai.OpenAI, client_version: ClientVersion) -> None:
    """Create, stream until requires_action, answer with tool_result, stream until idle, read the message."""
    client_version("openai-python", openai.__version__)
    session = new_session(plain_client, "Look up customer 123.")
    assert session.environment.type == "none" and session.status == "in_progress"
    seen = events_until(plain_client, session.id, "agent.session.requires_action")
    (action,) = seen[-1].session.required_actions
    assert action.type == "function_call" and action.name == "get_customer"
    assert action.arguments == {"customer_id": "123"}  # an object, not a JSON string
    retrieved = valid(plain_client.beta.agents.sessions.retrieve(session.id))
    assert retrieved.status == "requires_action" and retrieved.required_actions == [action]

    # Subscribe before answering, as the SDK's helper does: every event of the rest of the turn is seen.
    with plain_client.beta.agents.sessions.events.stream(session.id) as stream:
        plain_client.beta.agents.sessions.events.create(
            session.id, events=[tool_result(action, customer(action.arguments))]
        )
        for event in stream:
            seen.append(valid(event))
            if event.type == "agent.session.idle":
                break
    assert "agent.session.turn.completed" in kinds(seen)
    deltas = "".join(e.delta for e in seen if e.type == "agent.session.turn.output_text.delta")
    assert deltas == SEED_ANSWER

    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items] == [
        "message",
        "command_execution",
        "function_call",
        "function_call_output",
        "message",
    ]
    program, call, output, final = items[1:]
    assert "tools.get_customer" in program.command and program.status == "completed" and program.exit_code == 0
    assert json.loads(program.output) == {"customer_id": "123", "name": "Example Customer", "plan": "pro"}
    assert call.call_id == action.call_id == output.call_id and output.status == "completed"
    assert final.role == "assistant" and final.phase == "final_answer" and final.content[0].text == SEED_ANSWER
    (turn,) = [valid(t) for t in plain_client.beta.agents.sessions.turns.list(session.id)]
    assert turn.status == "completed" and turn.usage is not None and turn.usage.total_tokens > 0
    done = valid(plain_client.beta.agents.sessions.retrieve(session.id))
    assert done.status == "idle" and done.required_actions == []
    assert done.usage is not None and done.usage.total_tokens == turn.usage.total_tokens


def test_the_stream_helper_runs_the_handlers(plain_client: openai.OpenAI) -> None:
    session = idle_session(plain_client)
    calls: list[dict[str, Any]] = []

    def get_customer(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return customer(args)

    with plain_client.beta.agents.sessions.stream(
        session.id, input=get_customer_code("123"), tool_handlers={"get_customer": get_customer}
    ) as stream:
        result = stream.get_final_result()
    assert calls == [{"customer_id": "123"}]
    assert json.loads(result.output_text) == customer({"customer_id": "123"})  # the program's result
    assert result.turn.status == "completed"


def test_a_raising_handler_rejects_the_programs_call(plain_client: openai.OpenAI) -> None:
    session = idle_session(plain_client)
    code = js(
        'try {\n  await tools.get_customer({customer_id: "9"});\n  text("no error");\n'
        "} catch (e) {\n  text(`caught ${e instanceof Error}: ${e.message}`);\n}"
    )

    def broken(args: dict[str, Any]) -> str:
        raise RuntimeError("database is down")

    with plain_client.beta.agents.sessions.stream(
        session.id, input=code, tool_handlers={"get_customer": broken}
    ) as stream:
        seen = [valid(e) for e in stream.with_result_collection()]
        result = stream.get_final_result()
    assert result.output_text == "caught true: Tool handler failed."
    outputs = [
        e.item for e in seen if e.type == "agent.session.turn.item.added" and e.item.type == "function_call_output"
    ]
    assert len(outputs) == 1 and outputs[0].status == "failed" and outputs[0].error == "Tool handler failed."


def test_create_with_stream_true_and_handlers(plain_client: openai.OpenAI) -> None:
    stream = plain_client.beta.agents.sessions.create(
        environment={"type": "none"},
        agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
        input="Look up customer 123.",
        stream=True,
        tool_handlers={"get_customer": customer},
    )
    with stream:
        seen = [valid(e) for e in stream]
    assert seen[0].type == "agent.session.created" and seen[-1].type == "agent.session.idle"
    completed = [e for e in seen if e.type == "agent.session.turn.completed"]
    assert len(completed) == 1 and completed[0].usage is not None and completed[0].usage.total_tokens > 0
    final = [e.item for e in seen if e.type == "agent.session.turn.item.done" and e.item.type == "message"]
    assert final[0].content[0].text == SEED_ANSWER


DISABLED = {"type": "programmatic_tool_calling", "enabled": False}


def test_disabled_ptc_takes_the_direct_route(plain_client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    """With PTC off the seed's program scenario does not match; a direct-call one (lower priority) does."""
    ptc_emulator.add_scenario(
        {
            "name": "customer__direct",
            "priority": -1,
            "match": {"input": r"(?i)customer (?P<customer_id>\w+)", "tools": ["get_customer"]},
            "turns": [
                {"call": {"name": "get_customer", "arguments": {"customer_id": "{{ customer_id }}"}}},
                {"message": "Direct: {{ output.customer.name }}."},
            ],
        }
    )
    session = new_session(plain_client, "Look up customer 123.", [GET_CUSTOMER, DISABLED])
    assert [t.to_dict() for t in session.agent.tools][1] == DISABLED
    (action,) = events_until(plain_client, session.id, "agent.session.requires_action")[-1].session.required_actions
    plain_client.beta.agents.sessions.events.create(
        session.id, events=[tool_result(action, customer(action.arguments))]
    )
    events_until(plain_client, session.id, "agent.session.idle")
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[-1].content[0].text == "Direct: Example Customer."

    # The same agent with PTC on (the entry's default) takes the program route.
    on = new_session(plain_client, "Look up customer 123.", [GET_CUSTOMER, {"type": "programmatic_tool_calling"}])
    events_until(plain_client, on.id, "agent.session.requires_action")
    types = [i.type for i in plain_client.beta.agents.sessions.items.list(on.id)]
    assert "command_execution" in types


def test_disabled_ptc_does_not_run_an_inline_program(plain_client: openai.OpenAI) -> None:
    session = new_session(plain_client, get_customer_code(), [GET_CUSTOMER, DISABLED])
    events_until(plain_client, session.id, "agent.session.idle")
    items = [valid(i) for i in plain_client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items] == ["message", "message"]
    assert "not enabled" in items[-1].content[0].text


@pytest.mark.anyio
async def test_the_async_stream_helper(ptc_emulator: PTCEmulator) -> None:
    client = ptc_emulator.async_client(max_retries=0)
    async with client:
        session = await client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input=js('text("ready")')
        )
        async with await client.beta.agents.sessions.events.stream(session.id) as events:
            async for event in events:
                if valid(event).type == "agent.session.idle":
                    break

        async def get_customer(args: dict[str, Any]) -> dict[str, Any]:
            return customer(args)

        async with client.beta.agents.sessions.stream(
            session.id, input=get_customer_code("123"), tool_handlers={"get_customer": get_customer}
        ) as stream:
            result = await stream.get_final_result()
    assert json.loads(result.output_text)["customer"]["plan"] == "pro"
