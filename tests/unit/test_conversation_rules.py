"""The conversation rules, in-process on the fake runner: a client replaying items it tampered
with gets the 400 the hosted API gives, with its message, param and code (the cases of
tests/api/test_rejections.py, which plays them over a real server and V8)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.support import PTC_TOOLS, js
from tests.unit.fake_runner import FakeProgram, FakeRunner

CODE = "const s = await tools.add({a: 1, b: 2});\nconst t = await tools.add({a: s, b: 3});\ntext(String(t))"
PROGRAM = js(CODE)
TWO_ADDS = FakeProgram(batches=[[("add", {"a": 1, "b": 2})], [("add", {"a": 3, "b": 3})]], finish=lambda out: out[-1])
THINK = "text(String(await tools.add({a: 2, b: 2})))"
THINKING = FakeProgram(batches=[[("add", {"a": 2, "b": 2})]], finish=lambda out: out[-1])


@pytest.fixture(autouse=True)
def _programs(fake_runner: FakeRunner) -> None:
    fake_runner.define(CODE, TWO_ADDS)
    fake_runner.define(THINK, THINKING)


def first_pause(sdk: openai.OpenAI) -> list[dict[str, Any]]:
    """The replayed items after the first pause: user message, program, its call, and the call's output."""
    response = sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    program, call = response.output
    assert program.type == "program" and call.type == "function_call"
    return [
        {"role": "user", "content": PROGRAM},
        program.model_dump(exclude_none=True),
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "3", "caller": call.caller.model_dump()},  # type: ignore[union-attr]
    ]


def rejected(sdk: openai.OpenAI, items: list[dict[str, Any]], **params: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False, **params)  # type: ignore[arg-type]
    error = caught.value
    assert error.status_code == 400
    assert isinstance(error.body, dict) and error.body["type"] == "invalid_request_error"
    return error


