"""The tool rules, in-process on the fake runner: declarations the API does not have, grammars
that do not compile, the client-owned kinds' conversation rules, hosted tools and tool_choice
(the cases of tests/tools/test_rules.py, which plays them over a real server and V8)."""

from __future__ import annotations

import copy
import json
from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

from tests.support import js
from tests.tools.client_kinds_support import PROGRAMMATIC, PTC, answer, replay
from tests.unit.fake_runner import FakeProgram, FakeRunner

CUSTOM = {"type": "custom", "name": "shout", "allowed_callers": PROGRAMMATIC}
SHELL = {"type": "shell", "allowed_callers": PROGRAMMATIC}
PATCH = {"type": "apply_patch", "allowed_callers": PROGRAMMATIC}
TOOLS: list[dict[str, Any]] = [CUSTOM, SHELL, PATCH, PTC]
BOTH = 'const [a, b] = await Promise.all([tools.shout("hi"), tools.shell({commands: ["ls"]})]);\ntext(a, b.length);'
REGEX = {"type": "grammar", "syntax": "regex", "definition": "[a-z]+ [0-9]{1,3}"}


def _shout_and_count(outputs: list[str]) -> str:
    shouted, shell = (json.loads(o) for o in outputs)
    return f"{shouted} {len(shell)}"


@pytest.fixture(autouse=True)
def _programs(fake_runner: FakeRunner) -> None:
    fake_runner.define(
        BOTH, FakeProgram(batches=[[("shout", "hi"), ("shell", {"commands": ["ls"]})]], finish=_shout_and_count)
    )
    fake_runner.define(
        'await tools.web_search({query: "x"});', FakeProgram(batches=[[("web_search", {"query": "x"})]], finish=str)
    )
    for text in ("abc 12", "abc 1234", "abc"):
        fake_runner.define(
            f"await tools.calc({json.dumps(text)});", FakeProgram(batches=[[("calc", text)]], finish=str)
        )


def handler(item: Any) -> dict[str, Any]:
    if item.type == "custom_tool_call":
        return {"output": item.input.upper()}
    if item.type == "shell_call":
        return {"output": [{"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}
    return {"status": "completed"}


def paused(sdk: openai.OpenAI) -> list[dict[str, Any]]:
    """A store:false conversation paused on a custom and a shell call, with both answers."""
    items: list[dict[str, Any]] = [{"role": "user", "content": js(BOTH)}]
    response = sdk.responses.create(model="m", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
    return items + replay(response) + answer(response, handler)


def rejected(sdk: openai.OpenAI, items: list[dict[str, Any]], tools: Any = TOOLS) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model="m", input=items, tools=tools, store=False)  # type: ignore[arg-type]
    return caught.value


# ---- declarations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search", "allowed_callers": PROGRAMMATIC}, "tools[0].allowed_callers"),
        ({"type": "local_shell", "allowed_callers": PROGRAMMATIC}, "tools[0].allowed_callers"),
        ({"type": "file_search", "vector_store_ids": [], "colour": "red"}, "tools[0].colour"),
        ({"type": "custom", "name": "x", "parameters": {}}, "tools[0].parameters"),
        ({"type": "shell", "environment": {"type": "local", "cwd": "/"}}, "tools[0].environment.cwd"),
    ],
    ids=["web_search-callers", "local_shell-callers", "file_search-field", "custom-parameters", "shell-cwd"],
)
def test_a_field_the_tool_does_not_have_is_refused(unit_sdk: openai.OpenAI, tool: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="hi", tools=[tool])  # type: ignore[list-item]
    assert caught.value.code == "unknown_parameter"
    assert caught.value.message == f"Error code: 400 - Unknown parameter: '{param}'."
    assert caught.value.param == param


@pytest.mark.parametrize(
    "fmt",
    [
        {"type": "grammar", "syntax": "regex", "definition": "(unclosed"},
        {"type": "grammar", "syntax": "regex", "definition": "(a)\\1"},  # a backreference: not linear time
        {"type": "grammar", "syntax": "lark", "definition": "start: undefined_rule"},
    ],
    ids=["regex-unclosed", "regex-backreference", "lark-undefined-rule"],
)
def test_a_grammar_that_does_not_compile_is_refused(unit_sdk: openai.OpenAI, fmt: dict[str, Any]) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="hi", tools=[{"type": "custom", "name": "g", "format": fmt}])  # type: ignore[list-item]
    assert caught.value.param == "tools[0].format.definition"
    assert f"Invalid {fmt['syntax']} grammar for custom tool 'g'" in caught.value.message


