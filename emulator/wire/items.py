"""The conversation items the engine reads and writes, as the Responses API spells them.

Field lists follow the official SDK's types (openai 3.51+): input items accept every field the
SDK's output models can dump, so a client may replay `item.model_dump()` as it is; anything
else is an unknown parameter, as it is for the hosted API.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

__all__ = [
    "MAX_DEPTH",
    "OpenJSON",
    "check_depth",
    "Caller",
    "ApplyPatchCall",
    "ApplyPatchCallOutput",
    "CALL_TYPES",
    "CallItem",
    "CodeInterpreterCall",
    "ContentPart",
    "CustomToolCall",
    "CustomToolCallOutput",
    "DirectCaller",
    "FunctionCall",
    "FunctionCallOutput",
    "HostedItem",
    "InputItem",
    "Item",
    "ItemReference",
    "LocalShellCall",
    "LocalShellCallOutput",
    "McpApprovalRequest",
    "McpApprovalResponse",
    "McpCall",
    "McpListTools",
    "McpListedTool",
    "Message",
    "OutputText",
    "ProgramCaller",
    "ProgramItem",
    "ProgramOutputItem",
    "OUTPUT_TYPES",
    "OutputItem",
    "ReasoningItem",
    "Refusal",
    "ShellCall",
    "ShellCallOutput",
    "SummaryText",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "WireModel",
    "dump",
]


MAX_DEPTH = 64


def check_depth(value: Any) -> Any:
    """Free-form JSON (tool schemas, `text`, content-part extras) nested at most MAX_DEPTH deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, dict | list))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return value


OpenJSON: TypeAlias = Annotated[dict[str, Any], AfterValidator(check_depth)]
"""A free-form JSON object, depth-limited."""


class WireModel(BaseModel):
    """Strict about types and unknown fields, as the hosted API is."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class OpenModel(BaseModel):
    """For nested shapes the emulator only carries (content parts, annotations): extra fields
    allowed, depth-limited."""

    model_config = ConfigDict(extra="allow", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        return check_depth(value)


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---- callers --------------------------------------------------------------------------------


class DirectCaller(WireModel):
    type: Literal["direct"] = "direct"


class ProgramCaller(WireModel):
    type: Literal["program"] = "program"
    caller_id: str
    """The call ID of the program item that produced this tool call."""


Caller: TypeAlias = Annotated[DirectCaller | ProgramCaller, Field(discriminator="type")]


# ---- message content --------------------------------------------------------------------------


class InputText(OpenModel):
    type: Literal["input_text"]
    text: str


class InputImage(OpenModel):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(OpenModel):
    type: Literal["input_file"]


class OutputText(OpenModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[OpenJSON] = Field(default_factory=list)
    logprobs: list[OpenJSON] | None = None


class Refusal(OpenModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


ContentPart: TypeAlias = Annotated[
    InputText | InputImage | InputFile | OutputText | Refusal, Field(discriminator="type")
]


# ---- items ----------------------------------------------------------------------------------


class Message(WireModel):
    """A user, system or developer message, or an assistant message being replayed."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    def text(self) -> str:
        """The message's text: input_text and output_text parts joined, refusals included."""
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for part in self.content:
            if isinstance(part, InputText | OutputText):
                parts.append(part.text)
            elif isinstance(part, Refusal):
                parts.append(part.refusal)
        return "\n".join(parts)


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
        if isinstance(self.output, str):
            return self.output
        return json.dumps([part.model_dump(mode="json", exclude_none=True) for part in self.output])


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
        if isinstance(self.output, str):
            return self.output
        return json.dumps([part.model_dump(mode="json", exclude_none=True) for part in self.output])


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


class ProgramItem(WireModel):
    type: Literal["program"] = "program"
    id: str
    call_id: str
    code: str
    fingerprint: str


class ProgramOutputItem(WireModel):
    type: Literal["program_output"] = "program_output"
    id: str
    call_id: str
    result: str
    status: Literal["completed", "incomplete"]


class SummaryText(WireModel):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningItem(WireModel):
    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[SummaryText]
    content: list[OpenJSON] | None = None
    encrypted_content: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


# ---- hosted tool items (MCP, code interpreter): see `hosted.py` -------------------------------


class McpListedTool(OpenModel):
    name: str
    input_schema: OpenJSON
    description: str | None = None
    annotations: OpenJSON | None = None


class McpListTools(WireModel):
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    id: str
    server_label: str
    tools: list[McpListedTool]
    error: str | None = None
    caller: Caller | None = None


class McpCall(WireModel):
    type: Literal["mcp_call"] = "mcp_call"
    id: str
    name: str
    server_label: str
    arguments: str
    output: str | None = None
    error: OpenJSON | None = None
    """`{type: mcp_protocol_error, code, message} | {type: mcp_tool_execution_error, content} |
    {type: http_error, code, message}`."""
    status: Literal["in_progress", "completed", "incomplete", "calling", "failed"] | None = None
    approval_request_id: str | None = None
    caller: Caller | None = None


