"""The stream of a create, in-process on the fake runner: every event is one the SDK's strict
models accept, numbered in order, and the streamed response is the one stored."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support import PTC_TOOLS, js
from tests.unit.fake_runner import FakeProgram, FakeRunner

pytestmark = pytest.mark.sdk  # every event, validated with the official client's models

EVENT = TypeAdapter[Any](ResponseStreamEvent)
CODE = "const [a, b] = await Promise.all([tools.add({a: 1, b: 2}), tools.add({a: 3, b: 4})]);\ntext(a + b);"


@pytest.fixture(autouse=True)
def _program(fake_runner: FakeRunner) -> None:
    fake_runner.define(
        CODE,
        FakeProgram(
            batches=[[("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]], finish=lambda o: str(sum(map(int, o)))
        ),
    )


def test_a_paused_program_streams_its_items_and_the_stored_response(unit_sdk: openai.OpenAI) -> None:
    with unit_sdk.responses.stream(model="m", input=js(CODE), tools=PTC_TOOLS) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_response()
    for event in events:
        EVENT.validate_python(event.model_dump())
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    added = [e.item.type for e in events if e.type == "response.output_item.added"]  # type: ignore[union-attr]
    assert added == ["program", "function_call", "function_call"]
    assert [i.type for i in final.output] == ["program", "function_call", "function_call"]
    stored = unit_sdk.responses.retrieve(final.id)
    assert [(i.type, i.id) for i in stored.output] == [(i.type, i.id) for i in final.output]
    assert stored.status == final.status == "completed"


def test_the_resume_streams_the_program_output_and_the_message(unit_sdk: openai.OpenAI) -> None:
    first = unit_sdk.responses.create(model="m", input=js(CODE), tools=PTC_TOOLS)  # type: ignore[arg-type]
    answers = [
        {"type": "function_call_output", "call_id": c.call_id, "output": out, "caller": c.caller.model_dump()}  # type: ignore[union-attr]
        for c, out in zip([i for i in first.output if i.type == "function_call"], ["3", "7"], strict=True)
    ]
    with unit_sdk.responses.stream(model="m", previous_response_id=first.id, input=answers, tools=PTC_TOOLS) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_response()
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    assert deltas == final.output_text == "10"
    assert [i.type for i in final.output] == ["program_output", "message"]


def test_a_stream_refused_before_it_starts_is_a_plain_400(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        with unit_sdk.responses.stream(model="m", input="hi", previous_response_id="resp_nope"):
            pass
    assert caught.value.code == "previous_response_not_found"
