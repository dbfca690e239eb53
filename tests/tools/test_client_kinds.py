"""Client-owned tool kinds through openai 3.51: a program calls a custom tool, the local shell and
apply_patch; the client answers each call item; the program receives the answer; the run ends with
the program's result in the final message. Every body is validated with the SDK's models (the
client's response hook), every output item with the output-item union."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js
from tests.tools.client_kinds_support import PROGRAMMATIC, PTC, answer, listed_item, run_to_end

pytestmark = pytest.mark.sdk  # each client-owned kind's items, as the official client reads and answers them

CUSTOM = {"type": "custom", "name": "shout", "description": "Upper-cases text.", "allowed_callers": PROGRAMMATIC}
SHELL = {"type": "shell", "environment": {"type": "local"}, "allowed_callers": PROGRAMMATIC}
PATCH = {"type": "apply_patch", "allowed_callers": PROGRAMMATIC}


def client_side(item: Any) -> dict[str, Any]:
    """What a client does with each call item: the answer's own fields."""
    if item.type == "custom_tool_call":
        return {"output": item.input.upper()}
    if item.type == "shell_call":
        return {
            "output": [
                {"stdout": f"ran {command}\n", "stderr": "", "outcome": {"type": "exit", "exit_code": n}}
                for n, command in enumerate(item.action.commands)
            ],
            "max_output_length": item.action.max_output_length,
        }
    if item.type == "apply_patch_call":
        if item.operation.type == "delete_file":
            return {"status": "failed", "output": f"{item.operation.path}: no such file"}
        return {"status": "completed", "output": f"wrote {item.operation.path}"}
    raise AssertionError(item.type)


@pytest.mark.parametrize("store", [True, False])
def test_program_calls_a_custom_tool(client: openai.OpenAI, store: bool) -> None:
    code = 'const a = await tools.shout("hello");\nconst b = await tools.shout("42");\ntext(a, typeof b, b);'
    final, seen = run_to_end(client, js(code), [CUSTOM, PTC], client_side, store=store)
    first = seen[0].output
    assert [i.type for i in first] == ["program", "custom_tool_call"]
    call = first[1]
    assert call.name == "shout" and call.input == "hello"
    assert call.caller is not None and call.caller.type == "program" and call.caller.caller_id == first[0].call_id
    assert [i.type for i in final.output] == ["program_output", "message"]
    # The program gets the output string as it is, even when it reads as JSON.
    assert final.output[0].result == "HELLO string 42"
    assert final.output_text == "HELLO string 42"


