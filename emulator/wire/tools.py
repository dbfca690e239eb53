"""Tool declarations and `tool_choice`, as the API spells them: every kind a request may list
(function, custom, namespace, tool search, MCP, the hosted and client-owned kinds, the ones echoed
but not emulated) and every choice it may make."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, get_args

from pydantic import Discriminator, Field, StringConstraints, Tag

from ptc_emulator.emulator.wire.items import OpenJSON, OpenModel, WireModel

__all__ = [
    "AllowedToolsChoice",
    "ApplyPatchTool",
    "Callers",
    "CodeInterpreterTool",
    "ComputerTool",
    "ComputerUsePreviewTool",
    "ContainerAuto",
    "ContainerReference",
    "CustomTool",
    "CustomToolChoice",
    "FileSearchTool",
    "FunctionTool",
    "FunctionToolChoice",
    "GrammarFormat",
    "HostedTool",
    "ImageGenerationTool",
    "KindToolChoice",
    "LocalEnvironment",
    "LocalShellTool",
    "McpApprovalFilter",
    "McpFilter",
    "McpTool",
    "NamespaceCustomTool",
    "NamespaceMember",
    "NamespaceTool",
    "OtherTool",
    "HOSTED_CHOICE_TYPES",
    "HostedToolChoice",
    "McpToolChoice",
    "OtherToolChoice",
    "ProgrammaticToolCalling",
    "ProgrammaticToolChoice",
    "ServerLabel",
    "ShellEnvironment",
    "ShellTool",
    "TextFormat",
    "Tool",
    "ToolChoice",
    "ToolName",
    "ToolSearchTool",
    "WebSearchPreviewTool",
    "WebSearchTool",
]

ToolName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[a-zA-Z0-9_-]+$")]
ServerLabel = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")]
"""An `mcp` tool's `server_label`, and the label a scenario declares a server under."""


class McpFilter(WireModel):
    read_only: bool | None = None
    tool_names: list[str] | None = None

    def matches(self, name: str, read_only: bool) -> bool:
        """A filter names tools, or read-only ones, or both (either matches)."""
        if self.tool_names is not None and name in self.tool_names:
            return True
        return self.read_only is not None and self.read_only == read_only


class McpApprovalFilter(WireModel):
    always: McpFilter | None = None
    never: McpFilter | None = None


class CallerRules:
    """Who may call a tool, read from its `allowed_callers` (a field of the model it is mixed into,
    declared there, so that it keeps its place among that model's fields)."""

    if TYPE_CHECKING:
        allowed_callers: list[Literal["direct", "programmatic"]] | None

    @property
    def programmatic(self) -> bool:
        return "programmatic" in (self.allowed_callers or ())

    @property
    def direct(self) -> bool:
        """Omitted means `["direct"]`."""
        return self.allowed_callers is None or "direct" in self.allowed_callers


class McpTool(CallerRules, WireModel):
    type: Literal["mcp"] = "mcp"
    server_label: ServerLabel
    server_url: str | None = None
    connector_id: (
        Literal[
            "connector_dropbox",
            "connector_gmail",
            "connector_googlecalendar",
            "connector_googledrive",
            "connector_microsoftteams",
            "connector_outlookcalendar",
            "connector_outlookemail",
            "connector_sharepoint",
        ]
        | None
    ) = None
    authorization: str | None = None
    headers: dict[str, str] | None = None
    allowed_tools: list[str] | McpFilter | None = None
    require_approval: Literal["always", "never"] | McpApprovalFilter | None = None
    """Omitted means `always`, as for the hosted API."""
    server_description: str | None = None
    allowed_callers: list[Literal["direct", "programmatic"]] | None = None
    defer_loading: bool | None = None
    tunnel_id: str | None = None

    def allows(self, name: str, read_only: bool) -> bool:
        """Whether `allowed_tools` lets the model see this server tool."""
        allowed = self.allowed_tools
        if allowed is None:
            return True
        if isinstance(allowed, list):
            return name in allowed
        return allowed.matches(name, read_only)

    def needs_approval(self, name: str, read_only: bool) -> bool:
        policy = self.require_approval
        if policy is None or policy == "always":
            return True
        if policy == "never":
            return False
        if policy.never is not None and policy.never.matches(name, read_only):
            return False
        if policy.always is not None and policy.always.matches(name, read_only):
            return True
        # A tool neither filter names: with only `always` given it runs freely; otherwise the
        # default (`always`) holds.
        return not (policy.always is not None and policy.never is None)


# ---- offline declarations -----------------------------------------------------------------------


class FunctionTool(CallerRules, WireModel):
    type: Literal["function"] = "function"
    name: ToolName
    description: str | None = None
    parameters: OpenJSON | None = None
    strict: bool | None = None
    allowed_callers: list[Literal["direct", "programmatic"]] | None = None
    """Who may call the tool; omitted means `["direct"]`."""
    output_schema: OpenJSON | None = None
    defer_loading: bool | None = None
    async_: bool | None = Field(default=None, alias="async")