class McpApprovalRequest(WireModel):
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    id: str
    name: str
    server_label: str
    arguments: str
    caller: Caller | None = None
    """Not in the openai types; the Agents SDK reads and round-trips it (contract §12)."""


class McpApprovalResponse(WireModel):
    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    approval_request_id: str
    approve: bool
    id: str | None = None
    reason: str | None = None
    caller: Caller | None = None


class CodeInterpreterCall(WireModel):
    type: Literal["code_interpreter_call"] = "code_interpreter_call"
    id: str
    container_id: str
    status: Literal["in_progress", "completed", "incomplete", "interpreting", "failed"]
    code: str | None = None
    outputs: list[OpenJSON] | None = None
    caller: Caller | None = None


class ToolSearchCallItem(WireModel):
    """The model's search for deferred tools (`execution: "server"`: the server ran it; `"client"`:
    the client answers with a `tool_search_output` carrying the same `call_id`)."""

    type: Literal["tool_search_call"] = "tool_search_call"
    arguments: OpenJSON
    id: str | None = None
    call_id: str | None = None
    execution: Literal["server", "client"] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    created_by: str | None = None


class ToolSearchOutputItem(WireModel):
    """The tools a search loaded. `tools` uses the request's Tool union; it is checked against it
    where the conversation is read (`toolset.py`), as this module knows no tool types."""

    type: Literal["tool_search_output"] = "tool_search_output"
    tools: list[OpenJSON]
    id: str | None = None
    call_id: str | None = None
    execution: Literal["server", "client"] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    created_by: str | None = None


class ItemReference(WireModel):
    type: Literal["item_reference"] | None = "item_reference"
    id: str


def _item_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        tag = value.get("type")
        if tag is None:
            if "role" in value:
                return "message"  # EasyInputMessage: the type may be omitted
            if set(value) == {"id"}:
                return "item_reference"
            return None
        return tag if isinstance(tag, str) else None
    return getattr(value, "type", None)


InputItem: TypeAlias = Annotated[
    Annotated[Message, Tag("message")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")]
    | Annotated[CustomToolCall, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutput, Tag("custom_tool_call_output")]
    | Annotated[ShellCall, Tag("shell_call")]
    | Annotated[ShellCallOutput, Tag("shell_call_output")]
    | Annotated[ApplyPatchCall, Tag("apply_patch_call")]
    | Annotated[ApplyPatchCallOutput, Tag("apply_patch_call_output")]
    | Annotated[LocalShellCall, Tag("local_shell_call")]
    | Annotated[LocalShellCallOutput, Tag("local_shell_call_output")]
    | Annotated[ProgramItem, Tag("program")]
    | Annotated[ProgramOutputItem, Tag("program_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[McpListTools, Tag("mcp_list_tools")]
    | Annotated[McpCall, Tag("mcp_call")]
    | Annotated[McpApprovalRequest, Tag("mcp_approval_request")]
    | Annotated[McpApprovalResponse, Tag("mcp_approval_response")]
    | Annotated[CodeInterpreterCall, Tag("code_interpreter_call")]
    | Annotated[ToolSearchCallItem, Tag("tool_search_call")]
    | Annotated[ToolSearchOutputItem, Tag("tool_search_output")]
    | Annotated[ItemReference, Tag("item_reference")],
    Discriminator(_item_tag),
]
"""The input items the emulator understands; any other `type` is refused with a 400."""

HostedItem: TypeAlias = McpListTools | McpCall | McpApprovalRequest | McpApprovalResponse | CodeInterpreterCall
"""Items of the tools the emulator runs on the server's side (`hosted.py`)."""

CallItem: TypeAlias = FunctionCall | CustomToolCall | ShellCall | ApplyPatchCall | LocalShellCall
"""A tool call the client answers."""

OutputItem: TypeAlias = (
    FunctionCallOutput | CustomToolCallOutput | ShellCallOutput | ApplyPatchCallOutput | LocalShellCallOutput
)
"""A client's answer to a `CallItem`."""

CALL_TYPES = (FunctionCall, CustomToolCall, ShellCall, ApplyPatchCall, LocalShellCall)
OUTPUT_TYPES = (FunctionCallOutput, CustomToolCallOutput, ShellCallOutput, ApplyPatchCallOutput, LocalShellCallOutput)

Item: TypeAlias = (
    Message
    | CallItem
    | OutputItem
    | ProgramItem
    | ProgramOutputItem
    | ReasoningItem
    | ToolSearchCallItem
    | ToolSearchOutputItem
    | HostedItem
)
