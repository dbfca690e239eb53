"""The Response object: every field the contract marks required, request settings echoed."""

from __future__ import annotations

import enum
from typing import Any

from ptc_emulator.emulator.wire.items import dump
from ptc_emulator.emulator.wire.tools import FunctionTool

__all__ = ["REDACTED", "ResponseStatus", "echo_tools", "redacted"]


class ResponseStatus(enum.StrEnum):
    """`Response.status`, as the API spells it."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self not in (ResponseStatus.QUEUED, ResponseStatus.IN_PROGRESS)


REDACTED = "[redacted]"
"""What an `mcp` tool's header values are echoed as: the names stay, the credentials do not."""


def redacted(tool: dict[str, Any]) -> dict[str, Any]:
    """An `mcp` tool declaration without its credentials (`authorization` dropped, header values
    replaced), as the Response echoes it and as it is stored and journaled; any other tool as it is."""
    if tool.get("type") != "mcp" or not ("authorization" in tool or "headers" in tool):
        return tool
    out = {k: v for k, v in tool.items() if k != "authorization"}
    if isinstance(out.get("headers"), dict):
        out["headers"] = dict.fromkeys(out["headers"], REDACTED)
    return out


def echo_tools(request: Any) -> list[dict[str, Any]]:
    """The request's tools as a Response carries them (function tools with their defaults, MCP
    tools without their credentials)."""
    echoed = []
    for tool in request.tools or ():
        data: dict[str, Any] = dump(tool)
        if isinstance(tool, FunctionTool):
            data.setdefault("parameters", None)
            data.setdefault("strict", True)
        echoed.append(redacted(data))
    return echoed