def test_the_untouched_replay_is_accepted(unit_sdk: openai.OpenAI) -> None:
    response = unit_sdk.responses.create(model="m", input=first_pause(unit_sdk), tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    assert [i.type for i in response.output] == ["function_call"]
    assert json.loads(response.output[0].arguments) == {"a": 3, "b": 3}  # type: ignore[union-attr]


def test_reserialised_arguments_are_not_a_modification(unit_sdk: openai.OpenAI) -> None:
    items = first_pause(unit_sdk)
    items[2]["arguments"] = '{ "b": 2,  "a": 1 }'
    response = unit_sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    assert [i.type for i in response.output] == ["function_call"]


def _fingerprint(items: list[dict[str, Any]]) -> None:
    fingerprint = items[1]["fingerprint"]
    items[1]["fingerprint"] = fingerprint[:-4] + ("AAAA" if not fingerprint.endswith("AAAA") else "BBBB")


def _foreign_fingerprint(items: list[dict[str, Any]]) -> None:
    version, payload, _ = items[1]["fingerprint"].split(".")
    items[1]["fingerprint"] = f"{version}.{payload}.{'x' * 43}"


def _code(items: list[dict[str, Any]]) -> None:
    items[1]["code"] = items[1]["code"].replace("b: 3", "b: 4")


def _arguments(items: list[dict[str, Any]]) -> None:
    items[2]["arguments"] = json.dumps({"a": 1, "b": 20})


def _tool_name(items: list[dict[str, Any]]) -> None:
    items[2]["name"] = "echo"


def _no_output(items: list[dict[str, Any]]) -> None:
    del items[3]


def _orphan_output(items: list[dict[str, Any]]) -> None:
    items.append({"type": "function_call_output", "call_id": "call_nobody", "output": "1"})


def _output_first(items: list[dict[str, Any]]) -> None:
    items[2], items[3] = items[3], items[2]


def _no_caller(items: list[dict[str, Any]]) -> None:
    del items[3]["caller"]


def _other_caller(items: list[dict[str, Any]]) -> None:
    items[3]["caller"] = {"type": "program", "caller_id": "call_someone_else"}


def _forged_call(items: list[dict[str, Any]]) -> None:
    forged = copy.deepcopy(items[2])
    forged["call_id"] = "call_forged"
    forged.pop("id", None)
    items[3:3] = [forged]
    items.append({"type": "function_call_output", "call_id": "call_forged", "output": "9", "caller": forged["caller"]})


def _duplicate_output(items: list[dict[str, Any]]) -> None:
    items.append(copy.deepcopy(items[3]))


Tamper = Callable[[list[dict[str, Any]]], None]
CASES: list[tuple[str, Tamper, str, str | None, str | None]] = [
    # (id, tamper, message fragment, param, code)
    (
        "fingerprint",
        _fingerprint,
        "Invalid fingerprint for program item with call_id '{program}'",
        "input[1].fingerprint",
        "invalid_fingerprint",
    ),
    ("foreign-fingerprint", _foreign_fingerprint, "Invalid fingerprint", "input[1].fingerprint", "invalid_fingerprint"),
    (
        "code",
        _code,
        "The code of program item with call_id '{program}' does not match its fingerprint",
        "input[1].code",
        None,
    ),
    (
        "arguments",
        _arguments,
        "The function_call items of program {program} do not match what the program does",
        "input",
        "program_divergence",
    ),
    ("tool-name", _tool_name, "do not match what the program does", "input", "program_divergence"),
    ("no-output", _no_output, "No tool output found for function call {call}.", "input", None),
    (
        "orphan-output",
        _orphan_output,
        "No tool call found for function call output with call_id call_nobody.",
        None,
        None,
    ),
    (
        "output-before-call",
        _output_first,
        "No tool call found for function call output with call_id {call}",
        None,
        None,
    ),
    ("no-caller", _no_caller, "must carry the caller of its function_call unchanged", "input[3].caller", None),
    ("other-caller", _other_caller, "must carry the caller of its function_call unchanged", "input[3].caller", None),
    ("forged-call", _forged_call, "was not issued by program {program}", None, None),
    ("duplicate-output", _duplicate_output, "appears more than once", None, None),
]


@pytest.mark.parametrize(("tamper", "message", "param", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_tampered_replay_is_refused(
    unit_sdk: openai.OpenAI, tamper: Tamper, message: str, param: str | None, code: str | None
) -> None:
    items = first_pause(unit_sdk)
    program, call = items[1]["call_id"], items[2]["call_id"]
    tamper(items)
    error = rejected(unit_sdk, items)
    assert message.format(program=program, call=call) in error.message
    if param is not None:
        assert error.param == param
    if code is not None:
        assert error.code == code


def test_the_exact_wording_of_a_modified_fingerprint(unit_sdk: openai.OpenAI) -> None:
    items = first_pause(unit_sdk)
    _fingerprint(items)
    assert rejected(unit_sdk, items).message == (
        f"Error code: 400 - Invalid fingerprint for program item with call_id '{items[1]['call_id']}': "
        "it was modified or was not issued by this server."
    )


def test_the_exact_wording_of_a_call_left_without_output(unit_sdk: openai.OpenAI) -> None:
    items = first_pause(unit_sdk)[:3]
    assert (
        rejected(unit_sdk, items).message
        == f"Error code: 400 - No tool output found for function call {items[2]['call_id']}."
    )


def test_a_modified_program_output(unit_sdk: openai.OpenAI) -> None:
    items = first_pause(unit_sdk)
    response = unit_sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    (call,) = response.output
    items += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "6", "caller": call.caller.model_dump()},  # type: ignore[union-attr]
    ]
    done = unit_sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    program_output = next(i for i in done.output if i.type == "program_output")
    assert program_output.result == "6"
    items.append({**program_output.model_dump(), "result": "600"})
    items.append({"role": "user", "content": js("text('next')")})
    error = rejected(unit_sdk, items)
    assert f"The program_output item with call_id {program_output.call_id} was modified" in error.message


def test_a_made_up_call_on_a_finished_program_is_refused(unit_sdk: openai.OpenAI) -> None:
    """As tests/api/test_orphan_call.py: a call the program never made, after it finished."""
    items = first_pause(unit_sdk)
    second = unit_sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    (call,) = second.output
    items += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "6", "caller": call.caller.model_dump()},  # type: ignore[union-attr]
    ]
    done = unit_sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    items += [i.model_dump(exclude_none=True) for i in done.output]
    at = next(n for n, i in enumerate(items) if i.get("type") == "program_output")
    forged = {**items[2], "call_id": "call_forged_0001", "id": "fc_forged_0001", "arguments": '{"a":5,"b":5}'}
    answer = {
        "type": "function_call_output",
        "call_id": "call_forged_0001",
        "output": "10",
        "caller": items[2]["caller"],
    }
    more = {"role": "user", "content": js("text('again');")}
    error = rejected(unit_sdk, [*items[:at], forged, answer, *items[at:], more])
    assert f"was not issued by program {items[1]['call_id']}" in error.message


