"""The conversation rules, contract checks and refusals for the client-owned tool kinds: as strict
as for function calls, and nothing accepted that then does nothing."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js
from tests.tools.client_kinds_support import PROGRAMMATIC, PTC, answer, replay

CUSTOM = {"type": "custom", "name": "shout", "allowed_callers": PROGRAMMATIC}
SHELL = {"type": "shell", "allowed_callers": PROGRAMMATIC}
PATCH = {"type": "apply_patch", "allowed_callers": PROGRAMMATIC}
TOOLS: list[dict[str, Any]] = [CUSTOM, SHELL, PATCH, PTC]
STREAM_EVENT = TypeAdapter[Any](ResponseStreamEvent)
BOTH = 'const [a, b] = await Promise.all([tools.shout("hi"), tools.shell({commands: ["ls"]})]);\ntext(a, b.length);'


def handler(item: Any) -> dict[str, Any]:
    if item.type == "custom_tool_call":
        return {"output": item.input.upper()}
    if item.type == "shell_call":
        return {"output": [{"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}
    return {"status": "completed"}


def paused(client: openai.OpenAI) -> list[dict[str, Any]]:
    """A store:false conversation paused on a custom and a shell call, with both answers."""
    items: list[dict[str, Any]] = [{"role": "user", "content": js(BOTH)}]
    response = client.responses.create(model="m", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
    return items + replay(response) + answer(response, handler)


def rejected(client: openai.OpenAI, items: list[dict[str, Any]], tools: Any = TOOLS) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=items, tools=tools, store=False)  # type: ignore[arg-type]
    return caught.value


def test_the_paused_conversation_resumes(client: openai.OpenAI) -> None:
    response = client.responses.create(model="m", input=paused(client), tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert response.output_text == "HI 1"


def test_a_missing_output_is_refused(client: openai.OpenAI) -> None:
    items = paused(client)
    custom_call = items[2]
    error = rejected(client, [i for i in items if i.get("type") != "custom_tool_call_output"])
    assert error.message.endswith(f"No tool output found for custom tool call {custom_call['call_id']}.")
    error = rejected(client, [i for i in items if i.get("type") != "shell_call_output"])
    assert "No tool output found for shell call" in error.message


def test_an_orphan_output_is_refused(client: openai.OpenAI) -> None:
    items = paused(client)
    orphan = {"type": "apply_patch_call_output", "call_id": "call_nobody", "status": "completed"}
    error = rejected(client, [*items, orphan])
    assert "No tool call found for apply_patch call output with call_id call_nobody." in error.message


def test_an_answer_of_the_wrong_kind_is_refused(client: openai.OpenAI) -> None:
    items = paused(client)
    answered = next(i for i in items if i.get("type") == "custom_tool_call_output")
    wrong = {
        "type": "function_call_output",
        "call_id": answered["call_id"],
        "output": "HI",
        "caller": answered["caller"],
    }
    error = rejected(client, [wrong if i is answered else i for i in items])
    assert "answers a custom_tool_call: answer it with a custom_tool_call_output" in error.message


@pytest.mark.parametrize("kind", ["custom_tool_call_output", "shell_call_output"])
def test_the_caller_must_come_back_unchanged(client: openai.OpenAI, kind: str) -> None:
    items = paused(client)
    for item in items:
        if item.get("type") == kind:
            item["caller"] = None
    error = rejected(client, items)
    assert f"The {kind} for call_id" in error.message and "must carry the caller" in error.message
    assert error.param is not None and error.param.endswith(".caller")


def test_a_modified_call_is_refused(client: openai.OpenAI) -> None:
    items = paused(client)
    tampered = copy.deepcopy(items)
    next(i for i in tampered if i.get("type") == "custom_tool_call")["input"] = "bye"
    assert rejected(client, tampered).code == "program_divergence"
    tampered = copy.deepcopy(items)
    next(i for i in tampered if i.get("type") == "shell_call")["action"]["commands"] = ["rm -rf /"]
    assert rejected(client, tampered).code == "program_divergence"
    forged = copy.deepcopy(items)
    next(i for i in forged if i.get("type") == "shell_call")["call_id"] = "call_forged"
    next(i for i in forged if i.get("type") == "shell_call_output")["call_id"] = "call_forged"
    assert "was not issued by program" in rejected(client, forged).message


def test_a_program_cannot_call_a_tool_it_was_not_given(client: openai.OpenAI) -> None:
    direct_only = [{"type": "custom", "name": "shout"}, PTC]
    response = client.responses.create(model="m", input=js('await tools.shout("x");'), tools=direct_only)  # type: ignore[arg-type]
    assert response.output[1].type == "program_output" and response.output[1].status == "incomplete"


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search", "allowed_callers": PROGRAMMATIC}, "tools[0].allowed_callers"),
        ({"type": "local_shell", "allowed_callers": PROGRAMMATIC}, "tools[0].allowed_callers"),
        ({"type": "file_search", "vector_store_ids": [], "colour": "red"}, "tools[0].colour"),
        ({"type": "custom", "name": "x", "parameters": {}}, "tools[0].parameters"),
        ({"type": "shell", "environment": {"type": "local", "cwd": "/"}}, "tools[0].environment.cwd"),
    ],
)
def test_a_field_the_tool_does_not_have_is_refused(client: openai.OpenAI, tool: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", tools=[tool])  # type: ignore[list-item]
    assert caught.value.code == "unknown_parameter"
    assert caught.value.message == f"Error code: 400 - Unknown parameter: '{param}'."


def test_a_tool_type_outside_the_api_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", tools=[{"type": "teleport"}])  # type: ignore[list-item]
    assert caught.value.code == "invalid_value" and "'teleport'" in caught.value.message


def test_hosted_tools_are_echoed_but_a_program_calling_one_fails_naming_it(client: openai.OpenAI) -> None:
    tools = [{"type": "web_search"}, {"type": "image_generation"}, PTC]
    response = client.responses.create(
        model="m",
        input=js('text("before");\nawait tools.web_search({query: "x"});\ntext("after");'),
        tools=tools,  # type: ignore[arg-type]
    )
    assert [t.type for t in response.tools] == ["web_search", "image_generation", "programmatic_tool_calling"]
    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    assert output.result == (
        "before\ntools.web_search() calls the 'web_search' tool, a hosted tool that this emulator does not run."
    )
    # Even a program that catches the failure cannot go on past it.
    caught = client.responses.create(
        model="m",
        input=js('try { await tools.image_generation({}); } catch (e) { text("caught"); }'),
        tools=tools,  # type: ignore[arg-type]
    )
    assert caught.output[1].status == "incomplete"  # type: ignore[union-attr]
    assert "'image_generation' tool" in caught.output[1].result  # type: ignore[union-attr]


def test_a_scenario_calling_a_hosted_tool_fails_naming_it(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"name": "tools__search", "match": {"input": "search"}, "turns": [{"call": {"name": "web_search"}}]}
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="search the web", tools=[{"type": "web_search"}])
    assert caught.value.code == "scenario_error"
    assert "calls 'web_search', a hosted tool that this emulator does not run" in caught.value.message


# ---- custom tool formats ----------------------------------------------------------------------

REGEX = {"type": "grammar", "syntax": "regex", "definition": "[a-z]+ [0-9]{1,3}"}
LARK = {
    "type": "grammar",
    "syntax": "lark",
    "definition": 'start: expr\nexpr: NUMBER ("+" NUMBER)*\n%import common.NUMBER\n%ignore " "',
}


@pytest.mark.parametrize(("fmt", "good", "bad"), [(REGEX, "abc 12", "abc 1234"), (LARK, "1 + 2", "1 + + 2")])
def test_custom_input_is_checked_against_its_format(
    ptc_emulator: PTCEmulator, fmt: dict[str, Any], good: str, bad: str
) -> None:
    tools = [{"type": "custom", "name": "calc", "format": fmt, "allowed_callers": PROGRAMMATIC}, PTC]
    http = ptc_emulator.client(max_retries=0).responses.with_raw_response
    ok = http.create(model="m", input=js(f"await tools.calc({json.dumps(good)});"), tools=tools)  # type: ignore[arg-type]
    assert "x-ptc-emulator-contract-warning" not in ok.headers
    warned = http.create(model="m", input=js(f"await tools.calc({json.dumps(bad)});"), tools=tools)  # type: ignore[arg-type]
    warning = warned.headers["x-ptc-emulator-contract-warning"]
    assert "does not match the format of 'calc'" in warning
    assert warned.parse().output[1].type == "custom_tool_call"  # reported, not refused
    entry = ptc_emulator.journal[-1]
    assert [(v["kind"], v["tool"]) for v in entry["contract"]] == [("input", "calc")]


def test_strict_mode_refuses_input_outside_the_format(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "tools__strict_calc",
            "strict_contract": True,
            "match": {"input": "calc"},
            "turns": [{"program": 'await tools.calc("abc");'}, {"message": "done"}],
        }
    )
    tools = [{"type": "custom", "name": "calc", "format": REGEX, "allowed_callers": PROGRAMMATIC}, PTC]
    with pytest.raises(openai.BadRequestError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(model="m", input="calc", tools=tools)  # type: ignore[arg-type]
    assert caught.value.code == "contract_violation"
    assert "The input of custom tool call" in caught.value.message
    assert "does not match the regex /[a-z]+ [0-9]{1,3}/" in caught.value.message


@pytest.mark.parametrize(
    "fmt",
    [
        {"type": "grammar", "syntax": "regex", "definition": "(unclosed"},
        {"type": "grammar", "syntax": "regex", "definition": "(a)\\1"},  # a backreference: not linear time
        {"type": "grammar", "syntax": "lark", "definition": "start: undefined_rule"},
    ],
)
def test_a_grammar_that_does_not_compile_is_refused(client: openai.OpenAI, fmt: dict[str, Any]) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", tools=[{"type": "custom", "name": "g", "format": fmt}])  # type: ignore[list-item]
    assert caught.value.param == "tools[0].format.definition"
    assert f"Invalid {fmt['syntax']} grammar for custom tool 'g'" in caught.value.message


@pytest.mark.parametrize("route", ["create", "input_tokens"])
def test_a_lark_grammar_is_compiled_off_the_event_loop(
    client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """Compiling a lark grammar is pure Python that grows faster than its text (a 32 KB grammar of
    3,000 alternatives held every other client 0.8-1.8 s): a request declaring one is checked in a
    worker thread. Each compile notes whether its thread ran the event loop (it did, before)."""
    import lark

    on_loop: list[bool] = []

    class Noted(lark.Lark):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            on_loop.append(asyncio._get_running_loop() is not None)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(lark, "Lark", Noted)
    fresh = uuid.uuid4().hex  # a grammar no earlier request compiled (they are kept compiled)
    grammar = {"type": "grammar", "syntax": "lark", "definition": f'start: "{fresh}"'}
    tool = {"type": "custom", "name": "g", "format": grammar}
    if route == "create":
        response = client.responses.create(model="m", input=js("text(1);"), tools=[tool, PTC])  # type: ignore[list-item]
        assert response.output_text == "1"
    else:
        assert client.responses.input_tokens.count(model="m", input="hi", tools=[tool]).input_tokens > 0  # type: ignore[list-item]
    assert on_loop == [False]


# ---- tool_choice ------------------------------------------------------------------------------


@pytest.mark.ptc_strict(unmatched=False)  # the refused program is a 400 no_scenario_matched, on purpose
def test_tool_choice_none_refuses_an_inline_program(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=js("text(1);"), tools=TOOLS, tool_choice="none")  # type: ignore[arg-type]
    assert caught.value.code == "no_scenario_matched"
    assert "has a ```js code block, but the ```js block cannot run: tool_choice is 'none'" in caught.value.message
    ok = client.responses.create(
        model="m",
        input=js("text(1);"),
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "programmatic_tool_calling"},
    )
    assert ok.output_text == "1"


@pytest.mark.ptc_strict(unmatched=False)  # the contradicted scenario is a near miss, on purpose
@pytest.mark.parametrize(
    ("choice", "reason"),
    [
        ("none", "tool_choice is 'none', but turn 1 calls 'shout'"),
        ({"type": "shell"}, "tool_choice is the shell tool, but turn 1 calls 'shout'"),
        ({"type": "programmatic_tool_calling"}, "tool_choice is programmatic_tool_calling, but turn 1 calls 'shout'"),
    ],
)
def test_a_scenario_that_contradicts_tool_choice_does_not_match(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, choice: Any, reason: str
) -> None:
    ptc_emulator.add_scenario(
        {"name": "tools__shout", "match": {"input": "shout"}, "turns": [{"call": {"name": "shout", "input": "hey"}}]}
    )
    tools = [{"type": "custom", "name": "shout"}, {"type": "shell"}, PTC]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="shout it", tools=tools, tool_choice=choice)  # type: ignore[arg-type]
    assert caught.value.code == "no_scenario_matched"
    assert f"'tools__shout' (tool_choice): {reason}" in caught.value.message
    near = ptc_emulator.journal[-1]["near_miss"]["near_misses"][0]
    assert near == {"scenario": "tools__shout", "field": "tool_choice", "reason": reason}
    for fine in ("required", "auto", {"type": "custom", "name": "shout"}):
        response = client.responses.create(model="m", input="shout it", tools=tools, tool_choice=fine)  # type: ignore[arg-type]
        assert response.output[0].type == "custom_tool_call"


def test_tool_choice_must_name_a_declared_tool(client: openai.OpenAI) -> None:
    for choice, message in [
        ({"type": "custom", "name": "nope"}, "Tool choice 'custom' with name 'nope' not found in 'tools' parameter."),
        ({"type": "apply_patch"}, "Tool choice 'apply_patch' not found in 'tools' parameter."),
    ]:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input="hi", tools=[CUSTOM], tool_choice=choice)  # type: ignore[arg-type, list-item]
        assert caught.value.message == f"Error code: 400 - {message}"


# ---- streaming --------------------------------------------------------------------------------


def test_new_items_stream_with_the_sdk_events(client: openai.OpenAI) -> None:
    code = 'await Promise.all([tools.shout("a long input text"), tools.shell({commands: ["ls -la", "pwd"]})]);'
    with client.responses.stream(model="m", input=js(code), tools=TOOLS) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_response()
    for event in events:
        STREAM_EVENT.validate_python(event.model_dump())
    kinds = [e.type for e in events]
    assert "response.custom_tool_call_input.delta" in kinds
    done = next(e for e in events if e.type == "response.custom_tool_call_input.done")
    assert done.input == "a long input text"  # type: ignore[union-attr]
    commands = [e.command for e in events if e.type == "response.shell_call_command.done"]  # type: ignore[union-attr]
    assert commands == ["ls -la", "pwd"]
    added = next(e for e in events if e.type == "response.output_item.added" and e.item.type == "shell_call")
    assert added.item.status == "in_progress"  # type: ignore[union-attr]
    assert [i.type for i in final.output] == ["program", "custom_tool_call", "shell_call"]
    assert final.output[2].action.commands == ["ls -la", "pwd"]  # type: ignore[union-attr]
