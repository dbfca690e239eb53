"""The Agents API's request bodies and the agent object (beta, `OpenAI-Beta: agents=v1`).

Field lists follow openai 3.63's `types/beta/agent_*_params.py` and `agents/session_*_params.py`.
What the emulator can honour is accepted; what it cannot (other environments, web search and
computer use tools, subagents, vaults) is refused with a 400 that says so, never accepted and
ignored. Two fields the hosted API itself accepts and ignores are accepted here the same way:
`compaction.async` ("accepted for compatibility and ignored", always false), and a session's
`spend_control` limit, kept and shown but never reached, as the emulator charges nothing
(docs/agents.md, "Spend control").
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator, model_validator

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.agents.mcp import McpApprovalResult, McpToolParam, check_mcp, dump_mcp, responses_tool
from ptc_emulator.emulator.rules.contract import OFF_LOOP_SCHEMA_VALUES, schema_problem, schema_weight
from ptc_emulator.emulator.wire.items import OpenJSON, OpenModel, WireModel
from ptc_emulator.emulator.wire.request import (
    Model,
    check_json,
    check_stream_options,
    metadata_few_keys,
    metadata_overfull,
)
from ptc_emulator.emulator.wire.stepped import stepped

__all__ = [
    "MAX_SESSION_TOOLS_BYTES",
    "MULTI_AGENT_OFF",
    "AgentCreate",
    "AgentUpdate",
    "EventsBody",
    "FunctionToolParam",
    "InputMessage",
    "InputEvent",
    "McpApprovalResult",
    "SessionAgent",
    "SessionCreate",
    "SessionUpdate",
    "SpendControlParam",
    "ToolResult",
    "agent_object",
    "message_text_parts",
    "persisted_tools",
    "ptc_enabled",
    "session_agent",
    "session_tools",
    "stored_agent",
]

ToolName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[a-zA-Z0-9_-]+$")]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
ServiceTier = Literal["auto", "default", "flex", "priority", "fast", "ultrafast"]
MAX_TOOLS_BYTES = 3 * 2**20
"""An agent's tools (create, update), in compact UTF-8 JSON."""
MAX_SESSION_TOOLS_BYTES = 8 * 2**20
"""A session's `agent.tools` (openai 3.63: "within 8 MiB (8,388,608 bytes) of compact UTF-8 JSON")."""


class FunctionToolParam(WireModel):
    type: Literal["function"]
    name: ToolName
    description: str
    parameters: OpenJSON
    defer_loading: bool | None = None
    async_: bool | None = Field(default=None, alias="async")


class PTCToolParam(WireModel):
    type: Literal["programmatic_tool_calling"]
    enabled: bool | None = None
    """Whether tools can be called from model-generated code; defaults to true."""


class ToolSearchParam(WireModel):
    """`{"type": "tool_search"}`: deferred functions (`defer_loading: true`) stay invisible to the
    session's programs and direct calls until a search loads them, as in the Responses API."""

    type: Literal["tool_search"]


class OtherToolParam(OpenModel):
    """web_search, computer_use, automations: refused in `check_tools`."""

    type: str


def _tool_tag(value: Any) -> str:
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if tag == "mcp":  # without a transport it names no server: refused as a tool type (`check_tools`)
        has_transport = "transport" in value if isinstance(value, dict) else hasattr(value, "transport")
        return "mcp" if has_transport else "other"
    return tag if tag in ("function", "programmatic_tool_calling", "tool_search") else "other"


AgentToolParam: TypeAlias = Annotated[
    Annotated[FunctionToolParam, Tag("function")]
    | Annotated[PTCToolParam, Tag("programmatic_tool_calling")]
    | Annotated[ToolSearchParam, Tag("tool_search")]
    | Annotated[McpToolParam, Tag("mcp")]
    | Annotated[OtherToolParam, Tag("other")],
    Discriminator(_tool_tag),
]


class ReasoningParam(WireModel):
    effort: Effort | None = None
    summary: Literal["concise", "detailed", "auto"] | None = None


class PlainFormatParam(WireModel):
    """`TextFormatParamText` (openai 3.63): ordinary text."""

    type: Literal["text"]


class SchemaFormatParam(WireModel):
    """`TextFormatParamJSONSchema` (openai 3.63): text that matches a JSON Schema. Its keys are
    the SDK's two, and its schema is held to what a Responses json_schema format's is
    (`check_agent`): any key and any schema were kept and shown back before."""

    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


TextFormatParam = Annotated[PlainFormatParam | SchemaFormatParam, Field(discriminator="type")]


class TextParam(WireModel):
    format: TextFormatParam | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class MultiAgentParam(WireModel):
    enabled: bool
    max_concurrent_subagents: int | None = None


