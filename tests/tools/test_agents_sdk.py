"""The OpenAI Agents SDK's Runner completes programmatic runs that call a `CustomTool`, a local
`ShellTool` and an `ApplyPatchTool`, inline programs with no scenario: it accepts every response
(each item carries the caller its tool allows; no program-owned item shares a response with its
program's program_output), runs the tools, replays the items, and ends with the program's result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ApplyPatchOperation,
    ApplyPatchResult,
    ApplyPatchTool,
    CustomTool,
    ModelSettings,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
    set_tracing_disabled,
)
from agents.tool_context import ToolContext

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, runner_model

pytestmark = pytest.mark.sdk  # the Agents SDK's Runner accepts the items of every client-owned kind

done: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)  # nothing may leave this machine
    done.clear()
    yield


def shout(context: ToolContext[Any], text: str) -> str:
    done.append(("shout", text))
    return text.upper()


def run_shell(request: ShellCommandRequest) -> ShellResult:
    commands = request.data.action.commands
    done.append(("shell", commands))
    return ShellResult(
        output=[
            ShellCommandOutput(stdout=f"{c}: ok\n", stderr="", outcome=ShellCallOutcome(type="exit", exit_code=0))
            for c in commands
        ]
    )


class Editor:
    """An in-memory file tree."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        done.append(("create_file", operation.path))
        self.files[operation.path] = operation.diff or ""
        return ApplyPatchResult(status="completed", output=f"created {operation.path}")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        done.append(("update_file", operation.path))
        if operation.path not in self.files:
            return ApplyPatchResult(status="failed", output=f"{operation.path}: no such file")
        self.files[operation.path] += operation.diff or ""
        return ApplyPatchResult(status="completed", output=f"updated {operation.path}")

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        done.append(("delete_file", operation.path))
        self.files.pop(operation.path, None)
        return ApplyPatchResult(status="completed", output=f"deleted {operation.path}")


def agent(ptc_emulator: PTCEmulator, tools: list[Any], **settings: Any) -> Agent[Any]:
    return Agent(
        name="tools",
        instructions="Use a program.",
        model=runner_model(ptc_emulator),
        model_settings=ModelSettings(**settings),
        tools=[ProgrammaticToolCallingTool(), *tools],
    )


async def run(ptc_emulator: PTCEmulator, tools: list[Any], code: str, **settings: Any) -> Any:
    return await Runner.run(
        agent(ptc_emulator, tools, **settings), js(code), run_config=RunConfig(tracing_disabled=True)
    )


def replayed_types(ptc_emulator: PTCEmulator) -> list[list[str]]:
    return [[i.get("type", "message") for i in e["request"]["input"]] for e in ptc_emulator.journal]


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_with_a_custom_tool(ptc_emulator: PTCEmulator, store: bool | None) -> None:
    tool = CustomTool(
        name="shout",
        description="Upper-cases its input.",
        on_invoke_tool=shout,
        allowed_callers=["programmatic"],
    )
    code = 'const [a, b] = await Promise.all([tools.shout("one"), tools.shout("two")]);\ntext(a + "+" + b);'
    result = await run(ptc_emulator, [tool], code, store=store)
    assert result.final_output == "ONE+TWO"
    assert sorted(done) == [("shout", "one"), ("shout", "two")]
    assert [e["status"] for e in ptc_emulator.journal] == [200, 200]
    assert replayed_types(ptc_emulator)[1] == [
        "message",
        "program",
        "custom_tool_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "custom_tool_call_output",
    ]
    second = ptc_emulator.journal[1]["request"]["input"]
    assert all(i["caller"]["type"] == "program" for i in second if i.get("type") == "custom_tool_call_output")


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_with_a_local_shell_tool(ptc_emulator: PTCEmulator, store: bool | None) -> None:
    tool = ShellTool(executor=run_shell, allowed_callers=["programmatic"])
    code = """
const out = await tools.shell({commands: ["git status", "ls"]});
text(out.map((o) => o.stdout.trim() + " (" + o.outcome.exit_code + ")").join("; "));
"""
    result = await run(ptc_emulator, [tool], code, store=store)
    assert result.final_output == "git status: ok (0); ls: ok (0)"
    assert done == [("shell", ["git status", "ls"])]
    request = ptc_emulator.journal[0]["request"]
    assert {"type": "shell", "environment": {"type": "local"}, "allowed_callers": ["programmatic"]} in request["tools"]
    assert replayed_types(ptc_emulator)[1][-2:] == ["shell_call", "shell_call_output"]


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_with_an_apply_patch_tool(ptc_emulator: PTCEmulator, store: bool | None) -> None:
    editor = Editor()
    tool = ApplyPatchTool(editor=editor, allowed_callers=["programmatic"])
    code = """
const made = await tools.apply_patch({type: "create_file", path: "a.md", diff: "+a\\n"});
let failed = null;
try {
  await tools.apply_patch({type: "update_file", path: "missing.md", diff: "+b\\n"});
} catch (e) {
  failed = e.message;
}
text(JSON.stringify({made, failed}));
"""
    result = await run(ptc_emulator, [tool], code, store=store)
    assert json.loads(result.final_output) == {
        "made": {"status": "completed", "output": "created a.md"},
        "failed": "missing.md: no such file",
    }
    assert done == [("create_file", "a.md"), ("update_file", "missing.md")]
    assert editor.files == {"a.md": "+a\n"}
    assert [e["status"] for e in ptc_emulator.journal] == [200, 200, 200]


@pytest.mark.anyio
async def test_runner_with_every_client_kind_in_one_program(ptc_emulator: PTCEmulator) -> None:
    editor = Editor()
    tools = [
        CustomTool(name="shout", description="Upper-cases.", on_invoke_tool=shout, allowed_callers=["programmatic"]),
        ShellTool(executor=run_shell, allowed_callers=["programmatic"]),
        ApplyPatchTool(editor=editor, allowed_callers=["programmatic"]),
    ]
    code = """
const [a, sh, p] = await Promise.all([
  tools.shout("mixed"),
  tools.shell({commands: ["make"]}),
  tools.apply_patch({type: "create_file", path: "b.md", diff: "+b\\n"}),
]);
text(a, sh[0].stdout.trim(), p.output);
"""
    result = await run(ptc_emulator, tools, code)
    assert result.final_output == "MIXED make: ok created b.md"
    figures = ptc_emulator.journal[0]["figures"]
    assert figures["tool_calls"] == {
        "custom": {"direct": 0, "program": 1},
        "shell": {"direct": 0, "program": 1},
        "apply_patch": {"direct": 0, "program": 1},
    }
