"""A long list validated a step at a time (`wire.stepped`) is refused with the 400 a validation
in one go gives: the same deepest error, at the same place, with the same expected kinds.

Each body is validated with steps of a few items and in one go (a step longer than any list), and
`api.errors.validation_error` words both. A valid body validates to the same request either way.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from ptc_emulator.api.errors import validation_error
from ptc_emulator.emulator.agents.wire import AgentCreate, EventsBody, SessionCreate, SessionUpdate
from ptc_emulator.emulator.wire import stepped
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest

N = 60
HI = {"role": "user", "content": "hi"}
AGENT_HI = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
F = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}


def _with(items: list[Any], at: int, item: Any) -> list[Any]:
    return [*items[:at], item, *items[at + 1 :]]


CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (CreateRequest, {"model": "m", "input": [{"role": "user", "content": 5}] * N}),
    (CreateRequest, {"model": "m", "input": _with([HI] * N, 3, {"role": "user", "content": 5})}),
    (
        CreateRequest,
        {
            "model": "m",
            "input": _with(
                _with([HI] * N, 3, {"role": "user", "content": 5}),
                N - 2,
                {"role": "user", "content": [{"type": "input_text", "text": 5}]},
            ),
        },
    ),
    (CreateRequest, {"model": "m", "input": _with([HI] * N, N - 1, {"type": "nope"})}),
    (CreateRequest, {"model": "m", "input": _with([HI] * N, 17, {"role": "bad", "content": "x"}), "model_x": 1}),
    (CreateRequest, {"model": 5, "input": _with([HI] * N, 17, {"role": "bad", "content": "x"})}),
    (CreateRequest, {"model": "m", "input": _with([HI] * N, 30, 7)}),
    (CreateRequest, {"model": "m", "input": "x", "tools": [{"type": "function"}] * N}),
    (CreateRequest, {"model": "m", "input": "x", "tools": _with([{"type": "function", "name": "f"}] * N, 40, {})}),
    (CreateRequest, {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": 5}] * N}]}),
    (CreateRequest, {"model": "m", "input": [{"role": "user", "content": [{"type": "zz"}] * N}]}),
    (CountTokensRequest, {"model": "m", "input": [{"role": "user", "content": 5}] * N}),
    (CompactRequest, {"model": "m", "input": _with([HI] * N, 9, {"role": "user"})}),
    (EventsBody, {"events": [{"type": "agent.session.input.message"}] * N}),
    (EventsBody, {"events": _with([{"type": "agent.session.input.cancel"}] * N, 50, {"type": "zzz"})}),
    (SessionCreate, {"environment": {"type": "none"}, "input": [{"role": "user", "content": [{"type": "x"}] * N}]}),
    (CreateRequest, {"model": "m", "input": "x", "include": _with(["reasoning.encrypted_content"] * N, 44, "zz")}),
    (AgentCreate, {"model": "m", "tools": _with([F] * N, 12, {"type": "function"})}),
    (SessionCreate, {"environment": {"type": "none"}, "agent": {"model": "m", "tools": [{"type": "function"}] * N}}),
    (SessionCreate, {"environment": {}, "input": _with([AGENT_HI] * N, 21, {"role": "user", "content": 5})}),
    (SessionUpdate, {"agent": {"tools": _with([F] * N, 33, {"type": 5})}}),
    (EventsBody, {"events": [{"type": "agent.session.input.message", "input": [{"role": "user", "content": 5}] * N}]}),
    (CreateRequest, {"model": "m", "input": [HI] * N, "tools": [{"type": "function", "name": "f"}] * N}),
]


def _outcome(model: type[BaseModel], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body).model_dump()
    except ValidationError as e:
        return validation_error(e.errors(), body).body()


@pytest.mark.parametrize(("model", "body"), CASES)
def test_a_stepped_validation_words_the_400_of_one_in_one_go(
    monkeypatch: pytest.MonkeyPatch, model: type[BaseModel], body: dict[str, Any]
) -> None:
    monkeypatch.setattr(stepped, "STEP", 10**9)
    whole = _outcome(model, body)
    monkeypatch.setattr(stepped, "STEP", 7)
    assert _outcome(model, body) == whole