MULTI_AGENT_OFF: dict[str, Any] = {"enabled": False, "max_concurrent_subagents": None}
"""An agent's `multi_agent` as every agent shows it: subagents are refused (`check_agent`), and the
limit is "null when disabled" (openai 3.63)."""


class CompactionParam(WireModel):
    async_: bool | None = Field(default=None, alias="async")
    """"Accepted for compatibility and ignored. Context compaction is always blocking." (openai
    3.63): the agent shows `async: false` whatever was sent."""


class ExperimentalParam(WireModel):
    time_awareness: bool | None = None


def _metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is not None:
        if len(value) > 16:
            raise ValueError(messages.metadata_too_many_keys())
        for key, item in value.items():  # worded as a response's and a conversation's metadata
            if len(key) > 64:
                raise ValueError(messages.metadata_key_too_long(key))
            if len(item) > 512:
                raise ValueError(messages.metadata_value_too_long(key))
    return value


class _Checked(WireModel):
    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        if metadata_overfull(value):
            return value  # refused for that, its values not walked first
        check_json(value)
        return value


class AgentFields(_Checked):
    """What an agent is made of; shared by create, update and a session's inline agent. An empty
    `model` is refused as a response create refuses it (`empty_string`)."""

    model: Model | None = None
    instructions: str | None = None
    name: str | None = None
    metadata: dict[str, str] | None = None
    reasoning: ReasoningParam | None = None
    text: TextParam | None = None
    tools: list[AgentToolParam] | None = None
    multi_agent: MultiAgentParam | None = None
    service_tier: ServiceTier | None = None
    compaction: CompactionParam | None = None
    experimental: ExperimentalParam | None = None

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _check_metadata = field_validator("metadata")(_metadata)
    _tools_stepped = field_validator("tools", mode="wrap")(stepped)


class AgentCreate(AgentFields):
    model: Model  # required on create


class AgentUpdate(AgentFields):
    pass


class SessionAgent(AgentFields):
    """A session's inline `agent`: with `agent_id` its fields override the saved agent."""


class InputText(WireModel):
    type: Literal["input_text"]
    text: str


class InputImage(WireModel):
    type: Literal["input_image"]
    image_url: str


InputContent: TypeAlias = Annotated[InputText | InputImage, Field(discriminator="type")]


class InputMessage(WireModel):
    role: Literal["user"]
    content: list[InputContent]
    type: Literal["message"] | None = None

    _content_stepped = field_validator("content", mode="wrap")(stepped)


class SpendControlParam(WireModel):
    """A session's spending limit: `limit` is required, and may be null (no limit)."""

    limit: Annotated[int, Field(ge=1)] | None
    """Positive USD cents, or null to remove the limit."""


class SessionCreate(_Checked):
    environment: OpenJSON
    agent: SessionAgent | None = None
    agent_id: str | None = None
    input: str | list[InputMessage] | None = None
    metadata: dict[str, str] | None = None
    prompt_cache_options: OpenJSON | None = None
    review: Literal["none", "auto_review"] | None = None
    spend_control: SpendControlParam | None = None
    """Omission or null: an unlimited session."""
    stream: bool | None = None
    stream_options: OpenJSON | None = None
    vault_ids: list[str] | None = None

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _check_metadata = field_validator("metadata")(_metadata)
    _stream_options_checked = field_validator("stream_options")(check_stream_options)
    _input_stepped = field_validator("input", mode="wrap")(stepped)


class SessionAgentUpdate(WireModel):
    model: Model | None = None
    reasoning: ReasoningParam | None = None
    service_tier: ServiceTier | None = None
    tools: list[AgentToolParam] | None = None

    _tools_stepped = field_validator("tools", mode="wrap")(stepped)


class SessionUpdate(_Checked):
    agent: SessionAgentUpdate | None = None
    metadata: dict[str, str] | None = None
    prompt_cache_options: OpenJSON | None = None
    review: Literal["none", "auto_review"] | None = None
    spend_control: SpendControlParam | None = None
    """Omit to retain the limit; null or a null limit removes it without resetting spend."""
    vault_ids: list[str] | None = None
    """Omit to retain the session's vaults; null or [] clears them (a session has none here: a
    non-empty list gets the refusal a create gets)."""

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _check_metadata = field_validator("metadata")(_metadata)


# ---- input events -----------------------------------------------------------------------------


class ToolResult(WireModel):
    type: Literal["agent.session.input.tool_result"]
    turn_id: str
    call_id: str
    success: bool
    output: str | list[InputContent] | None = None
    error: str | None = None

    def answer(self) -> dict[str, Any]:
        """What the result says, comparable with an earlier delivery of the same call's result."""
        output = self.output if isinstance(self.output, str | None) else [p.model_dump() for p in self.output]
        return {"success": self.success, "output": output, "error": self.error}


