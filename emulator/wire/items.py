"""The conversation items the engine reads and writes, as the Responses API spells them.

Field lists follow the official SDK's types (openai 3.51+): input items accept every field the
SDK's output models can dump, so a client may replay `item.model_dump()` as it is; anything
else is an unknown parameter, as it is for the hosted API. The client-answered tool calls and
their outputs are in `calls.py`, what every model stands on in `base.py`; both are named here
too, so `items` stays the one place to import an item from.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator, model_validator

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.wire.base import (
    MAX_DEPTH,
    Caller,
    ContentPart,
    DirectCaller,
    InputText,
    OpenJSON,
    OpenModel,
    OutputText,
    ProgramCaller,
    Refusal,
    WireModel,
    check_depth,
    dump,
)
from ptc_emulator.emulator.wire.calls import (
    CALL_TYPES,
    OUTPUT_TYPES,
    ApplyPatchCall,
    ApplyPatchCallOutput,
    CallItem,
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    LocalShellAction,
    LocalShellCall,
    LocalShellCallOutput,
    OutputItem,
    PatchOperation,
    ShellAction,
    ShellCall,
    ShellCallOutput,
)
from ptc_emulator.emulator.wire.stepped import stepped

__all__ = [
    "AdditionalToolsItem",
    "MAX_DEPTH",
    "OpenJSON",
    "check_depth",
    "Caller",
    "ApplyPatchCall",
    "ApplyPatchCallOutput",
    "CALL_TYPES",
    "CallItem",
    "CodeInterpreterCall",
    "CompactionItem",
    "CompactionTrigger",
    "ConfigurationUpdateItem",
    "JsonObjectFormat",
    "PlainTextFormat",
    "SchemaTextFormat",
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
    "LocalShellAction",
    "LocalShellCall",
    "LocalShellCallOutput",
    "McpApprovalRequest",
    "McpApprovalResponse",
    "McpCall",
    "McpListTools",
    "McpListedTool",
    "Message",
    "OpenModel",
    "OutputText",
    "PatchOperation",
    "ProgramCaller",
    "ProgramItem",
    "ProgramOutputItem",
    "OUTPUT_TYPES",
    "OutputItem",
    "ReasoningItem",
    "Refusal",
    "ShellAction",
    "ShellCall",
    "ShellCallOutput",
    "SummaryText",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "WireModel",
    "dump",
    "of_type",
    "places_of_type",
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

    _content_stepped = field_validator("content", mode="wrap")(stepped)

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
    id: str = ""
    """Every reasoning item the emulator makes has one. A client may replay one without it (the
    Agents SDK does, with its `reasoning_item_id_policy="omit"`): its sealed content says which it
    is, so it reads as "" here and the checks go by that content."""
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


class CompactionItem(WireModel):
    """What `POST /v1/responses/compact` (or `context_management` compaction) makes of the items
    before it: their sealed form. Replayed, it stands for them (`rules/compaction.py`)."""

    type: Literal["compaction"] = "compaction"
    encrypted_content: str
    id: str | None = None
    created_by: str | None = None


class CompactionTrigger(WireModel):
    """ "Compacts the current context. Must be the final input item." (the SDK's type)"""

    type: Literal["compaction_trigger"] = "compaction_trigger"
    id: str | None = None


class AdditionalToolsItem(WireModel):
    """Tools a developer adds mid-conversation: callable from this item on, by later programs and
    direct calls. `tools` uses the request's Tool union, checked where the conversation is read
    (`toolset.py`), as for a `tool_search_output`."""

    type: Literal["additional_tools"] = "additional_tools"
    role: Literal["developer"]
    """"Only `developer` is supported" (the SDK's type)."""
    tools: list[OpenJSON]
    id: str | None = None


class ConfigurationEffort(WireModel):
    """ "Updates to reasoning configuration. Only effort is supported." (the SDK's type)"""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None


class PlainTextFormat(WireModel):
    """`ResponseFormatText`: plain text, the default."""

    type: Literal["text"]


FormatName = Annotated[str, StringConstraints(max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]
"""A json_schema format's `name`: "Must be a-z, A-Z, 0-9, or contain underscores and dashes, with a
maximum length of 64." (the SDK's docstring)."""


class SchemaTextFormat(WireModel):
    """`ResponseFormatTextJSONSchemaConfig`: the schema the responses answer in. Its `schema` must be a
    JSON Schema, a strict-compliant one with `strict: true` (`contract.check_text_formats`)."""

    type: Literal["json_schema"]
    name: FormatName
    schema_: OpenJSON = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class JsonObjectFormat(WireModel):
    """`ResponseFormatJSONObject`: the older JSON mode (a request's `text.format` only)."""

    type: Literal["json_object"]


class ConfigurationText(WireModel):
    """A configuration_update's `text`: a format only (the SDK's `Text`: no `verbosity`, no `json_object`)."""

    format: Annotated[PlainTextFormat | SchemaTextFormat, Field(discriminator="type")]


class ConfigurationUpdateItem(WireModel):
    """An update to the conversation's response configuration: "Supply reasoning, text, or both.
    Each setting stays in effect until a later update replaces it." (the SDK's type). The
    responses after it echo it and ask a model upstream with it (`rules/configuration.py`)."""

    type: Literal["configuration_update"] = "configuration_update"
    id: str | None = None
    reasoning: ConfigurationEffort | None = None
    text: ConfigurationText | None = None

    @model_validator(mode="after")
    def _supplies_something(self) -> ConfigurationUpdateItem:
        if self.reasoning is None and self.text is None:
            raise ValueError(messages.configuration_update_empty())
        return self


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
    | Annotated[CompactionItem, Tag("compaction")]
    | Annotated[CompactionTrigger, Tag("compaction_trigger")]
    | Annotated[AdditionalToolsItem, Tag("additional_tools")]
    | Annotated[ConfigurationUpdateItem, Tag("configuration_update")]
    | Annotated[ItemReference, Tag("item_reference")],
    Discriminator(_item_tag),
]
"""The input items the emulator understands; any other `type` is refused with a 400."""

HostedItem: TypeAlias = McpListTools | McpCall | McpApprovalRequest | McpApprovalResponse | CodeInterpreterCall
"""Items of the tools the emulator runs on the server's side (`hosted.py`)."""

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
    | CompactionItem
    | CompactionTrigger
    | AdditionalToolsItem
    | ConfigurationUpdateItem
)


_T = TypeVar("_T")


def of_type(items: Iterable[object], kind: type[_T] | tuple[type[_T], ...]) -> Iterator[_T]:
    """The items that are instances of `kind`, in order, picked at C speed: a long program's
    conversation is mostly its calls and their outputs, which most scans look past."""
    listed = items if isinstance(items, list | tuple) else list(items)
    return itertools.compress(listed, map(isinstance, listed, itertools.repeat(kind)))


def places_of_type(items: Iterable[object], kind: type | tuple[type, ...]) -> Iterator[int]:
    """The indexes of the items that are instances of `kind`, in order, picked at C speed."""
    return itertools.compress(itertools.count(), map(isinstance, items, itertools.repeat(kind)))
