"""A `call` or `program` turn's `preamble`: the message a model says before its call(s) in the same
response (`Let me look that up.`, then the call), as real models answer. The response carries
the turn's reasoning, the message (`phase: commentary`), then the call(s) or the program; streamed,
the message's events all come before the call's; the conversation goes on from it, however the
client sends it back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptc_emulator.testing.server import PTCEmulator
from tests.support import PTC_TOOLS, validating_client

LOOKUP = {
    "type": "function",
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}
TOOLS: list[Any] = [LOOKUP]


def scenario(**turn: Any) -> dict[str, Any]:
    return {
        "name": "preamble",
        "match": {"input": "(?i)look up (?P<what>\\w+)"},
        "turns": [
            {"call": {"name": "lookup", "arguments": {"q": "{{ what }}"}}, **turn},
            {"message": "Found: {{ output }}"},
        ],
    }


def test_a_call_turn_says_its_preamble_before_the_call(ptc_emulator: PTCEmulator) -> None:
    """Before, a turn was one kind: `preamble` was refused as an unknown field, and a scenario could
    not answer [message, function_call] in one response as models do."""
    ptc_emulator.add_scenario(scenario(preamble="Let me look up {{ what }}.", reasoning="One lookup."))
    client = validating_client(ptc_emulator, max_retries=0)
    first = client.responses.create(
        model="m", input="Look up cats", tools=TOOLS, store=False, include=["reasoning.encrypted_content"]
    )
    assert [o.type for o in first.output] == ["reasoning", "message", "function_call"]
    message, call = first.output[1], first.output[2]
    assert first.output_text == "Let me look up cats."
    assert message.type == "message" and message.phase == "commentary" and message.status == "completed"
    assert call.type == "function_call" and call.name == "lookup" and call.arguments == '{"q":"cats"}'
    # the store:false tool loop sends everything back, the preamble among it, and goes on
    given: list[Any] = [{"role": "user", "content": "Look up cats"}]
    given += [o.model_dump(exclude_none=True) for o in first.output]
    given.append({"type": "function_call_output", "call_id": call.call_id, "output": "3 cats"})
    second = client.responses.create(model="m", input=given, tools=TOOLS, store=False)
    assert [o.type for o in second.output] == ["message"] and second.output_text == "Found: 3 cats"


def test_a_chained_conversation_goes_on_from_a_preamble(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario(preamble="Checking."))
    client = validating_client(ptc_emulator, max_retries=0)
    first = client.responses.create(model="m", input="Look up dogs", tools=TOOLS)
    assert [o.type for o in first.output] == ["message", "function_call"] and first.output_text == "Checking."
    output = {"type": "function_call_output", "call_id": first.output[1].call_id, "output": "2 dogs"}
    second = client.responses.create(model="m", input=[output], tools=TOOLS, previous_response_id=first.id)
    assert second.output_text == "Found: 2 dogs"


def test_a_streamed_preamble_is_told_before_the_call(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario(preamble="Let me look that up."))
    client = validating_client(ptc_emulator, max_retries=0)
    with client.responses.stream(model="m", input="Look up owls", tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    told = [(e.type, getattr(e, "output_index", None)) for e in events]
    message_events = [t for t, at in told if at == 0]
    call_events = [t for t, at in told if at == 1]
    assert message_events[0] == "response.output_item.added" and message_events[-1] == "response.output_item.done"
    assert message_events[1] == "response.content_part.added"
    assert "response.output_text.delta" in message_events and "response.output_text.done" in message_events
    assert call_events[0] == "response.output_item.added" and call_events[-1] == "response.output_item.done"
    # every event of the message comes before the call's first
    last_message = max(i for i, (_, at) in enumerate(told) if at == 0)
    first_call = min(i for i, (_, at) in enumerate(told) if at == 1)
    assert last_message < first_call
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Let me look that up."
    assert [o.type for o in final.output] == ["message", "function_call"]
    assert final.output_text == "Let me look that up." and final.output[0].phase == "commentary"


def test_a_turn_of_several_calls_says_its_preamble_once(ptc_emulator: PTCEmulator) -> None:
    """Played a call a response (`parallel_tool_calls: false`), the preamble comes with the first."""
    ptc_emulator.add_scenario(
        {
            "name": "two",
            "match": {"input": "^both$"},
            "turns": [
                {
                    "preamble": "Two lookups.",
                    "call": [{"name": "lookup", "arguments": {"q": "a"}}, {"name": "lookup", "arguments": {"q": "b"}}],
                },
                {"message": "Done."},
            ],
        }
    )
    client = validating_client(ptc_emulator, max_retries=0)
    together = client.responses.create(model="m", input="both", tools=TOOLS, store=False)
    assert [o.type for o in together.output] == ["message", "function_call", "function_call"]
    given: list[Any] = [{"role": "user", "content": "both"}]
    kinds = []
    for _ in range(3):
        got = client.responses.create(model="m", input=given, tools=TOOLS, store=False, parallel_tool_calls=False)
        kinds.append([o.type for o in got.output])
        given += [o.model_dump(exclude_none=True) for o in got.output]
        given += [
            {"type": "function_call_output", "call_id": o.call_id, "output": "x"}
            for o in got.output
            if o.type == "function_call"
        ]
    assert kinds == [["message", "function_call"], ["function_call"], ["message"]]


def test_a_program_turn_says_its_preamble_before_the_program(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "program",
            "match": {"input": "^compute$"},
            "turns": [
                {"preamble": "Let me compute that.", "program": 'text("42")'},
                {"message": " It is {{ result }}."},
            ],
        }
    )
    client = validating_client(ptc_emulator, max_retries=0)
    response = client.responses.create(model="m", input="compute", tools=PTC_TOOLS)
    assert [o.type for o in response.output] == ["message", "program", "program_output", "message"]
    assert response.output[0].phase == "commentary"
    assert response.output_text == "Let me compute that. It is 42."


@pytest.mark.parametrize(
    ("turn", "kind"),
    [
        ({"message": "Hi.", "preamble": "Hello."}, "a message"),
        ({"refusal": "No.", "preamble": "Well."}, "a refusal"),
        ({"error": {"status": 500, "message": "boom"}, "preamble": "Well."}, "an error"),
    ],
    ids=["message", "refusal", "error"],
)
def test_a_preamble_on_a_turn_without_a_call_is_refused(
    ptc_emulator: PTCEmulator, turn: dict[str, Any], kind: str
) -> None:
    with pytest.raises(ValueError, match=f"preamble goes with a call or program turn .*, not {kind} turn$"):
        ptc_emulator.add_scenario({"name": "misplaced", "match": {"input": "^x$"}, "turns": [turn]})


def test_a_preamble_template_that_cannot_compile_is_refused(ptc_emulator: PTCEmulator) -> None:
    with pytest.raises(ValueError, match=r"turns\.0\.preamble: invalid template"):
        ptc_emulator.add_scenario(scenario(preamble="Let me look {{ up"))


PAGE = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


def page_scenario() -> dict[str, Any]:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## A message before a call") :]
    [block] = re.findall(r"^```yaml\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    scenario = yaml.safe_load(block)
    assert isinstance(scenario, dict) and "preamble" in scenario["turns"][0]
    return scenario


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_pages_example_plays_as_it_says(ptc_emulator: PTCEmulator, stream: bool) -> None:
    ptc_emulator.add_scenario(page_scenario())
    client = validating_client(ptc_emulator, max_retries=0)
    question = {"model": "m", "input": "What is the weather in Oslo?", "tools": TOOLS}
    if stream:
        with client.responses.stream(**question) as events:
            first = events.get_final_response()
    else:
        first = client.responses.create(**question)
    assert [o.type for o in first.output] == ["message", "function_call"]
    assert first.output_text == "Let me look up the weather in Oslo."
    output = {"type": "function_call_output", "call_id": first.output[1].call_id, "output": '{"sky": "grey"}'}
    second = client.responses.create(model="m", input=[output], tools=TOOLS, previous_response_id=first.id)
    assert second.output_text == "It is grey in Oslo."
