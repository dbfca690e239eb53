"""The tool calls a client answers, and the answers: one pair of item types per client-owned tool
kind (`emulator/tools/kinds.py` says what each kind does with them).

Field lists follow the official SDK's types, as in `items.py`.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from ptc_emulator.emulator.wire.base import Caller, ContentPart, OpenJSON, WireModel, held_parts_text

__all__ = [
    "CALL_TYPES",
    "OUTPUT_TYPES",
    "ApplyPatchCall",
    "ApplyPatchCallOutput",
    "CallItem",
    "CreateFile",
    "CustomToolCall",
    "CustomToolCallOutput",
    "DeleteFile",
    "ExitOutcome",
    "FunctionCall",
    "FunctionCallOutput",
    "LocalShellAction",
    "LocalShellCall",
    "LocalShellCallOutput",
    "OutputItem",
    "PatchOperation",
    "ShellAction",
    "ShellCall",
    "ShellCallOutput",
    "ShellOutputChunk",
    "TimeoutOutcome",
    "UpdateFile",
]


class FunctionCall(WireModel):
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    caller: Caller | None = None
    namespace: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    async_: bool | None = Field(default=None, alias="async")


class FunctionCallOutput(WireModel):
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str | None = None
    output: str | list[ContentPart]
    id: str | None = None
    caller: Caller | None = None
    name: str | None = None
    namespace: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    created_by: str | None = None

    def output_text(self) -> str:
        """The output as a program receives it: a string as is; content parts as a JSON array."""
        return held_parts_text(self)


class CustomToolCall(WireModel):
    """A call to a `custom` tool: one free-form string, `input`."""

    type: Literal["custom_tool_call"] = "custom_tool_call"
    call_id: str
    name: str
    input: str
    id: str | None = None
    caller: Caller | None = None
    namespace: str | None = None
    async_: bool | None = Field(default=None, alias="async")


class CustomToolCallOutput(WireModel):
    type: Literal["custom_tool_call_output"] = "custom_tool_call_output"
    call_id: str
    output: str | list[ContentPart]
    id: str | None = None
    caller: Caller | None = None

    def output_text(self) -> str:
        """The output as text: a string as is; content parts as a JSON array."""
        return held_parts_text(self)


class ShellAction(WireModel):
    commands: list[str]
    max_output_length: int | None = None
    timeout_ms: int | None = None


class ShellCall(WireModel):
    """A `shell` tool call: commands the client runs (environment `local`)."""

    type: Literal["shell_call"] = "shell_call"
    call_id: str
    action: ShellAction
    id: str | None = None
    caller: Caller | None = None
    environment: OpenJSON | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class ExitOutcome(WireModel):
    type: Literal["exit"] = "exit"
    exit_code: int


class TimeoutOutcome(WireModel):
    type: Literal["timeout"] = "timeout"


class ShellOutputChunk(WireModel):
    """One command's result."""

    stdout: str
    stderr: str
    outcome: Annotated[ExitOutcome | TimeoutOutcome, Field(discriminator="type")]


class ShellCallOutput(WireModel):
    type: Literal["shell_call_output"] = "shell_call_output"
    call_id: str
    output: list[ShellOutputChunk]
    id: str | None = None
    caller: Caller | None = None
    max_output_length: int | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class CreateFile(WireModel):
    type: Literal["create_file"] = "create_file"
    path: str
    diff: str


class UpdateFile(WireModel):
    type: Literal["update_file"] = "update_file"
    path: str
    diff: str


class DeleteFile(WireModel):
    type: Literal["delete_file"] = "delete_file"
    path: str


PatchOperation: TypeAlias = Annotated[CreateFile | UpdateFile | DeleteFile, Field(discriminator="type")]


class ApplyPatchCall(WireModel):
    type: Literal["apply_patch_call"] = "apply_patch_call"
    call_id: str
    operation: PatchOperation
    status: Literal["in_progress", "completed"]
    id: str | None = None
    caller: Caller | None = None


class ApplyPatchCallOutput(WireModel):
    type: Literal["apply_patch_call_output"] = "apply_patch_call_output"
    call_id: str
    status: Literal["completed", "failed"]
    id: str | None = None
    caller: Caller | None = None
    output: str | None = None


class LocalShellAction(WireModel):
    type: Literal["exec"] = "exec"
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int | None = None
    user: str | None = None
    working_directory: str | None = None


class LocalShellCall(WireModel):
    """A `local_shell` call (direct only: the tool has no allowed_callers)."""

    type: Literal["local_shell_call"] = "local_shell_call"
    id: str
    call_id: str
    action: LocalShellAction
    status: Literal["in_progress", "completed", "incomplete"]


class LocalShellCallOutput(WireModel):
    """The SDK's param names the call by `id`; the Agents SDK sends `call_id`: either is accepted."""

    type: Literal["local_shell_call_output"] = "local_shell_call_output"
    output: str
    id: str | None = None
    call_id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


CallItem: TypeAlias = FunctionCall | CustomToolCall | ShellCall | ApplyPatchCall | LocalShellCall
"""A tool call the client answers."""

OutputItem: TypeAlias = (
    FunctionCallOutput | CustomToolCallOutput | ShellCallOutput | ApplyPatchCallOutput | LocalShellCallOutput
)
"""A client's answer to a `CallItem`."""

CALL_TYPES = (FunctionCall, CustomToolCall, ShellCall, ApplyPatchCall, LocalShellCall)
OUTPUT_TYPES = (FunctionCallOutput, CustomToolCallOutput, ShellCallOutput, ApplyPatchCallOutput, LocalShellCallOutput)
