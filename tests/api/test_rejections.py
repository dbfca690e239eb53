"""Where the hosted API is strict, so is the emulator: each rejection, its status, type and message."""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import PTC_TOOLS, js

PROGRAM = js("const s = await tools.add({a: 1, b: 2});\nconst t = await tools.add({a: s, b: 3});\ntext(String(t))")


def first_pause(client: openai.OpenAI, store: bool = False) -> list[dict[str, Any]]:
    """The replayed items after the first pause: user message, program, its call, and the call's output."""
    response = client.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS, store=store)
    program, call = response.output
    assert program.type == "program" and call.type == "function_call"
    return [
        {"role": "user", "content": PROGRAM},
        program.model_dump(exclude_none=True),
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "3", "caller": call.caller.model_dump()},
    ]


def rejected(client: openai.OpenAI, items: list[dict[str, Any]], **params: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False, **params)
    error = caught.value
    assert error.status_code == 400
    assert isinstance(error.body, dict) and error.body["type"] == "invalid_request_error"
    return error


def test_the_untouched_replay_is_accepted(client: openai.OpenAI) -> None:
    items = first_pause(client)
    response = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    assert [i.type for i in response.output] == ["function_call"]


def test_modified_fingerprint(client: openai.OpenAI) -> None:
    items = first_pause(client)
    fingerprint = items[1]["fingerprint"]
    items[1]["fingerprint"] = fingerprint[:-4] + ("AAAA" if not fingerprint.endswith("AAAA") else "BBBB")
    error = rejected(client, items)
    assert error.message == (
        f"Error code: 400 - Invalid fingerprint for program item with call_id '{items[1]['call_id']}': "
        "it was modified or was not issued by this server."
    )
    assert error.body["param"] == "input[1].fingerprint"  # type: ignore[index]
    assert error.code == "invalid_fingerprint"


def test_fingerprint_from_another_server(client: openai.OpenAI) -> None:
    """A structurally valid fingerprint signed with another secret is refused the same way."""
    items = first_pause(client)
    version, payload, _ = items[1]["fingerprint"].split(".")
    items[1]["fingerprint"] = f"{version}.{payload}.{'x' * 43}"
    assert "Invalid fingerprint" in rejected(client, items).message