class NamespaceCustomTool(OpenModel):
    """A custom tool inside a namespace: carried, never called by the scripted model."""

    type: Literal["custom"]
    name: ToolName
    defer_loading: bool | None = None


NamespaceMember: TypeAlias = Annotated[FunctionTool | NamespaceCustomTool, Field(discriminator="type")]


class NamespaceTool(WireModel):
    """Function (and custom) tools grouped under one name: `function_call.namespace` names it and
    programs call `tools.<namespace>.<function>(...)`. `defer_loading` applies per function."""

    type: Literal["namespace"] = "namespace"
    name: ToolName
    description: str
    tools: list[NamespaceMember] = Field(min_length=1)


class ToolSearchTool(WireModel):
    """Loads deferred tools: searched by the server (`execution: "server"`, the default) or by
    the client, which answers the `tool_search_call` with a `tool_search_output`."""

    type: Literal["tool_search"] = "tool_search"
    description: str | None = None
    execution: Literal["server", "client"] | None = None
    parameters: OpenJSON | None = None


class ProgrammaticToolCalling(WireModel):
    type: Literal["programmatic_tool_calling"] = "programmatic_tool_calling"


class Callers(CallerRules, WireModel):
    """A tool that declares who may call it (`allowed_callers`; omitted means `["direct"]`)."""

    allowed_callers: list[Literal["direct", "programmatic"]] | None = None


class TextFormat(WireModel):
    type: Literal["text"] = "text"


class GrammarFormat(WireModel):
    type: Literal["grammar"] = "grammar"
    syntax: Literal["lark", "regex"]
    definition: str


class CustomTool(Callers):
    """A tool whose one argument is free-form text, optionally constrained by a grammar."""

    type: Literal["custom"] = "custom"
    name: ToolName
    description: str | None = None
    format: Annotated[TextFormat | GrammarFormat, Field(discriminator="type")] | None = None
    defer_loading: bool | None = None
    async_: bool | None = Field(default=None, alias="async")


class CodeInterpreterTool(Callers):
    """Runs on OpenAI's side: here its results come from the scenario (see `hosted.py`)."""

    type: Literal["code_interpreter"] = "code_interpreter"
    container: str | OpenJSON

    @property
    def container_id(self) -> str:
        return self.container if isinstance(self.container, str) else "cntr_emulator"


class LocalEnvironment(WireModel):
    type: Literal["local"] = "local"
    skills: list[OpenJSON] | None = None


class ContainerAuto(WireModel):
    type: Literal["container_auto"] = "container_auto"
    file_ids: list[str] | None = None
    memory_limit: str | None = None
    network_policy: OpenJSON | None = None
    skills: list[OpenJSON] | None = None


class ContainerReference(WireModel):
    type: Literal["container_reference"] = "container_reference"
    container_id: str


ShellEnvironment: TypeAlias = Annotated[
    LocalEnvironment | ContainerAuto | ContainerReference, Field(discriminator="type")
]


class ShellTool(Callers):
    """`shell`: run by the client with environment absent or `local`, hosted otherwise."""

    type: Literal["shell"] = "shell"
    environment: ShellEnvironment | None = None

    @property
    def hosted(self) -> bool:
        return self.environment is not None and not isinstance(self.environment, LocalEnvironment)


class ApplyPatchTool(Callers):
    type: Literal["apply_patch"] = "apply_patch"


class LocalShellTool(WireModel):
    """`local_shell` has no allowed_callers: direct calls only."""

    type: Literal["local_shell"] = "local_shell"


class WebSearchTool(WireModel):
    type: Literal["web_search", "web_search_2025_08_26"]
    external_web_access: bool | None = None
    filters: OpenJSON | None = None
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: OpenJSON | None = None


class WebSearchPreviewTool(WireModel):
    type: Literal["web_search_preview", "web_search_preview_2025_03_11"]
    search_content_types: list[str] | None = None
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: OpenJSON | None = None


class FileSearchTool(WireModel):
    type: Literal["file_search"] = "file_search"
    vector_store_ids: list[str]
    filters: OpenJSON | None = None
    max_num_results: int | None = None
    ranking_options: OpenJSON | None = None


class ComputerTool(WireModel):
    type: Literal["computer"] = "computer"


class ComputerUsePreviewTool(WireModel):
    type: Literal["computer_use_preview"] = "computer_use_preview"
    display_height: int
    display_width: int
    environment: Literal["windows", "mac", "linux", "ubuntu", "browser"]


class ImageGenerationTool(WireModel):
    type: Literal["image_generation"] = "image_generation"
    action: str | None = None
    background: str | None = None
    complexity: str | None = None
    frame_count: int | None = None
    frame_duration_ms: int | None = None
    input_fidelity: str | None = None
    input_image_mask: OpenJSON | None = None
    model: str | None = None
    moderation: str | None = None
    output_compression: int | None = None
    output_format: str | None = None
    partial_images: int | None = None
    quality: str | None = None
    size: str | None = None
    svg: OpenJSON | bool | None = None


HostedTool: TypeAlias = (
    WebSearchTool | WebSearchPreviewTool | FileSearchTool | ComputerTool | ComputerUsePreviewTool | ImageGenerationTool
)
"""Tools the emulator echoes but never runs: a program or scenario that calls one fails, naming it."""


