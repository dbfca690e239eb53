"""Helpers for the Agents API tests: the seed's tool, clients, and strict SDK validation of
everything the emulator sends (the SDK itself parses leniently and would hide a missing field)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import openai
from openai.types.beta.agent import Agent
from openai.types.beta.agent_session import AgentSession
from openai.types.beta.agent_session_event import AgentSessionEvent
from openai.types.beta.agent_session_item import AgentSessionItem
from openai.types.beta.agents.sessions.turn import Turn
from pydantic import TypeAdapter

from tests.support import for_installed_sdk, js

__all__ = [
    "GET_CUSTOMER",
    "customer",
    "events_until",
    "get_customer_code",
    "js",
    "kinds",
    "tool_result",
    "valid",
]

GET_CUSTOMER: dict[str, Any] = {
    "type": "function",
    "name": "get_customer",
    "description": "Look up a customer by ID.",
    "parameters": {
        "type": "object",
        "properties": {"customer_id": {"type": "string"}},
        "required": ["customer_id"],
        "additionalProperties": False,
    },
}

_EVENT: TypeAdapter[Any] = TypeAdapter(AgentSessionEvent)
_ITEM: TypeAdapter[Any] = TypeAdapter(AgentSessionItem)
_MODELS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "agent.session": AgentSession.model_validate,
    "agent": Agent.model_validate,
    "agent.session.turn": Turn.model_validate,
}


def valid(obj: Any) -> Any:
    """`obj` (an SDK object, as received) validated strictly against its SDK model; returns it."""
    data = for_installed_sdk(obj.to_dict())
    kind = data.get("object")
    if kind in _MODELS:
        _MODELS[kind](data)
    elif "event_id" in data:
        _EVENT.validate_python(data)
    else:
        _ITEM.validate_python(data)
    return obj


def customer(args: dict[str, Any]) -> dict[str, Any]:
    """The seed's get_customer: customer 123 exists."""
    if args["customer_id"] == "123":
        return {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}
    return {"found": False, "customer": None}


def get_customer_code(customer_id: str = "123") -> str:
    call = f"const c = await tools.get_customer({{customer_id: {json.dumps(customer_id)}}});"
    return js(f"{call}\ntext(JSON.stringify(c))")


def tool_result(action: Any, output: Any = None, *, error: str | None = None) -> dict[str, Any]:
    """The `agent.session.input.tool_result` event for a required action, as the seed builds it."""
    event: dict[str, Any] = {
        "type": "agent.session.input.tool_result",
        "turn_id": action.turn_id,
        "call_id": action.call_id,
    }
    if error is None:
        event.update(success=True, output=output if isinstance(output, str) else json.dumps(output))
    else:
        event.update(success=False, error=error)
    return event


def events_until(client: openai.OpenAI, session_id: str, *types: str) -> list[Any]:
    """Subscribe to the session's events and collect them (validated) up to the first of `types`."""
    seen = []
    with client.beta.agents.sessions.events.stream(session_id) as stream:
        for event in stream:
            seen.append(valid(event))
            if event.type in types:
                return seen
    raise AssertionError(f"the event stream ended before any of {types}: {[e.type for e in seen]}")


def kinds(events: Iterable[Any]) -> list[str]:
    return [e.type for e in events]