def test_modified_code(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items[1]["code"] = items[1]["code"].replace("b: 3", "b: 4")
    error = rejected(client, items)
    assert error.message.endswith(
        f"The code of program item with call_id '{items[1]['call_id']}' does not match its fingerprint: "
        "program code cannot be modified."
    )
    assert error.body["param"] == "input[1].code"  # type: ignore[index]


def test_modified_function_call_arguments(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items[2]["arguments"] = json.dumps({"a": 1, "b": 20})
    error = rejected(client, items)
    assert f"The function_call items of program {items[1]['call_id']} do not match what the program does" in (
        error.message
    )
    assert "arguments were modified" in error.message
    assert error.code == "program_divergence"


@pytest.mark.parametrize("arguments", ["x", "", '{"a": 1, "b": 2,}'])
def test_arguments_modified_into_text_that_is_not_json(client: openai.OpenAI, arguments: str) -> None:
    """Arguments that no longer parse are a modification like any other: the 400, not a 200 whose
    program ends `incomplete` with the sandbox's own parse error (answered so before)."""
    items = first_pause(client)
    items[2]["arguments"] = arguments
    error = rejected(client, items)
    assert error.code == "program_divergence"
    assert "arguments were modified" in error.message
    assert "controller" not in error.message


def test_reserialised_arguments_are_not_a_modification(client: openai.OpenAI) -> None:
    """Clients may re-serialise JSON (key order, spaces): arguments compare as parsed JSON."""
    items = first_pause(client)
    items[2]["arguments"] = '{ "b": 2,  "a": 1 }'
    response = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    assert [i.type for i in response.output] == ["function_call"]


def test_modified_tool_name(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items[2]["name"] = "echo"
    assert rejected(client, items).code == "program_divergence"


def test_call_left_without_output(client: openai.OpenAI) -> None:
    items = first_pause(client)[:3]
    error = rejected(client, items)
    assert error.message == f"Error code: 400 - No tool output found for function call {items[2]['call_id']}."
    assert error.body["param"] == "input"  # type: ignore[index]


def test_output_without_a_call(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items.append({"type": "function_call_output", "call_id": "call_nobody", "output": "1"})
    error = rejected(client, items)
    assert error.message == "Error code: 400 - No tool call found for function call output with call_id call_nobody."


def test_output_before_its_call(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items[2], items[3] = items[3], items[2]
    assert "No tool call found for function call output with call_id" in rejected(client, items).message


def test_output_without_the_caller_of_its_call(client: openai.OpenAI) -> None:
    items = first_pause(client)
    del items[3]["caller"]
    error = rejected(client, items)
    assert "must carry the caller of its function_call unchanged" in error.message
    assert error.body["param"] == "input[3].caller"  # type: ignore[index]


def test_output_with_another_caller(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items[3]["caller"] = {"type": "program", "caller_id": "call_someone_else"}
    assert "must carry the caller of its function_call unchanged" in rejected(client, items).message


def test_a_call_the_program_did_not_make(client: openai.OpenAI) -> None:
    items = first_pause(client)
    forged = copy.deepcopy(items[2])
    forged["call_id"] = "call_forged"
    forged.pop("id", None)
    items[3:3] = [forged]
    items.append({"type": "function_call_output", "call_id": "call_forged", "output": "9", "caller": forged["caller"]})
    assert "was not issued by program" in rejected(client, items).message


def test_duplicate_output(client: openai.OpenAI) -> None:
    items = first_pause(client)
    items.append(copy.deepcopy(items[3]))
    assert "appears more than once" in rejected(client, items).message


def test_modified_program_output(client: openai.OpenAI) -> None:
    items = first_pause(client)
    response = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    (call,) = response.output
    items += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "6", "caller": call.caller.model_dump()},
    ]
    done = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    program_output = next(i for i in done.output if i.type == "program_output")
    assert program_output.result == "6"
    items.append({**program_output.model_dump(), "result": "600"})
    items.append({"role": "user", "content": js("text('next')")})
    error = rejected(client, items)
    assert f"The program_output item with call_id {program_output.call_id} was modified" in error.message


def test_unknown_previous_response_id(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id="resp_unknown", input="hi", tools=PTC_TOOLS)
    error = caught.value
    assert error.message == "Error code: 400 - Previous response with id 'resp_unknown' not found."
    assert error.code == "previous_response_not_found"
    assert error.body["param"] == "previous_response_id"  # type: ignore[index]


@pytest.mark.parametrize("route", ["create", "input_tokens", "compact"])
def test_an_empty_previous_response_id_is_not_found(client: openai.OpenAI, route: str) -> None:
    """An empty id names no response: it is refused as any unknown id is, never taken for no id at
    all (a client that lost its id would otherwise start over, silently, with no history)."""
    calls = {
        "create": lambda: client.responses.create(model="m", previous_response_id="", input=PROGRAM, tools=PTC_TOOLS),
        "input_tokens": lambda: client.responses.input_tokens.count(model="m", previous_response_id="", input="hi"),
        "compact": lambda: client.responses.compact(model="m", previous_response_id="", input="hi"),
    }
    with pytest.raises(openai.BadRequestError) as caught:
        calls[route]()
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.message == "Error code: 400 - Previous response with id '' not found."
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_previous_response_id_of_a_store_false_response(client: openai.OpenAI) -> None:
    """store:false keeps nothing, so it cannot be continued by id (only by replaying items)."""
    response = client.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS, store=False)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id=response.id, input="hi", tools=PTC_TOOLS)
    assert caught.value.code == "previous_response_not_found"


def test_tools_changed_under_a_running_program(client: openai.OpenAI) -> None:
    items = first_pause(client)
    tools = [t for t in PTC_TOOLS if t.get("name") != "echo"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=items, tools=tools, store=False)
    assert "The tools a program may call changed while program" in caught.value.message
    assert caught.value.body["param"] == "tools"  # type: ignore[index]


def test_missing_reasoning_item_with_store_false(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "think first"},
            "turns": [
                {
                    "reasoning": "Add the numbers in a program.",
                    "program": "text(String(await tools.add({a: 2, b: 2})))",
                },
                {"message": "{{ result }}"},
            ],
        }
    )
    response = client.responses.create(model="m", input="think first", tools=PTC_TOOLS, store=False)
    reasoning, program, call = response.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    output = {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": "4",
        "caller": call.caller.model_dump(),
    }
    base = [{"role": "user", "content": "think first"}]
    whole = [*base, *(i.model_dump(exclude_none=True) for i in response.output), output]
    assert client.responses.create(model="m", input=whole, tools=PTC_TOOLS, store=False).output_text == "4"
    without = [*base, program.model_dump(exclude_none=True), call.model_dump(exclude_none=True), output]
    error = rejected(client, without)
    assert error.message == (
        f"Error code: 400 - Item '{program.id}' of type 'program' was provided without its required 'reasoning' "
        f"item: '{reasoning.id}'."
    )
    tampered = copy.deepcopy(whole)
    tampered[1]["encrypted_content"] = "x" + tampered[1]["encrypted_content"][1:]
    assert rejected(client, tampered).code == "invalid_encrypted_content"


