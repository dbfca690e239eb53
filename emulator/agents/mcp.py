"""MCP tools in agent sessions, and their approvals.

An agent's MCP tool (`AgentToolConfigParamMcp`, openai 3.51 to 3.57): `{type: "mcp", server_label,
transport: {type: "http", server_url, authorization?, headers?}, allowed_tools?, connection_origin?,
credential_id?, request_metadata?, required?}`. The session plays it as the Responses API's `mcp`
tool (`responses_tool`): the session's programs call `tools.<server_label>.<tool>(args)` and the
emulator's MCP client calls the server. The type has no `require_approval`: a call needs the
user's approval unless the server lists the tool as read-only (`annotations.readOnlyHint`), the
MCP specification's mark of a tool without side effects.

A call that needs approval pauses the program: the step's `mcp_approval_request` becomes the
session's required action `{type: "mcp_approval_request", request_id, turn_id, request:
{type: "mcp_tool_call", server_label, name, arguments, message}}`, answered by
`agent.session.input.mcp_approval_request_result` with `decision` `approve`, `deny` or `cancel`
("Cancel dismisses this request without cancelling the session or turn": the call is not made,
as for a denial, and the turn goes on). The answer goes into the transcript as the Responses API's
`mcp_approval_response`, with the request's caller, and the program resumes. With the session's
`review: "auto_review"` ("Review eligible actions automatically. Deny manual approval fallbacks.")
no request is surfaced: the emulator reviews nothing, so every call that needs approval is such a
fallback and is denied. A direct MCP call (a scenario's `mcp:` turn) is shown as the session's
`mcp_call` item.

Not emulated: the `stdio` transport, `connection_origin: "environment"` and `credential_id` (they
need the session's environment or a stored credential), and `transport.authorization` (the
persisted agent shows its transport back; a header in `transport.headers` carries a credential):
each is a 400 saying so.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.wire.items import OpenJSON, WireModel

__all__ = [
    "ApprovalDecision",
    "McpApprovalResult",
    "McpToolParam",
    "approval_action",
    "approval_response",
    "check_mcp",
    "dump_mcp",
    "mcp_call_item",
    "responses_tool",
]


class HttpTransport(WireModel):
    type: Literal["http"]
    server_url: str
    authorization: str | None = None
    headers: dict[str, str] | None = None


class StdioTransport(WireModel):
    type: Literal["stdio"]
    command: str
    cwd: str
    args: list[str] | None = None
    env: dict[str, str] | None = None
    env_vars: list[str] | None = None


class McpToolParam(WireModel):
    type: Literal["mcp"]
    server_label: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    transport: HttpTransport | StdioTransport = Field(discriminator="type")
    allowed_tools: list[str] | None = None
    connection_origin: Literal["service", "environment"] | None = None
    credential_id: str | None = None
    request_metadata: dict[str, OpenJSON] | None = None
    required: bool | None = None


def check_mcp(tool: McpToolParam, where: str) -> None:
    """Refuse what a session cannot play (see the module's docstring)."""
    if isinstance(tool.transport, StdioTransport):
        raise messages.stdio_mcp_unsupported(f"{where}.transport.type")
    if tool.transport.authorization is not None:
        raise messages.mcp_authorization_unsupported(f"{where}.transport.authorization")
    if tool.connection_origin == "environment":
        raise messages.mcp_environment_origin_unsupported(f"{where}.connection_origin")
    if tool.credential_id is not None:
        raise messages.mcp_credential_unsupported(f"{where}.credential_id")


def dump_mcp(tool: McpToolParam) -> dict[str, Any]:
    """As the API returns it (`AgentToolResourceMcp`): defaults filled in."""
    transport = tool.transport
    assert isinstance(transport, HttpTransport)
    shown = {"type": "http", "server_url": transport.server_url, "headers": transport.headers or {}}
    return {
        "type": "mcp",
        "server_label": tool.server_label,
        "transport": shown,
        "allowed_tools": tool.allowed_tools,
        "connection_origin": tool.connection_origin or "service",
        "credential_id": None,
        "request_metadata": tool.request_metadata or {},
        "required": bool(tool.required),
    }


def responses_tool(tool: dict[str, Any], ptc: bool) -> dict[str, Any]:
    """The Responses API `mcp` tool a session step plays for an agent's MCP tool."""
    transport = tool["transport"]
    entry: dict[str, Any] = {
        "type": "mcp",
        "server_label": tool["server_label"],
        "server_url": transport["server_url"],
        "require_approval": {"never": {"read_only": True}},
        "allowed_callers": ["direct", "programmatic"] if ptc else ["direct"],
    }
    if tool.get("allowed_tools") is not None:
        entry["allowed_tools"] = tool["allowed_tools"]
    if transport.get("headers"):
        entry["headers"] = transport["headers"]
    return entry


class ApprovalDecision(WireModel):
    type: Literal["mcp_tool_call"]
    decision: Literal["approve", "deny", "cancel"]


class McpApprovalResult(WireModel):
    type: Literal["agent.session.input.mcp_approval_request_result"]
    request_id: str
    response: ApprovalDecision


def approval_action(out: dict[str, Any], turn_id: str) -> dict[str, Any]:
    """The session's required action for a step's `mcp_approval_request` item."""
    try:
        arguments = json.loads(out["arguments"]) if out.get("arguments") else None
    except json.JSONDecodeError:
        arguments = None
    return {
        "type": "mcp_approval_request",
        "request_id": out["id"],
        "turn_id": turn_id,
        "request": {
            "type": "mcp_tool_call",
            "server_label": out["server_label"],
            "name": out["name"],
            "arguments": arguments if isinstance(arguments, dict) else None,
            "message": messages.mcp_approval_question(out["name"], out["server_label"]),
        },
    }


def approval_response(request: dict[str, Any], decision: str) -> dict[str, Any]:
    """The transcript's `mcp_approval_response` for a decision: `approve` runs the call; `deny`,
    `cancel` and `auto_review` (the session's `review: "auto_review"`) do not."""
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": request["request_id"],
        "approve": decision == "approve",
    }
    if decision == "cancel":
        item["reason"] = "The user dismissed the approval request."
    elif decision == "auto_review":
        item["reason"] = "Denied by the session's automatic review (a manual approval fallback is denied)."
    if request.get("caller") is not None:
        item["caller"] = request["caller"]
    return item


def mcp_call_item(out: dict[str, Any]) -> dict[str, Any]:
    """A step's direct `mcp_call` as the session's `mcp_call` item (`AgentMcpCallItem`)."""
    try:
        arguments = json.loads(out["arguments"]) if out.get("arguments") else {}
    except json.JSONDecodeError:
        arguments = out["arguments"]
    failed = out.get("error") is not None or out.get("status") == "failed"
    return {
        "id": out["id"],
        "type": "mcp_call",
        "server_label": out["server_label"],
        "name": out["name"],
        "arguments": arguments,
        "output": out.get("output"),
        "error": out.get("error"),
        "status": "failed" if failed else "completed",
    }