@pytest.mark.parametrize("store", [True, False])
def test_program_runs_shell_commands(client: openai.OpenAI, store: bool) -> None:
    code = (
        'const out = await tools.shell({commands: ["ls", "pwd"], timeout_ms: 1000, max_output_length: 200});\n'
        "text(JSON.stringify(out));"
    )
    final, seen = run_to_end(client, js(code), [SHELL, PTC], client_side, store=store)
    call = seen[0].output[1]
    assert call.type == "shell_call"
    assert call.action.commands == ["ls", "pwd"] and call.action.timeout_ms == 1000
    assert call.action.max_output_length == 200
    assert call.environment is not None and call.environment.type == "local"
    assert call.status == "completed" and call.caller is not None and call.caller.type == "program"
    assert json.loads(final.output_text) == [
        {"stdout": "ran ls\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
        {"stdout": "ran pwd\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 1}},
    ]


@pytest.mark.parametrize("store", [True, False])
def test_program_applies_patches_and_catches_a_failed_one(client: openai.OpenAI, store: bool) -> None:
    code = """
const made = await tools.apply_patch({type: "create_file", path: "notes.md", diff: "+hello\\n"});
let error = null;
try {
  await tools.apply_patch({type: "delete_file", path: "gone.md"});
} catch (e) {
  error = e instanceof Error ? e.message : "not an Error";
}
text(JSON.stringify({made, error}));
"""
    final, seen = run_to_end(client, js(code), [PATCH, PTC], client_side, store=store)
    create = seen[0].output[1]
    assert create.type == "apply_patch_call" and create.status == "completed"
    assert create.operation.type == "create_file" and create.operation.path == "notes.md"
    assert create.operation.diff == "+hello\n"
    delete = seen[1].output[0]
    assert delete.type == "apply_patch_call" and delete.operation.type == "delete_file"
    assert json.loads(final.output_text) == {
        "made": {"status": "completed", "output": "wrote notes.md"},
        "error": "gone.md: no such file",
    }


def test_one_program_calls_every_client_kind_at_once(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    code = """
const [a, sh, p] = await Promise.all([
  tools.shout("x"),
  tools.shell({commands: ["true"]}),
  tools.apply_patch({type: "update_file", path: "a", diff: "-a\\n+b\\n"}),
]);
text(a, sh[0].stdout.trim(), p.status);
"""
    final, seen = run_to_end(client, js(code), [CUSTOM, SHELL, PATCH, PTC], client_side)
    assert [i.type for i in seen[0].output] == ["program", "custom_tool_call", "shell_call", "apply_patch_call"]
    assert final.output_text == "X ran true completed"
    # The stored conversation lists every new item type, each valid as the SDK's ResponseItem.
    listed = client.responses.input_items.list(seen[1].id, order="asc").data
    assert [i.type for i in listed] == ["custom_tool_call_output", "shell_call_output", "apply_patch_call_output"]
    for item in listed:
        listed_item().validate_python(item.model_dump())
    figures = [e["figures"] for e in ptc_emulator.journal]
    assert figures[0]["tool_calls"] == {
        "custom": {"direct": 0, "program": 1},
        "shell": {"direct": 0, "program": 1},
        "apply_patch": {"direct": 0, "program": 1},
    }
    assert figures[0]["program_tool_calls"] == 3 and figures[1]["program_tool_calls"] == 0


def test_bad_arguments_reject_the_call_inside_the_program(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    code = """
const errors = [];
for (const args of [{commands: "ls"}, {commands: ["ls"], cwd: "/"}]) {
  try { await tools.shell(args); } catch (e) { errors.push(e.message); }
}
try { await tools.apply_patch({type: "create_file", path: "a"}); } catch (e) { errors.push(e.message); }
try { await tools.shout(42); } catch (e) { errors.push(e.constructor.name + ": " + e.message); }
text(JSON.stringify(errors));
"""
    response = client.responses.create(model="m", input=js(code), tools=[CUSTOM, SHELL, PATCH, PTC])
    assert [i.type for i in response.output] == ["program", "program_output", "message"]
    errors = json.loads(response.output_text)
    assert errors[0].startswith("tools.shell() takes {commands: string[], timeout_ms?, max_output_length?}")
    assert "'commands'" in errors[0]
    assert "unknown field 'cwd'" in errors[1]
    assert "missing required field 'create_file.diff'" in errors[2]
    assert errors[3] == "TypeError: tools.shout() takes one argument: a string"
    assert ptc_emulator.journal[0]["figures"]["tool_calls"] == {
        "shell": {"direct": 0, "program": 2},
        "apply_patch": {"direct": 0, "program": 1},
    }


def test_a_refused_call_waits_behind_an_unanswered_one(client: openai.OpenAI) -> None:
    """Answers are journalled in issue order: a call the server refuses after one the client has not
    answered yet is settled on the next request, with the same result."""
    code = """
const [a, b] = await Promise.allSettled([tools.shout("one"), tools.shell({commands: 7})]);
text(a.value, b.status, b.reason.message.slice(0, 12));
"""
    final, seen = run_to_end(client, js(code), [CUSTOM, SHELL, PTC], client_side, store=False)
    assert [i.type for i in seen[0].output] == ["program", "custom_tool_call"]
    assert final.output_text == "ONE rejected tools.shell("


MESSAGE = "{{ outputs.shout }} / {{ outputs.shell[0].stdout | trim }} / {{ outputs.apply_patch.status }}"


def test_scenario_makes_direct_calls_of_each_kind(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "tools__direct",
            "match": {"input": "(?i)tidy (?P<file>\\S+)", "tools": ["shout", "shell", "apply_patch"]},
            "turns": [
                {
                    "call": [
                        {"name": "shout", "input": "tidy {{ file }}"},
                        {"name": "shell", "arguments": {"commands": ["cat {{ file }}"]}},
                        {
                            "name": "apply_patch",
                            "arguments": {"type": "update_file", "path": "{{ file }}", "diff": "x"},
                        },
                    ]
                },
                {"message": MESSAGE},
            ],
        }
    )
    tools = [
        {"type": "custom", "name": "shout"},
        {"type": "shell"},
        {"type": "apply_patch"},
    ]
    first = client.responses.create(model="m", input="Please tidy a.txt", tools=tools)  # type: ignore[arg-type]
    assert [i.type for i in first.output] == ["custom_tool_call", "shell_call", "apply_patch_call"]
    assert all(i.caller is None for i in first.output)  # direct calls carry no caller
    assert first.output[0].input == "tidy a.txt"
    assert first.output[1].action.commands == ["cat a.txt"]
    second = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=answer(first, client_side),  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
    )
    assert second.output_text == "TIDY A.TXT / ran cat a.txt / completed"
    figures = ptc_emulator.journal[0]["figures"]
    assert figures["direct_tool_calls"] == 3 and figures["program_tool_calls"] == 0


def test_scenario_makes_a_direct_local_shell_call(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "tools__local_shell",
            "match": {"input": "uptime", "tools": ["local_shell"]},
            "turns": [
                {"call": {"name": "local_shell", "arguments": {"command": ["uptime"], "env": {}}}},
                {"message": "{{ output }}"},
            ],
        }
    )
    tools = [{"type": "local_shell"}]
    first = client.responses.create(model="m", input="uptime please", tools=tools)  # type: ignore[arg-type]
    call = first.output[0]
    assert call.type == "local_shell_call" and call.action.command == ["uptime"]
    # The Agents SDK answers by call_id; the SDK's param type names the call by id: both work.
    for key in ("call_id", "id"):
        answer_item = {"type": "local_shell_call_output", key: getattr(call, key), "output": "up 3 days"}
        done = client.responses.create(model="m", previous_response_id=first.id, input=[answer_item], tools=tools)  # type: ignore[arg-type, list-item]
        assert done.output_text == "up 3 days"
