"""The tool-kind registry (emulator/tools/kinds.py) is the one place that says what each kind is:
its program name, its call and output items, how `input_items.list` shows them, the stub steering
lists for a call, what the model reads of them (usage) and the text of an answer. History,
steering and usage read it; these tests hold each of those to the registry and to what they said
before it existed. No V8, no server."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import pytest
from pydantic import TypeAdapter

from ptc_emulator.api.routes.steering import required_input
from ptc_emulator.emulator.history.stored import as_input, as_response_item
from ptc_emulator.emulator.responses.usage import item_text, model_text
from ptc_emulator.emulator.tools.kinds import (
    APPLY_PATCH,
    CODE_INTERPRETER,
    CUSTOM,
    FUNCTION,
    HOSTED_SHELL,
    ITEMS,
    KINDS,
    LOCAL_SHELL,
    MCP,
    REGISTRY,
    SHELL,
    TOOL_SEARCH,
    Binding,
    answer_key,
    answer_text,
    bind,
    kind_of_call,
    kind_of_output,
)
from ptc_emulator.emulator.wire.items import CALL_TYPES, OUTPUT_TYPES, InputItem, Item, OutputItem, dump
from ptc_emulator.emulator.wire.request import CreateRequest

_INPUT = TypeAdapter[Any](InputItem)

CALLS: dict[str, dict[str, Any]] = {
    "function_call": {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1}'},
    "custom_tool_call": {"type": "custom_tool_call", "call_id": "c2", "name": "shout", "input": "hi"},
    "shell_call": {"type": "shell_call", "call_id": "c3", "action": {"commands": ["ls", "pwd"]}},
    "apply_patch_call": {
        "type": "apply_patch_call",
        "call_id": "c4",
        "operation": {"type": "delete_file", "path": "a.txt"},
        "status": "completed",
    },
    "local_shell_call": {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "c5",
        "action": {"type": "exec", "command": ["echo", "x"], "env": {}},
        "status": "completed",
    },
}
OUTPUTS: dict[str, dict[str, Any]] = {
    "function_call_output": {"type": "function_call_output", "call_id": "c1", "output": "2"},
    "custom_tool_call_output": {"type": "custom_tool_call_output", "call_id": "c2", "output": "HI"},
    "shell_call_output": {
        "type": "shell_call_output",
        "call_id": "c3",
        "output": [
            {"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "", "stderr": "no", "outcome": {"type": "timeout"}},
        ],
    },
    "apply_patch_call_output": {
        "type": "apply_patch_call_output",
        "call_id": "c4",
        "status": "completed",
        "output": "deleted",
    },
    "local_shell_call_output": {"type": "local_shell_call_output", "call_id": "c5", "output": "x\n"},
}
HOSTED: dict[str, dict[str, Any]] = {
    "tool_search_call": {"type": "tool_search_call", "arguments": {"query": "weather"}},
    "tool_search_output": {"type": "tool_search_output", "tools": [{"type": "function", "name": "w"}]},
    "mcp_call": {"type": "mcp_call", "id": "mcp_1", "name": "n", "server_label": "s", "arguments": "{}"},
    "mcp_approval_response": {"type": "mcp_approval_response", "approval_request_id": "r1", "approve": True},
    "code_interpreter_call": {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "container_id": "cnt",
        "status": "completed",
        "code": "print(1)",
    },
}


def _types(alias: Any) -> set[str]:
    """The `type` of every model in a union of item models."""
    found: set[str] = set()
    for member in typing.get_args(alias) if isinstance(alias, types.UnionType) else (alias,):
        if isinstance(member, types.UnionType):
            found |= _types(member)
        else:
            found.add(member.model_fields["type"].default)
    return found


def test_every_call_type_has_an_output_type_and_both_are_wire_items() -> None:
    calls = {model.model_fields["type"].default for model in CALL_TYPES}
    outputs = {model.model_fields["type"].default for model in OUTPUT_TYPES}
    assert set(KINDS) == calls
    assert {kind.output_type for kind in KINDS.values()} == outputs
    for call_type, kind in KINDS.items():
        assert kind.call_type == call_type
        assert kind.output_type, call_type
        assert kind.id_prefix, call_type
    assert _types(Item) >= set(ITEMS)


def test_each_item_type_belongs_to_one_kind() -> None:
    declared = [surface.type for kind in REGISTRY for surface in kind.items]
    assert len(declared) == len(set(declared)) == len(ITEMS)
    assert set(ITEMS) == set(CALLS) | set(OUTPUTS) | set(HOSTED) | {"mcp_list_tools", "mcp_approval_request"}


def test_lookups_by_call_and_by_output() -> None:
    for raw in CALLS.values():
        assert kind_of_call(_INPUT.validate_python(raw)).call_type == raw["type"]
    for raw in OUTPUTS.values():
        assert kind_of_output(_INPUT.validate_python(raw)).output_type == raw["type"]


def test_program_names() -> None:
    assert [k.program_name for k in (SHELL, APPLY_PATCH, LOCAL_SHELL, CODE_INTERPRETER, HOSTED_SHELL)] == [
        "shell",
        "apply_patch",
        "local_shell",
        "code_interpreter",
        "shell",
    ]
    assert FUNCTION.program_name is None and CUSTOM.program_name is None and MCP.program_name is None
    assert HOSTED_SHELL.owner == CODE_INTERPRETER.owner == MCP.owner == "server"


def _request(*tools: dict[str, Any]) -> CreateRequest:
    return CreateRequest.model_validate({"model": "m", "tools": [*tools, {"type": "programmatic_tool_calling"}]})


def test_bind_names_each_tool_by_its_kind() -> None:
    programmatic = ["programmatic"]
    bound = bind(
        _request(
            {"type": "function", "name": "add", "parameters": {}, "allowed_callers": programmatic},
            {"type": "custom", "name": "shout", "allowed_callers": programmatic},
            {"type": "shell", "environment": {"type": "local"}, "allowed_callers": programmatic},
            {"type": "apply_patch", "allowed_callers": programmatic},
            {"type": "local_shell"},
            {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": programmatic},
        )
    )
    kinds = {name: binding.kind for name, binding in bound.items()}
    assert kinds == {
        "add": FUNCTION,
        "shout": CUSTOM,
        "shell": SHELL,
        "apply_patch": APPLY_PATCH,
        "local_shell": LOCAL_SHELL,
        "code_interpreter": CODE_INTERPRETER,
    }
    hosted = bind(_request({"type": "shell", "environment": {"type": "container_auto"}}))
    assert hosted["shell"].kind is HOSTED_SHELL


def test_steering_stubs_come_from_the_registry() -> None:
    final = {"output": [{"type": "message", "role": "assistant", "content": []}, *CALLS.values(), *HOSTED.values()]}
    stubs = required_input(final)
    assert stubs == [
        {"type": "function_call_output", "call_id": "c1", "name": "add"},
        {"type": "custom_tool_call_output", "call_id": "c2"},
        {"type": "shell_call_output", "call_id": "c3"},
        {"type": "apply_patch_call_output", "call_id": "c4"},
    ]
    assert stubs == [s for raw in CALLS.values() if (s := KINDS[raw["type"]].stub(raw)) is not None]
    assert LOCAL_SHELL.stub(CALLS["local_shell_call"]) is None  # never stubbed, as before the registry


LISTED_IDS = {
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "shell_call": "sh",
    "shell_call_output": "sho",
    "apply_patch_call": "apc",
    "apply_patch_call_output": "apco",
    "local_shell_call_output": "lsho",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
    "mcp_approval_response": "mcpa",
}
"""The ids `input_items.list` gave items without one before the registry (history.py's table)."""


@pytest.mark.parametrize("raw", [*CALLS.values(), *OUTPUTS.values(), *HOSTED.values()], ids=lambda r: r["type"])
def test_listing_follows_the_registry(raw: dict[str, Any]) -> None:
    surface = ITEMS[raw["type"]]
    listed = as_response_item(_INPUT.validate_python(raw), lambda prefix: f"{prefix}_new")
    if "id" in raw:
        assert listed["id"] == raw["id"]
    else:
        assert listed["id"] == f"{LISTED_IDS[raw['type']]}_new" == f"{surface.listed_id}_new"
    if surface.listed_id is not None:
        for name, value in surface.listed:
            assert listed[name] == raw.get(name, value)
    assert ("execution" in listed) == raw["type"].startswith("tool_search")
    assert ("status" in listed) == (raw["type"] not in ("mcp_approval_response", "mcp_call") or "status" in raw)
    assert dump(as_input(listed)) == {**dump(_INPUT.validate_python(raw)), "id": listed["id"]} | {
        k: listed[k] for k in ("status", "execution") if k in listed and k not in surface.listed_only
    }


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


USAGE = {
    "function_call": ["add", '{"a": 1}'],
    "function_call_output": ["2"],
    "custom_tool_call": ["shout", "hi"],
    "custom_tool_call_output": ["HI"],
    "shell_call": ["ls", "pwd"],
    "shell_call_output": ["a.txt\n", "", "", "no"],
    "apply_patch_call": [_compact({"type": "delete_file", "path": "a.txt"})],
    "apply_patch_call_output": ["deleted"],
    "local_shell_call": [_compact({"type": "exec", "command": ["echo", "x"], "env": {}})],
    "local_shell_call_output": ["x\n"],
    "tool_search_call": [_compact({"query": "weather"})],
    "tool_search_output": [_compact([{"type": "function", "name": "w"}])],
    "mcp_call": [],
    "mcp_approval_response": [],
    "code_interpreter_call": [],
}
"""What the model reads of each kind's items (as usage.item_text read them before the registry)."""


@pytest.mark.parametrize("raw", [*CALLS.values(), *OUTPUTS.values(), *HOSTED.values()], ids=lambda r: r["type"])
def test_usage_text_of_each_kind(raw: dict[str, Any]) -> None:
    item = _INPUT.validate_python(raw)
    assert list(item_text(dump(item))) == USAGE[raw["type"]]
    assert list(model_text(item)) == USAGE[raw["type"]]
    assert list(ITEMS[raw["type"]].text(dump(item))) == USAGE[raw["type"]]


def _output(raw: dict[str, Any]) -> OutputItem:
    output: OutputItem = _INPUT.validate_python(raw)
    return output


def test_answers_as_text_and_as_journal_entries() -> None:
    chunks = OUTPUTS["shell_call_output"]["output"]
    expected = {
        "function_call_output": ("2", ("2", False)),
        "custom_tool_call_output": ("HI", ('"HI"', False)),
        "shell_call_output": (json.dumps(chunks), (json.dumps(chunks), False)),
        "apply_patch_call_output": (
            '{"status": "completed", "output": "deleted"}',
            ('{"status": "completed", "output": "deleted"}', False),
        ),
        "local_shell_call_output": ("x\n", ('"x\\n"', False)),
    }
    for output_type, (text, entry) in expected.items():
        output = _output(OUTPUTS[output_type])
        assert answer_text(output) == text
        assert kind_of_output(output).result(output) == entry
    failed = _output({**OUTPUTS["apply_patch_call_output"], "status": "failed", "output": None})
    assert APPLY_PATCH.result(failed) == ("apply_patch failed", True)
    assert answer_text(failed) == '{"status": "failed", "output": null}'


@pytest.mark.parametrize("kind", [SHELL, APPLY_PATCH, LOCAL_SHELL], ids=lambda k: k.kind)
def test_action_kinds_make_the_call_the_program_asked_for(kind: Any) -> None:
    raw = CALLS[kind.call_type]
    arguments = json.dumps(raw[kind.field])
    binding = Binding(kind.program_name, kind, None, True, True)
    assert kind.check(binding, json.loads(arguments)) is None
    call = kind.call_item(binding, arguments, call_id="c9", item_id=None, caller=None)
    assert call.type == kind.call_type and call.call_id == "c9"
    assert json.loads(kind.arguments(call)) == dump(getattr(call, kind.field))
    assert kind.call_name(call) == kind.program_name
    problem = kind.check(binding, {"nonsense": 1})
    assert problem is not None and problem.startswith(kind.takes)


def test_action_kinds_differ_only_where_they_say() -> None:
    shell = SHELL.call_item(
        Binding("shell", SHELL, None, True, False), '{"commands": ["ls"]}', call_id="c", item_id="sh_1", caller=None
    )
    assert dump(shell) == {
        "type": "shell_call",
        "call_id": "c",
        "action": {"commands": ["ls"]},
        "id": "sh_1",
        "environment": {"type": "local"},
        "status": "completed",
    }
    local = LOCAL_SHELL.call_item(
        Binding("local_shell", LOCAL_SHELL, None, False, True),
        '{"command": ["ls"]}',
        call_id="c",
        item_id=None,
        caller=None,
    )
    assert dump(local)["id"] == "c"  # a local_shell call always has an id
    assert TOOL_SEARCH.call is None and TOOL_SEARCH.stub({"call_id": "x"}) is None


def test_answer_keys() -> None:
    assert [answer_key(_output(raw)) for raw in OUTPUTS.values()] == ["c1", "c2", "c3", "c4", "c5"]
    by_id = _output({"type": "local_shell_call_output", "id": "c7", "output": ""})
    assert answer_key(by_id) == "c7"  # a local_shell answer may name its call by `id`
    assert answer_key(_output({**OUTPUTS["shell_call_output"], "id": "other"})) == "c3"