class MessageInput(WireModel):
    type: Literal["agent.session.input.message"]
    input: list[InputMessage] = Field(min_length=1)

    _input_stepped = field_validator("input", mode="wrap")(stepped)


class CancelInput(WireModel):
    type: Literal["agent.session.input.cancel"]


class ApprovalResult(OpenModel):
    """Computer-use approval results: no such request is ever pending here."""

    type: Literal["agent.session.input.computer_use_approval_request_result"]
    request_id: str


InputEvent: TypeAlias = Annotated[
    ToolResult | MessageInput | CancelInput | McpApprovalResult | ApprovalResult, Field(discriminator="type")
]


class EventsBody(_Checked):
    events: list[InputEvent] = Field(min_length=1)

    _events_stepped = field_validator("events", mode="wrap")(stepped)


# ---- objects ----------------------------------------------------------------------------------


def check_tools(tools: list[AgentToolParam], param: str = "tools", max_bytes: int = MAX_TOOLS_BYTES) -> None:
    """Refuse what the emulator cannot honour; the rest is a function or the PTC switch.
    `max_bytes`: the list's bound in compact UTF-8 JSON (an agent's 3 MiB, a session's 8 MiB)."""
    names: set[str] = set()
    labels: set[str] = set()
    for n, tool in enumerate(tools):
        where = f"{param}[{n}]"
        if isinstance(tool, McpToolParam):
            if tool.server_label in labels:
                raise messages.duplicate_mcp_label(tool.server_label, f"{where}.server_label")
            labels.add(tool.server_label)
            check_mcp(tool, where)
        if isinstance(tool, OtherToolParam) and tool.type == "mcp":
            raise messages.mcp_without_transport(f"{where}.type")
        if isinstance(tool, OtherToolParam):
            raise messages.agent_tool_unsupported(tool.type, f"{where}.type")
        if isinstance(tool, FunctionToolParam):
            if tool.name in names:
                raise messages.duplicate_tool_name(tool.name, f"{where}.name")
            names.add(tool.name)
            problem = schema_problem(tool.parameters)
            if problem is not None:
                raise messages.invalid_function_schema(tool.name, problem, f"{where}.parameters")
            if tool.defer_loading and not any(isinstance(t, ToolSearchParam) for t in tools):
                raise messages.agent_deferred_needs_search(f"{where}.defer_loading")
            if tool.async_:
                raise messages.async_function_tool(f"{where}.async")
    if sum(isinstance(t, ToolSearchParam) for t in tools) > 1:
        raise messages.at_most_one("tool_search", param)
    if sum(isinstance(t, PTCToolParam) for t in tools) > 1:
        raise messages.at_most_one("programmatic_tool_calling", param)
    if len(json.dumps([dump_tool(t) for t in tools], separators=(",", ":")).encode()) > max_bytes:
        raise messages.agent_tools_too_large(max_bytes // 2**20, param)


def holds_large_schemas(tools: list[AgentToolParam] | None) -> bool:
    """Whether the function tools' `parameters` hold more than `OFF_LOOP_SCHEMA_VALUES` values
    together (each distinct pattern counted as `PATTERN_VALUES`): they are then checked in a worker
    thread first (`check_schemas`)."""
    left = OFF_LOOP_SCHEMA_VALUES
    for tool in tools or ():
        if isinstance(tool, FunctionToolParam):
            left -= schema_weight(tool.parameters, left)
            if left < 0:
                return True
    return False


def check_schemas(tools: list[AgentToolParam] | None) -> None:
    """Each function tool's `parameters` checked against the meta-schema, for a worker thread:
    the verdict is kept (`schema_problem`), so `check_tools` then finds it on the event loop
    without checking again, and refuses with its own 400."""
    for tool in tools or ():
        if isinstance(tool, FunctionToolParam):
            schema_problem(tool.parameters)


def check_agent(fields: AgentFields, param: str = "", max_tools_bytes: int = MAX_TOOLS_BYTES) -> None:
    prefix = f"{param}." if param else ""
    if fields.tools:
        check_tools(fields.tools, f"{prefix}tools", max_tools_bytes)
    if fields.multi_agent is not None and fields.multi_agent.enabled:
        raise messages.subagents_unsupported(f"{prefix}multi_agent.enabled")
    found = fields.text.format if fields.text is not None else None
    if isinstance(found, SchemaFormatParam):
        problem = schema_problem(found.schema_)
        if problem is not None:
            raise messages.invalid_format_schema("json_schema", problem, f"{prefix}text.format.schema")


def dump_tool(tool: AgentToolParam) -> dict[str, Any]:
    """A tool as the API returns it (`PersistedAgentTool`): defaults filled in."""
    if isinstance(tool, FunctionToolParam):
        out: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "defer_loading": bool(tool.defer_loading),
        }
        if tool.async_ is not None:
            out["async"] = tool.async_
        return out
    if isinstance(tool, PTCToolParam):
        return {"type": "programmatic_tool_calling", "enabled": tool.enabled is not False}
    if isinstance(tool, ToolSearchParam):
        return {"type": "tool_search"}
    if isinstance(tool, McpToolParam):
        return dump_mcp(tool)
    return tool.model_dump(mode="json")


