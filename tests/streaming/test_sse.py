"""`stream: true` over SSE, through the official Python SDK and raw HTTP.

The SDK's `responses.stream()` helper enforces the ordering rules (created first, one `added` per
index, deltas after their item, identities kept, no unfinished items); the raw tests check every
event strictly against the SDK's models and the rules in `streaming_support.check_stream`.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import (
    ADD_TOOLS,
    THREE_PAUSES,
    THREE_PAUSES_ANSWER,
    add_outputs,
    check_event,
    check_stream,
    decode,
    get_stream,
    js,
    normalise,
    post_stream,
    run_loop,
)
from tests.support import ClientVersion

pytestmark = pytest.mark.sdk  # every SSE event, through the official client's stream helper and models

REASONING_SCENARIO = """
match:
  input: '(?i)reason about (?P<n>\\d+)'
  tools: [add]
turns:
  - reasoning: Add in two steps, one after the other.
    program: |
      const once = await tools.add({ a: {{ n | int }}, b: 1 });
      const twice = await tools.add({ a: once, b: 1 });
      text(JSON.stringify({ n: {{ n | int }}, result: twice }));
  - message: "{{ data.n }} plus two is {{ data.result }}."
"""

REFUSAL_SCENARIO = {"match": {"input": "(?i)please refuse"}, "turns": [{"refusal": "I can't help with that."}]}


def _sdk_loop(client: openai.OpenAI, first: str, tools: list[dict[str, Any]]) -> list[Response]:
    """The loop with the SDK's stream helper; every response's events pass the helper's checks."""
    items: list[Any] = [{"role": "user", "content": first}]
    finals = []
    for _ in range(10):
        with client.responses.stream(model="emulated", input=items, tools=tools) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        Response.model_validate(final.model_dump(mode="json", exclude={"output": {"__all__": {"parsed_arguments"}}}))
        finals.append(final)
        output = [
            item.model_dump(mode="json", exclude_none=True, exclude={"parsed_arguments"}) for item in final.output
        ]
        outputs = add_outputs(output)
        if not outputs:
            return finals
        items = [*items, *output, *outputs]
    raise AssertionError("the loop did not end")


