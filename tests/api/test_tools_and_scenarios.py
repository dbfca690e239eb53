"""Tools as a program sees them, the scripted model's two ways, and the bundled scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from ptc_emulator.testing.server import PTCEmulator
from tests.support import PTC_TOOLS, answer_all, arithmetic, js

FIXTURES = Path(__file__).parents[2] / "fixtures"


def run_to_end(client: openai.OpenAI, first: Any, tools: list[dict[str, Any]], handler: Any) -> Any:
    response = first
    while any(i.type == "function_call" for i in response.output):
        response = client.responses.create(
            model="m", previous_response_id=response.id, input=answer_all(response, handler), tools=tools
        )
    return response


def test_a_program_sees_exactly_its_tools(client: openai.OpenAI) -> None:
    probe = js("text(JSON.stringify(Object.keys(tools)), typeof tools.lookup, typeof tools.add)")
    response = client.responses.create(model="m", input=probe, tools=PTC_TOOLS)
    # add: programmatic only; echo: both; lookup: direct only (invisible to programs).
    assert response.output_text == '["add","echo"] undefined function'
    program_output = next(i for i in response.output if i.type == "program_output")
    assert program_output.status == "completed"


def test_without_the_hosted_tool_no_program_runs(client: openai.OpenAI) -> None:
    tools = [t for t in PTC_TOOLS if t["type"] != "programmatic_tool_calling"]
    response = client.responses.create(model="m", input=js("text('ran')"), tools=tools)
    assert [i.type for i in response.output] == ["message"]
    assert "not enabled" in response.output_text and "ran" not in response.output_text


def test_tool_choice_and_parallel_tool_calls_are_echoed(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="m",
        input=js("text('x')"),
        tools=PTC_TOOLS,
        tool_choice={"type": "programmatic_tool_calling"},
        parallel_tool_calls=False,
    )
    assert response.tool_choice.type == "programmatic_tool_calling"  # type: ignore[union-attr]
    assert response.parallel_tool_calls is False
    assert [t.type for t in response.tools] == ["function", "function", "function", "programmatic_tool_calling"]
    assert response.tools[0].allowed_callers == ["programmatic"]  # type: ignore[union-attr]


def test_parallel_tool_calls_false_emits_one_direct_call_at_a_time(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "look both up"},
            "turns": [
                {"call": [{"name": "lookup", "arguments": {"q": "a"}}, {"name": "lookup", "arguments": {"q": "b"}}]},
                {"message": "{{ outputs.lookup.q }}"},
            ],
        }
    )
    together = client.responses.create(model="m", input="look both up", tools=PTC_TOOLS)
    assert [i.type for i in together.output] == ["function_call", "function_call"]
    one = client.responses.create(model="m", input="look both up", tools=PTC_TOOLS, parallel_tool_calls=False)
    assert [json.loads(i.arguments) for i in one.output] == [{"q": "a"}]  # type: ignore[union-attr]
    two = client.responses.create(
        model="m",
        previous_response_id=one.id,
        input=answer_all(one, arithmetic),
        tools=PTC_TOOLS,
        parallel_tool_calls=False,
    )
    assert [json.loads(i.arguments) for i in two.output] == [{"q": "b"}]  # type: ignore[union-attr]
    final = run_to_end(client, two, PTC_TOOLS, arithmetic)
    assert final.output_text == "b"


def test_text_outputs_become_the_result_and_images_are_validated(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    png = "data:image/png;base64,iVBORw0KGgo="
    code = f"text('one'); image({json.dumps(png)}); text('two')"
    response = client.responses.create(model="m", input=js(code), tools=PTC_TOOLS)
    program_output = next(i for i in response.output if i.type == "program_output")
    assert program_output.result == "one\ntwo"
    assert ptc_emulator.journal[-1]["images"] == [png]
    bad = client.responses.create(model="m", input=js("image('file:///etc/passwd')"), tools=PTC_TOOLS)
    program_output = next(i for i in bad.output if i.type == "program_output")
    assert program_output.status == "incomplete"
    assert "image() takes a data:image/" in program_output.result
    assert bad.output_text.startswith("The program did not complete:")


def test_an_incomplete_program_still_gets_a_final_message(client: openai.OpenAI) -> None:
    response = client.responses.create(model="m", input=js("const x = 1;\nnull.boom;"), tools=PTC_TOOLS)
    program_output = next(i for i in response.output if i.type == "program_output")
    assert program_output.status == "incomplete"
    assert program_output.result.startswith("runtime: TypeError: Cannot read properties of null")
    assert "(line 2)" in program_output.result
    assert response.output_text == f"The program did not complete: {program_output.result}"


def test_a_multi_pause_program_resumes_many_times(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    code = "let acc = 0;\nfor (let i = 0; i < 12; i++) acc = await tools.add({a: acc, b: i});\ntext('acc=' + acc)"
    first = client.responses.create(model="m", input=js(code), tools=PTC_TOOLS)
    final = run_to_end(client, first, PTC_TOOLS, arithmetic)
    assert final.output_text == "acc=66"
    figures = [e["figures"] for e in ptc_emulator.journal]
    assert len(figures) == 13
    assert sum(f["program_tool_calls"] for f in figures) == 12
    assert all(f["programs_run"] == 1 for f in figures)


def test_captures_are_json_encoded_into_code(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    """A captured value can never become code: it is inserted as a JSON string."""
    ptc_emulator.add_scenario(
        {
            "match": {"input": "echo (?P<word>.+)"},
            "turns": [{"program": "const w = {{ word }};\ntext(typeof w + ':' + w)"}, {"message": "{{ result }}"}],
        }
    )
    hostile = "'); text('pwned'); ('"
    response = client.responses.create(model="m", input=f"echo {hostile}", tools=PTC_TOOLS)
    assert response.output_text == f"string:{hostile}"
    program = next(i for i in response.output if i.type == "program")
    assert json.dumps(hostile) in program.code


def test_refusal_and_error_turns(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"match": {"input": "forbidden"}, "turns": [{"refusal": "I can't help with that."}]})
    ptc_emulator.add_scenario(
        {
            "match": {"input": "broken"},
            "turns": [{"error": {"status": 400, "message": "Scripted failure.", "code": "scripted"}}],
        }
    )
    refused = client.responses.create(model="m", input="forbidden")
    message = refused.output[0]
    assert message.type == "message" and message.content[0].type == "refusal"
    assert message.content[0].refusal == "I can't help with that."  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="broken")
    assert caught.value.code == "scripted" and caught.value.message.endswith("Scripted failure.")


def test_final_message_in_a_later_response(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    """`with_output: false`: program_output alone; the client continues and gets the message."""
    ptc_emulator.add_scenario(
        {
            "match": {"input": "later"},
            "turns": [{"program": "text('42')", "with_output": False}, {"message": "The answer is {{ result }}."}],
        }
    )
    first = client.responses.create(model="m", input="later", tools=PTC_TOOLS)
    assert [i.type for i in first.output] == ["program", "program_output"]
    second = client.responses.create(model="m", previous_response_id=first.id, tools=PTC_TOOLS)
    assert [i.type for i in second.output] == ["message"]
    assert second.output_text == "The answer is 42."
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id=second.id, tools=PTC_TOOLS)
    assert caught.value.code == "scenario_exhausted"


def test_direct_call_then_message_without_a_user_message_in_the_replay(client: openai.OpenAI) -> None:
    """The overview article's loop: input is the stored first output plus the tool output."""
    tools: list[Any] = [
        {
            "type": "function",
            "name": "get_order",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
                "additionalProperties": False,
            },
        }
    ]
    first = client.responses.create(
        model="m",
        tools=tools,
        input="Why is order A-104 delayed?",
        tool_choice={"type": "function", "name": "get_order"},
    )
    (call,) = first.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"order_id": "A-104"}
    assert call.caller is None
    result = {"order_id": "A-104", "promised_date": "2026-07-13"}
    final = client.responses.create(
        model="m",
        tools=tools,
        input=[*first.output, {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps(result)}],
    )
    assert final.output_text.startswith("Order A-104 was promised for 2026-07-13")


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.stem)
def test_bundled_scenarios_parse_and_name_themselves(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert "__" in path.stem  # group__case
    assert data["turns"] and data["match"]


def test_customer_lookup_scenario(client: openai.OpenAI) -> None:
    tools: list[Any] = [
        {
            "type": "function",
            "name": "get_customer",
            "description": "Look up a customer by ID.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"],
                "additionalProperties": False,
            },
            "allowed_callers": ["programmatic"],
        },
        {"type": "programmatic_tool_calling"},
    ]

    def get_customer(name: str, args: dict[str, Any]) -> dict[str, Any]:
        if args["customer_id"] == "123":
            return {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}
        return {"found": False, "customer": None}

    found = run_to_end(
        client, client.responses.create(model="m", input="Look up customer 123", tools=tools), tools, get_customer
    )
    assert found.output_text == "Customer 123 is Example Customer, on the pro plan."
    missing = run_to_end(
        client, client.responses.create(model="m", input="Look up customer 999", tools=tools), tools, get_customer
    )
    assert missing.output_text == "No customer with id 999 was found."


def test_a_new_user_message_beside_the_last_outputs_of_an_open_program(client: openai.OpenAI) -> None:
    """The open program finishes first; then the new message is answered from the start of its script."""
    first = client.responses.create(model="m", input=js("text(String(await tools.add({a: 1, b: 2})))"), tools=PTC_TOOLS)
    outputs = answer_all(first, arithmetic)
    later = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[*outputs, {"role": "user", "content": js("text('second program')")}],
        tools=PTC_TOOLS,
    )
    kinds = [i.type for i in later.output]
    assert kinds == ["program_output", "program", "program_output", "message"]
    results = [i.result for i in later.output if i.type == "program_output"]
    assert results == ["3", "second program"]
    assert later.output_text == "second program"