def persisted_tools(tools: list[AgentToolParam] | None) -> list[dict[str, Any]]:
    return [dump_tool(t) for t in tools or ()]


def ptc_enabled(tools: list[dict[str, Any]]) -> bool:
    """On unless an entry says `enabled: false` (a type-only entry, or none at all, keeps it on)."""
    return not any(t["type"] == "programmatic_tool_calling" and t.get("enabled") is False for t in tools)


def session_tools(agent_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API tools a session step plays for the agent's persisted tools: its
    functions (callable by programs too, with PTC on), its tool search, its MCP servers, and the
    PTC tool unless the agent switched it off."""
    ptc = ptc_enabled(agent_tools)
    tools: list[dict[str, Any]] = []
    for tool in agent_tools:
        if tool["type"] == "function":
            entry = {k: tool[k] for k in ("type", "name", "description", "parameters")}
            if tool.get("defer_loading"):
                entry["defer_loading"] = True
            if ptc:
                entry["allowed_callers"] = ["direct", "programmatic"]
            tools.append(entry)
        elif tool["type"] == "tool_search":
            tools.append({"type": "tool_search"})
        elif tool["type"] == "mcp":
            tools.append(responses_tool(tool, ptc))
    if ptc:
        tools.append({"type": "programmatic_tool_calling"})
    return tools


def _settings(fields: AgentFields, base: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's configuration after applying the fields that were given over `base`."""
    given = fields.model_fields_set
    out: dict[str, Any] = dict(
        base
        or {
            "model": None,
            "instructions": None,
            "name": None,
            "metadata": {},
            "reasoning": {"effort": None, "summary": None},
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tools": [],
            "multi_agent": dict(MULTI_AGENT_OFF),
            "service_tier": "auto",
            "compaction": {"async": False},
            "experimental": {"time_awareness": False},
        }
    )
    if "model" in given and fields.model is not None:
        out["model"] = fields.model
    for key in ("instructions", "name"):
        if key in given:
            out[key] = getattr(fields, key)
    if "metadata" in given:
        out["metadata"] = dict(fields.metadata or {})
    if "reasoning" in given:
        r = fields.reasoning
        out["reasoning"] = {"effort": r.effort if r else None, "summary": r.summary if r else None}
    if "text" in given:
        t = fields.text
        fmt = t.format.model_dump(mode="json", by_alias=True) if t and t.format else {"type": "text"}
        out["text"] = {"format": fmt, "verbosity": (t.verbosity if t else None) or "medium"}
    if "tools" in given:
        out["tools"] = persisted_tools(fields.tools)
    out["multi_agent"] = dict(MULTI_AGENT_OFF)  # whatever was sent (and stored by an earlier version)
    if "service_tier" in given:
        out["service_tier"] = fields.service_tier or "auto"
    out["compaction"] = {"async": False}  # `async` is accepted and ignored (openai 3.63): always false
    if "experimental" in given and fields.experimental is not None:
        if fields.experimental.time_awareness is not None:
            out["experimental"] = {"time_awareness": fields.experimental.time_awareness}
    return out


def agent_object(agent_id: str, fields: AgentFields, *, now: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `Agent` object after create (no base) or update (base: the stored agent)."""
    settings = _settings(fields, base)
    created = base["created_at"] if base else now
    return {**settings, "id": agent_id, "object": "agent", "created_at": created, "updated_at": now}


def stored_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """An `Agent` as stored, as this version shows it (an earlier one kept `multi_agent` without
    its null limit)."""
    return {**agent, "multi_agent": dict(MULTI_AGENT_OFF)}


_SESSION_AGENT_KEYS = (
    "model",
    "instructions",
    "name",
    "reasoning",
    "text",
    "tools",
    "multi_agent",
    "service_tier",
    "compaction",
    "experimental",
)


def session_agent(agent_id: str, fields: SessionAgent | None, saved: dict[str, Any] | None) -> dict[str, Any]:
    """The session's `agent`: a saved agent with the inline fields over it, or the inline agent."""
    base = {k: saved[k] for k in _SESSION_AGENT_KEYS} if saved else None
    if base is not None:
        base["metadata"] = {}
    settings = _settings(fields or SessionAgent(), base)
    out = {k: settings[k] for k in _SESSION_AGENT_KEYS}
    out["id"] = agent_id
    return out


def message_text_parts(message: InputMessage) -> list[dict[str, Any]]:
    return [part.model_dump(mode="json") for part in message.content]