def test_stream_helper_runs_a_program_through_three_pauses(
    ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    client_version("openai-python", openai.__version__)
    client = ptc_emulator.client(max_retries=0)
    finals = _sdk_loop(client, js(THREE_PAUSES), ADD_TOOLS)
    assert [len([i for i in f.output if i.type == "function_call"]) for f in finals] == [1, 1, 1, 0]
    assert [i.type for i in finals[0].output] == ["program", "function_call"]
    program_id = finals[0].output[0].call_id
    for final in finals[:-1]:
        call = final.output[-1]
        assert call.type == "function_call" and call.caller is not None
        assert call.caller.type == "program" and call.caller.caller_id == program_id
    assert [i.type for i in finals[-1].output] == ["program_output", "message"]
    assert finals[-1].output_text == THREE_PAUSES_ANSWER
    journal = ptc_emulator.journal
    assert [e["response_id"] for e in journal] == [f.id for f in finals]
    assert all(e["status"] == 200 and e["figures"]["programs_run"] == 1 for e in journal)


def test_stream_helper_runs_a_scenario_with_reasoning(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(REASONING_SCENARIO)
    finals = _sdk_loop(ptc_emulator.client(max_retries=0), "Please reason about 40", ADD_TOOLS)
    assert [i.type for i in finals[0].output] == ["reasoning", "program", "function_call"]
    assert finals[-1].output_text == "40 plus two is 42."


def _raw_loop(
    emulator: PTCEmulator, first: str, tools: list[dict[str, Any]], **extra: Any
) -> list[list[dict[str, Any]]]:
    """The loop over raw SSE: the events of each response, each stream checked."""
    streams: list[list[dict[str, Any]]] = []

    def create(items: list[dict[str, Any]]) -> dict[str, Any]:
        status, raw = post_stream(emulator, {"model": "emulated", "input": items, "tools": tools, **extra})
        assert status == 200, raw
        events = decode(raw)
        streams.append(events)
        return check_stream(events)

    run_loop(create, first)
    return streams


def test_raw_events_validate_strictly_for_every_item_type(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(REASONING_SCENARIO)
    ptc_emulator.add_scenario(REFUSAL_SCENARIO)
    streams = _raw_loop(ptc_emulator, "reason about 1", ADD_TOOLS)
    streams += _raw_loop(ptc_emulator, "please refuse", ADD_TOOLS)
    seen = {event["type"] for events in streams for event in events}
    assert {
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.refusal.delta",
        "response.refusal.done",
        "response.content_part.done",
    } <= seen
    program_events = [
        e for events in streams for e in events if e.get("item", {}).get("type") in ("program", "program_output")
    ]
    assert program_events and all(e["type"].startswith("response.output_item.") for e in program_events)
    added = next(e["item"] for e in program_events if e["type"] == "response.output_item.added")
    assert added["code"] and added["fingerprint"], "a program arrives whole in output_item.added"
    deltas = [e for events in streams for e in events if e["type"] == "response.output_text.delta"]
    assert all(e["logprobs"] == [] for e in deltas)
    assert len(deltas) > 1, "the final text should come in several deltas"


def test_sdk_iteration_yields_valid_events(ptc_emulator: PTCEmulator) -> None:
    client = ptc_emulator.client(max_retries=0)
    stream = client.responses.create(model="emulated", input=js(THREE_PAUSES), tools=ADD_TOOLS, stream=True)
    events = [event.model_dump(mode="json", exclude_unset=True) for event in stream]
    check_stream(events)


def test_streamed_final_equals_non_streamed(ptc_emulator: PTCEmulator) -> None:
    def by_json(items: list[dict[str, Any]]) -> dict[str, Any]:
        client = ptc_emulator.client(max_retries=0)
        return client.responses.create(model="emulated", input=items, tools=ADD_TOOLS).model_dump(
            mode="json", exclude_unset=True
        )

    def by_stream(items: list[dict[str, Any]]) -> dict[str, Any]:
        status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": items, "tools": ADD_TOOLS})
        assert status == 200
        return check_stream(decode(raw))

    plain = run_loop(by_json, js(THREE_PAUSES))
    streamed = run_loop(by_stream, js(THREE_PAUSES))
    assert len(plain) == len(streamed) == 4
    for a, b in zip(plain, streamed, strict=True):
        assert set(a) == set(b)
        assert normalise(a) == normalise(b)
    assert [plain[i]["id"] for i in range(4)] != [streamed[i]["id"] for i in range(4)]
    retrieved = ptc_emulator.client(max_retries=0).responses.retrieve(streamed[-1]["id"])
    assert retrieved.model_dump(mode="json", exclude_unset=True) == streamed[-1], "stored as streamed"


def test_stored_response_replays_the_events_it_was_streamed_with(ptc_emulator: PTCEmulator) -> None:
    status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": js("text('replayed')"), "tools": ADD_TOOLS})
    assert status == 200
    original = decode(raw)
    response_id = original[0]["response"]["id"]
    assert decode(get_stream(ptc_emulator, response_id)) == original
    for after in (0, 3, len(original) - 2, len(original) - 1, len(original) + 5):
        assert decode(get_stream(ptc_emulator, response_id, after)) == original[after + 1 :]
    client = ptc_emulator.client(max_retries=0)
    with client.responses.stream(response_id=response_id, starting_after=4) as stream:
        assert [e.sequence_number for e in stream] == list(range(5, len(original)))
        assert stream.get_final_response().output_text == "replayed"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_missing", stream=True)


def test_background_stream_is_queued_then_completes(ptc_emulator: PTCEmulator) -> None:
    status, raw = post_stream(
        ptc_emulator, {"model": "emulated", "input": js("text('later')"), "tools": ADD_TOOLS, "background": True}
    )
    assert status == 200
    events = decode(raw)
    final = check_stream(events)
    assert events[0]["response"]["status"] == "queued" and events[1]["response"]["status"] == "in_progress"
    assert final["status"] == "completed" and final["background"] is True
    assert decode(get_stream(ptc_emulator, final["id"])) == events


@pytest.mark.ptc_strict(unmatched=False)  # its error is a request nothing answers
def test_error_before_the_first_byte_is_an_http_error(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)fail at once"},
            "turns": [{"error": {"status": 409, "message": "Scripted conflict.", "code": "scripted", "param": "x"}}],
        }
    )
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.ConflictError) as conflict:
        client.responses.create(model="emulated", input="fail at once", stream=True)
    assert conflict.value.code == "scripted" and conflict.value.param == "x"
    with pytest.raises(openai.BadRequestError) as no_match:
        client.responses.create(model="emulated", input="nothing matches this", stream=True)
    assert no_match.value.code == "no_scenario_matched"
    status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": 5})
    assert status == 400 and json.loads(raw)["error"]["param"] == "input"
    assert [e["status"] for e in ptc_emulator.journal] == [409, 400]  # a body FastAPI refuses is not journalled


def test_error_after_the_first_byte_is_an_error_event(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)fail after a program"},
            "turns": [
                {"program": "text('ran')"},
                {"error": {"status": 500, "message": "Scripted failure.", "type": "server_error"}},
            ],
        }
    )
    status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": "fail after a program", "tools": ADD_TOOLS})
    assert status == 200
    events = decode(raw)
    for event in events:
        check_event(event)
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1] == {
        "type": "error",
        "code": "server_error",
        "message": "Scripted failure.",
        "param": None,
        "sequence_number": 2,
    }
    client = ptc_emulator.client(max_retries=0)
    stream = client.responses.create(model="emulated", input="fail after a program", tools=ADD_TOOLS, stream=True)
    assert [e.type for e in stream][-1] == "error"
    assert [e["status"] for e in ptc_emulator.journal] == [500, 500]


def test_cut_stream_ends_early_and_resumes(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": "(?i)cut me"}, "turns": [{"message": "a b c d e f", "fault": {"cut_stream_after": 4}}]}
    )
    status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": "cut me"})
    assert status == 200
    head = decode(raw)
    assert [e["sequence_number"] for e in head] == [0, 1, 2, 3]
    rest = decode(get_stream(ptc_emulator, head[0]["response"]["id"], starting_after=3))
    final = check_stream([*head, *rest])
    assert final["output"][0]["content"][0]["text"] == "a b c d e f"


def test_incomplete_response_ends_with_response_incomplete(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)run out of tokens"},
            "turns": [{"message": "cut short", "fault": {"response_incomplete": "max_output_tokens"}}],
        }
    )
    status, raw = post_stream(ptc_emulator, {"model": "emulated", "input": "run out of tokens"})
    assert status == 200
    events = decode(raw)
    final = check_stream(events)
    assert events[-1]["type"] == "response.incomplete"
    assert final["status"] == "incomplete" and final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["status"] == "incomplete"
    assert decode(get_stream(ptc_emulator, final["id"])) == events
