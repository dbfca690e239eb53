"""The tool-kind registry (emulator/tools/kinds.py): which binding a request's tools make, what a
program may call, the refusals of bad arguments, and each kind's call item, journal arguments
and answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.emulator.tools import kinds
from ptc_emulator.emulator.wire.items import (
    ApplyPatchCallOutput,
    CustomToolCallOutput,
    FunctionCallOutput,
    ShellCallOutput,
)
from ptc_emulator.emulator.wire.request import CreateRequest

PTC = {"type": "programmatic_tool_calling"}
PROGRAMMATIC = ["programmatic"]


def request(*tools: dict[str, Any]) -> CreateRequest:
    return CreateRequest.model_validate({"model": "m", "input": "hi", "tools": list(tools)})


def test_the_registry_pairs_each_client_owned_call_with_its_answer() -> None:
    assert {call: kind.output_type for call, kind in kinds.KINDS.items()} == {
        "function_call": "function_call_output",
        "custom_tool_call": "custom_tool_call_output",
        "shell_call": "shell_call_output",
        "apply_patch_call": "apply_patch_call_output",
        "local_shell_call": "local_shell_call_output",
    }
    assert len({kind.id_prefix for kind in kinds.KINDS.values()}) == len(kinds.KINDS)


def test_bind_names_every_tool_with_its_kind_in_declaration_order() -> None:
    bound = kinds.bind(
        request(
            {"type": "function", "name": "add", "allowed_callers": PROGRAMMATIC},
            {"type": "custom", "name": "shout"},
            {"type": "shell", "allowed_callers": PROGRAMMATIC},
            {"type": "apply_patch"},
            {"type": "local_shell"},
            {"type": "web_search"},
            PTC,
        )
    )
    assert [(name, b.kind.kind) for name, b in bound.items()] == [
        ("add", "function"),
        ("shout", "custom"),
        ("shell", "shell"),
        ("apply_patch", "apply_patch"),
        ("local_shell", "local_shell"),
        ("web_search", "web_search"),
    ]
    assert isinstance(bound["web_search"].kind, kinds.Unemulated)
    assert [name for name, b in bound.items() if b.programmatic] == ["add", "shell"]
    assert [name for name, b in bound.items() if b.direct] == ["shout", "apply_patch", "local_shell", "web_search"]


def test_without_the_programmatic_tool_nothing_is_programmatic() -> None:
    tools = ({"type": "function", "name": "add", "allowed_callers": PROGRAMMATIC}, {"type": "web_search"})
    assert not any(b.programmatic for b in kinds.bind(request(*tools)).values())
    assert kinds.program_tools(request(*tools)) == ()
    assert kinds.program_tools(request(*tools, PTC)) == ("add", "web_search")  # sorted; hosted ones fail when called


def test_a_function_named_like_a_built_in_kind_keeps_the_name() -> None:
    bound = kinds.bind(request({"type": "shell"}, {"type": "function", "name": "shell"}))
    assert bound["shell"].kind is kinds.FUNCTION


def test_duplicate_function_and_custom_names_are_found() -> None:
    tools = ({"type": "function", "name": "a"}, {"type": "custom", "name": "a"}, {"type": "function", "name": "b"})
    assert list(kinds.duplicate_names(request(*tools))) == ["a"]


def test_a_hosted_tool_fails_naming_its_kind() -> None:
    assert kinds.Unemulated("image_generation").message("image_generation") == (
        "tools.image_generation() calls the 'image_generation' tool, a hosted tool that this emulator does not run."
    )


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        (kinds.CUSTOM, {"text": "hi"}, "tools.t() takes one argument: a string"),
        (
            kinds.SHELL,
            {},
            "tools.shell() takes {commands: string[], timeout_ms?, max_output_length?}: "
            "missing required field 'commands'",
        ),
        (kinds.SHELL, {"commands": ["ls"], "cwd": "/"}, "unknown field 'cwd'"),
        (kinds.SHELL, {"commands": "ls"}, "'commands': Input should be a valid list"),
        (
            kinds.APPLY_PATCH,
            {"type": "rename_file", "path": "a"},
            "tools.apply_patch() takes {type: 'create_file'|'update_file'|'delete_file', path, diff?}",
        ),
        (
            kinds.LOCAL_SHELL,
            {"cmd": ["ls"]},
            "local_shell takes {command: string[], env?, timeout_ms?, user?, working_directory?}",
        ),
    ],
    ids=["custom-object", "shell-missing", "shell-unknown", "shell-type", "patch-type", "local-shell"],
)
def test_arguments_that_cannot_make_a_call_are_refused(kind: kinds.ToolKind, arguments: Any, message: str) -> None:
    binding = kinds.Binding("t", kind, None, True, True)
    refusal = kind.check(binding, arguments)
    assert refusal is not None and message in refusal


@pytest.mark.parametrize(
    ("kind", "name", "arguments"),
    [
        (kinds.FUNCTION, "add", {"a": 1, "b": 2}),
        (kinds.CUSTOM, "shout", "hé there"),
        (kinds.SHELL, "shell", {"commands": ["ls -la", "pwd"]}),
        (kinds.APPLY_PATCH, "apply_patch", {"type": "delete_file", "path": "a.txt"}),
    ],
    ids=["function", "custom", "shell", "apply_patch"],
)
def test_a_call_item_gives_back_the_arguments_the_program_passed(
    kind: kinds.ToolKind, name: str, arguments: Any
) -> None:
    binding = kinds.Binding(name, kind, None, True, True)
    assert kind.check(binding, arguments) is None
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":") if kind is kinds.FUNCTION else None)
    item = kind.call_item(binding, text, call_id="call_1", item_id="it_1", caller=None)
    assert item.type == kind.call_type and item.call_id == "call_1"
    assert kinds.kind_of_call(item) is kind
    assert json.loads(kind.arguments(item)) == arguments
    assert kind.call_name(item) == name


def test_a_namespaced_function_call_is_named_by_its_qualified_name() -> None:
    binding = kinds.Binding("shipping.eta", kinds.FUNCTION, None, True, True)
    item = kinds.FUNCTION.call_item(binding, "{}", call_id="c", item_id=None, caller=None)
    assert (item.name, item.namespace) == ("eta", "shipping")  # type: ignore[union-attr]
    assert kinds.FUNCTION.call_name(item) == "shipping.eta"


@pytest.mark.parametrize(
    ("output", "received", "rejects"),
    [
        (
            FunctionCallOutput.model_validate({"type": "function_call_output", "call_id": "c", "output": '{"v": 1}'}),
            '{"v": 1}',
            False,
        ),
        (
            FunctionCallOutput.model_validate(
                {"type": "function_call_output", "call_id": "c", "output": "no", "status": "incomplete"}
            ),
            "no",
            True,
        ),
        (
            CustomToolCallOutput.model_validate({"type": "custom_tool_call_output", "call_id": "c", "output": "HI"}),
            '"HI"',
            False,
        ),
        (
            ApplyPatchCallOutput.model_validate(
                {"type": "apply_patch_call_output", "call_id": "c", "status": "failed", "output": "conflict"}
            ),
            "conflict",
            True,
        ),
        (
            ApplyPatchCallOutput.model_validate(
                {"type": "apply_patch_call_output", "call_id": "c", "status": "completed"}
            ),
            '{"status": "completed", "output": null}',
            False,
        ),
    ],
    ids=["function", "function-incomplete", "custom", "patch-failed", "patch-completed"],
)
def test_an_answer_reaches_the_program_as_its_kind_says(output: Any, received: str, rejects: bool) -> None:
    assert kinds.kind_of_output(output).result(output) == (received, rejects)
    assert kinds.answer_key(output) == "c"


def test_a_shell_answer_is_its_output_array() -> None:
    chunk = {"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    output = ShellCallOutput.model_validate({"type": "shell_call_output", "call_id": "c", "output": [chunk]})
    text, rejects = kinds.SHELL.result(output)
    assert json.loads(text) == [chunk] and not rejects
    assert json.loads(kinds.answer_text(output)) == [chunk]