# ---- the client-owned kinds' conversation rules ---------------------------------------------------


def test_the_paused_conversation_resumes(unit_sdk: openai.OpenAI) -> None:
    response = unit_sdk.responses.create(model="m", input=paused(unit_sdk), tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert response.output_text == "HI 1"


@pytest.mark.parametrize(
    ("dropped", "message"),
    [
        ("custom_tool_call_output", "No tool output found for custom tool call {call_id}."),
        ("shell_call_output", "No tool output found for shell call {call_id}."),
    ],
)
def test_a_missing_output_is_refused(unit_sdk: openai.OpenAI, dropped: str, message: str) -> None:
    items = paused(unit_sdk)
    call = next(i for i in items if i.get("type") == dropped.removesuffix("_output"))
    error = rejected(unit_sdk, [i for i in items if i.get("type") != dropped])
    assert error.message.endswith(message.format(call_id=call["call_id"]))


def test_an_orphan_output_is_refused(unit_sdk: openai.OpenAI) -> None:
    orphan = {"type": "apply_patch_call_output", "call_id": "call_nobody", "status": "completed"}
    error = rejected(unit_sdk, [*paused(unit_sdk), orphan])
    assert "No tool call found for apply_patch call output with call_id call_nobody." in error.message


def test_an_answer_of_the_wrong_kind_is_refused(unit_sdk: openai.OpenAI) -> None:
    items = paused(unit_sdk)
    answered = next(i for i in items if i.get("type") == "custom_tool_call_output")
    wrong = {
        "type": "function_call_output",
        "call_id": answered["call_id"],
        "output": "HI",
        "caller": answered["caller"],
    }
    error = rejected(unit_sdk, [wrong if i is answered else i for i in items])
    assert "answers a custom_tool_call: answer it with a custom_tool_call_output" in error.message


@pytest.mark.parametrize("kind", ["custom_tool_call_output", "shell_call_output"])
def test_the_caller_must_come_back_unchanged(unit_sdk: openai.OpenAI, kind: str) -> None:
    items = paused(unit_sdk)
    for item in items:
        if item.get("type") == kind:
            item["caller"] = None
    error = rejected(unit_sdk, items)
    assert f"The {kind} for call_id" in error.message and "must carry the caller" in error.message
    assert error.param is not None and error.param.endswith(".caller")


@pytest.mark.parametrize("what", ["custom-input", "shell-commands"])
def test_a_modified_call_is_a_divergence(unit_sdk: openai.OpenAI, what: str) -> None:
    items = copy.deepcopy(paused(unit_sdk))
    if what == "custom-input":
        next(i for i in items if i.get("type") == "custom_tool_call")["input"] = "bye"
    else:
        next(i for i in items if i.get("type") == "shell_call")["action"]["commands"] = ["rm -rf /"]
    assert rejected(unit_sdk, items).code == "program_divergence"


def test_a_forged_shell_call_was_not_issued_by_the_program(unit_sdk: openai.OpenAI) -> None:
    forged = copy.deepcopy(paused(unit_sdk))
    next(i for i in forged if i.get("type") == "shell_call")["call_id"] = "call_forged"
    next(i for i in forged if i.get("type") == "shell_call_output")["call_id"] = "call_forged"
    assert "was not issued by program" in rejected(unit_sdk, forged).message


# ---- hosted tools -------------------------------------------------------------------------------


def test_a_program_calling_a_hosted_tool_fails_naming_it(unit_sdk: openai.OpenAI) -> None:
    tools = [{"type": "web_search"}, {"type": "image_generation"}, PTC]
    response = unit_sdk.responses.create(model="m", input=js('await tools.web_search({query: "x"});'), tools=tools)  # type: ignore[arg-type]
    assert [t.type for t in response.tools] == ["web_search", "image_generation", "programmatic_tool_calling"]
    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    assert (
        output.result
        == "tools.web_search() calls the 'web_search' tool, a hosted tool that this emulator does not run."
    )


def test_a_scenario_calling_a_hosted_tool_fails_naming_it(unit_sdk: openai.OpenAI, unit_http: TestClient) -> None:
    scenario = {"name": "unit__search", "match": {"input": "search"}, "turns": [{"call": {"name": "web_search"}}]}
    assert unit_http.post("/_emulator/scenarios", json=scenario).status_code == 201
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="search the web", tools=[{"type": "web_search"}])
    assert caught.value.code == "scenario_error"
    assert "calls 'web_search', a hosted tool that this emulator does not run" in caught.value.message