def test_missing_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(input="hi")  # type: ignore[call-overload]
    assert caught.value.message == "Error code: 400 - Missing required parameter: 'model'."


@pytest.mark.ptc_strict(unmatched=False)  # its request is one nothing answers, on purpose
def test_no_scenario_and_no_code(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="What is the weather like?")
    assert caught.value.code == "no_scenario_matched"
    assert "no ```js code block" in caught.value.message


@pytest.mark.parametrize(
    ("body", "message", "code"),
    [
        (
            {"model": "m", "input": [{"type": "computer_call"}]},
            "Invalid value: 'computer_call'.",
            "invalid_value",
        ),
        ({"model": "m", "input": 5}, "Invalid type for 'input'", "invalid_type"),
        ({"model": "m", "input": "x", "temperature": "hot"}, "Invalid type for 'temperature'", "invalid_type"),
        ({"model": "m", "input": "x", "colour": "blue"}, "Unknown parameter: 'colour'.", "unknown_parameter"),
        (
            {"model": "m", "input": [{"type": "function_call_output", "output": "1", "call": "x"}]},
            "Unknown parameter: 'input[0].call'.",
            "unknown_parameter",
        ),
        (
            {"model": "m", "input": [{"type": "program", "id": "p", "code": "", "fingerprint": ""}]},
            "Missing required parameter: 'input[0].call_id'.",
            "missing_required_parameter",
        ),
        (
            {"model": "m", "input": "x", "tool_choice": {"type": "function", "name": "nope"}},
            "Tool choice 'function' with name 'nope' not found in 'tools' parameter.",
            None,
        ),
        (
            {"model": "m", "input": "x", "tool_choice": {"type": "programmatic_tool_calling"}},
            "Tool choice 'programmatic_tool_calling' not found in 'tools' parameter.",
            None,
        ),
        ({"model": "m", "input": "x", "include": ["everything"]}, "Invalid value: 'everything'.", "invalid_value"),
    ],
)
def test_request_validation_speaks_openai(
    ptc_emulator: PTCEmulator, body: dict[str, Any], message: str, code: str | None
) -> None:
    import httpx

    reply = httpx.post(f"{ptc_emulator.base_url}/responses", json=body, headers=ptc_emulator.headers)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message), error
    assert error["code"] == code


@pytest.mark.parametrize("model", ["m", None])
def test_a_saved_prompt_is_refused_as_shut_down(client: openai.OpenAI, ptc_emulator: PTCEmulator, model: Any) -> None:
    """openai 3.63: "OpenAI scheduled the shutdown of saved prompts for November 30, 2026": `prompt`
    is refused by name, with or without a model, never accepted and ignored."""
    import httpx

    body = {"prompt": {"id": "pmpt_123", "variables": {"city": "Oslo"}}, "input": js('text("hi")')}
    if model is not None:
        body["model"] = model
    reply = httpx.post(ptc_emulator.base_url + "/responses", json=body, headers={"Authorization": "Bearer sk-test"})
    assert (reply.status_code, reply.json()) == (
        400,
        {
            "error": {
                "message": "Saved prompts ('prompt') were shut down on November 30, 2026: put the prompt's text in "
                "'instructions' and 'input' instead (prompts in application code).",
                "type": "invalid_request_error",
                "param": "prompt",
                "code": "unsupported_parameter",
            }
        },
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", prompt={"id": "pmpt_123"})
    assert caught.value.body == reply.json()["error"]