class OtherTool(OpenModel):
    """A tool type of the Responses API without a model of its own here yet: accepted and echoed."""

    type: str


_OTHER_TOOL_TYPES: frozenset[str] = frozenset()
"""Responses API tool types still carried as `OtherTool`; any type outside the API is refused."""

_TOOL_TAGS = {
    "function": "function",
    "programmatic_tool_calling": "programmatic_tool_calling",
    "custom": "custom",
    "shell": "shell",
    "apply_patch": "apply_patch",
    "local_shell": "local_shell",
    "namespace": "namespace",
    "tool_search": "tool_search",
    "web_search": "web_search",
    "web_search_2025_08_26": "web_search",
    "web_search_preview": "web_search_preview",
    "web_search_preview_2025_03_11": "web_search_preview",
    "file_search": "file_search",
    "computer": "computer",
    "computer_use_preview": "computer_use_preview",
    "image_generation": "image_generation",
    "mcp": "mcp",
    "code_interpreter": "code_interpreter",
}


def _tool_tag(value: Any) -> str | None:
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(tag, str):
        return None
    if tag in _OTHER_TOOL_TYPES or isinstance(value, OtherTool):
        return "other"
    return _TOOL_TAGS.get(tag, tag)


Tool: TypeAlias = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[ProgrammaticToolCalling, Tag("programmatic_tool_calling")]
    | Annotated[McpTool, Tag("mcp")]
    | Annotated[CodeInterpreterTool, Tag("code_interpreter")]
    | Annotated[CustomTool, Tag("custom")]
    | Annotated[ShellTool, Tag("shell")]
    | Annotated[ApplyPatchTool, Tag("apply_patch")]
    | Annotated[LocalShellTool, Tag("local_shell")]
    | Annotated[WebSearchTool, Tag("web_search")]
    | Annotated[WebSearchPreviewTool, Tag("web_search_preview")]
    | Annotated[FileSearchTool, Tag("file_search")]
    | Annotated[ComputerTool, Tag("computer")]
    | Annotated[ComputerUsePreviewTool, Tag("computer_use_preview")]
    | Annotated[ImageGenerationTool, Tag("image_generation")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[ToolSearchTool, Tag("tool_search")]
    | Annotated[OtherTool, Tag("other")],
    Discriminator(_tool_tag),
]


class FunctionToolChoice(WireModel):
    type: Literal["function"]
    name: str


class CustomToolChoice(WireModel):
    type: Literal["custom"]
    name: str


class KindToolChoice(WireModel):
    """`{"type": "shell"}`, `{"type": "apply_patch"}`: call that tool."""

    type: Literal["shell", "apply_patch"]


class ProgrammaticToolChoice(WireModel):
    type: Literal["programmatic_tool_calling"]


class AllowedToolsChoice(WireModel):
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[OpenJSON]


class HostedToolChoice(WireModel):
    """`{"type": "file_search"}` and the other `ToolChoiceTypes`: any other field is the 400
    `unknown_parameter` (before, an open model took and echoed it)."""

    type: Literal[
        "file_search",
        "web_search_preview",
        "computer",
        "computer_use_preview",
        "computer_use",
        "web_search_preview_2025_03_11",
        "image_generation",
        "code_interpreter",
    ]


HOSTED_CHOICE_TYPES: tuple[str, ...] = get_args(HostedToolChoice.model_fields["type"].annotation)
"""The SDK's `ToolChoiceTypes`: a hosted tool's choice, its `type` alone."""


class OtherToolChoice(OpenModel):
    """A `type` outside the API: refused by `check_tool_fields` (`invalid_value`)."""

    type: str


class McpToolChoice(WireModel):
    """`{"type": "mcp", "server_label": ..., "name": ...}` (the SDK's `ToolChoiceMcp`): call a tool
    of the `mcp` tool with that label (it must be in `tools`)."""

    type: Literal["mcp"]
    server_label: str
    name: str | None = None


def _choice_tag(value: Any) -> str:
    if isinstance(value, str):
        return "mode"
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if tag in ("shell", "apply_patch"):
        return "kind"
    if tag in HOSTED_CHOICE_TYPES:
        return "hosted"
    return tag if tag in ("function", "custom", "programmatic_tool_calling", "allowed_tools", "mcp") else "other"


ToolChoice: TypeAlias = Annotated[
    Annotated[Literal["none", "auto", "required"], Tag("mode")]
    | Annotated[FunctionToolChoice, Tag("function")]
    | Annotated[CustomToolChoice, Tag("custom")]
    | Annotated[KindToolChoice, Tag("kind")]
    | Annotated[ProgrammaticToolChoice, Tag("programmatic_tool_calling")]
    | Annotated[AllowedToolsChoice, Tag("allowed_tools")]
    | Annotated[McpToolChoice, Tag("mcp")]
    | Annotated[HostedToolChoice, Tag("hosted")]
    | Annotated[OtherToolChoice, Tag("other")],
    Discriminator(_choice_tag),
]