# ---- custom input formats -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "warned"), [("abc 12", False), ("abc 1234", True)])
def test_custom_input_is_checked_against_its_format(unit_sdk: openai.OpenAI, text: str, warned: bool) -> None:
    tools = [{"type": "custom", "name": "calc", "format": REGEX, "allowed_callers": PROGRAMMATIC}, PTC]
    raw = unit_sdk.responses.with_raw_response.create(
        model="m", input=js(f"await tools.calc({json.dumps(text)});"), tools=tools
    )  # type: ignore[arg-type]
    warning = raw.headers.get("x-ptc-emulator-contract-warning")
    assert (warning is not None) == warned
    if warned:
        assert "does not match the format of 'calc'" in warning  # type: ignore[operator]
    assert raw.parse().output[1].type == "custom_tool_call"  # reported, not refused


def test_strict_mode_refuses_input_outside_the_format(unit_sdk: openai.OpenAI, unit_http: TestClient) -> None:
    scenario = {
        "name": "unit__strict_calc",
        "strict_contract": True,
        "match": {"input": "calc"},
        "turns": [{"program": 'await tools.calc("abc");'}, {"message": "done"}],
    }
    assert unit_http.post("/_emulator/scenarios", json=scenario).status_code == 201
    tools = [{"type": "custom", "name": "calc", "format": REGEX, "allowed_callers": PROGRAMMATIC}, PTC]
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="calc", tools=tools)  # type: ignore[arg-type]
    assert caught.value.code == "contract_violation"
    assert "The input of custom tool call" in caught.value.message
    assert "does not match the regex /[a-z]+ [0-9]{1,3}/" in caught.value.message


# ---- tool_choice against a scenario ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "reason"),
    [
        ("none", "tool_choice is 'none', but turn 1 calls 'shout'"),
        ({"type": "shell"}, "tool_choice is the shell tool, but turn 1 calls 'shout'"),
        ({"type": "programmatic_tool_calling"}, "tool_choice is programmatic_tool_calling, but turn 1 calls 'shout'"),
    ],
    ids=["none", "shell", "programmatic"],
)
def test_a_scenario_that_contradicts_tool_choice_does_not_match(
    unit_sdk: openai.OpenAI, unit_http: TestClient, choice: Any, reason: str
) -> None:
    scenario = {
        "name": "unit__shout",
        "match": {"input": "shout"},
        "turns": [{"call": {"name": "shout", "input": "hey"}}],
    }
    assert unit_http.post("/_emulator/scenarios", json=scenario).status_code in (200, 201)
    tools = [{"type": "custom", "name": "shout"}, {"type": "shell"}, PTC]
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="shout it", tools=tools, tool_choice=choice)  # type: ignore[arg-type]
    assert caught.value.code == "no_scenario_matched"
    assert f"'unit__shout' (tool_choice): {reason}" in caught.value.message
    for fine in ("required", "auto", {"type": "custom", "name": "shout"}):
        response = unit_sdk.responses.create(model="m", input="shout it", tools=tools, tool_choice=fine)  # type: ignore[arg-type]
        assert response.output[0].type == "custom_tool_call"