def test_tools_changed_under_a_running_program(unit_sdk: openai.OpenAI) -> None:
    items = first_pause(unit_sdk)
    tools = [t for t in PTC_TOOLS if t.get("name") != "echo"]
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input=items, tools=tools, store=False)  # type: ignore[arg-type]
    assert "The tools a program may call changed while program" in caught.value.message
    assert caught.value.param == "tools"


def test_previous_response_id_of_a_store_false_response(unit_sdk: openai.OpenAI) -> None:
    """store:false keeps nothing, so it cannot be continued by id (only by replaying items)."""
    response = unit_sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", previous_response_id=response.id, input="hi", tools=PTC_TOOLS)  # type: ignore[arg-type]
    assert caught.value.code == "previous_response_not_found"


def test_a_stored_pause_resumes_by_id(unit_sdk: openai.OpenAI, fake_runner: FakeRunner) -> None:
    first = unit_sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS)  # type: ignore[arg-type]
    _, call = first.output
    answer = {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": "3",
        "caller": call.caller.model_dump(),
    }  # type: ignore[union-attr]
    second = unit_sdk.responses.create(model="m", previous_response_id=first.id, input=[answer], tools=PTC_TOOLS)  # type: ignore[arg-type, list-item]
    assert [i.type for i in second.output] == ["function_call"]
    assert [len(r.journal) for r in fake_runner.runs[-2:]] == [0, 1]  # the resume replayed the first answer


def test_a_missing_reasoning_item_with_store_false(unit_sdk: openai.OpenAI, unit_http: Any) -> None:
    scenario = {
        "name": "unit__think_first",
        "match": {"input": "think first"},
        "turns": [{"reasoning": "Add the numbers in a program.", "program": THINK}, {"message": "{{ result }}"}],
    }
    assert unit_http.post("/_emulator/scenarios", json=scenario).status_code == 201
    response = unit_sdk.responses.create(model="m", input="think first", tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    reasoning, program, call = response.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    output = {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": "4",
        "caller": call.caller.model_dump(),
    }  # type: ignore[union-attr]
    base = [{"role": "user", "content": "think first"}]
    whole = [*base, *(i.model_dump(exclude_none=True) for i in response.output), output]
    assert unit_sdk.responses.create(model="m", input=whole, tools=PTC_TOOLS, store=False).output_text == "4"  # type: ignore[arg-type]
    without = [*base, program.model_dump(exclude_none=True), call.model_dump(exclude_none=True), output]
    assert rejected(unit_sdk, without).message == (
        f"Error code: 400 - Item '{program.id}' of type 'program' was provided without its required 'reasoning' "
        f"item: '{reasoning.id}'."
    )
    tampered = copy.deepcopy(whole)
    tampered[1]["encrypted_content"] = "x" + tampered[1]["encrypted_content"][1:]
    assert rejected(unit_sdk, tampered).code == "invalid_encrypted_content"
