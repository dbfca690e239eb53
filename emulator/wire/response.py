"""The Response object: every field the contract marks required, request settings echoed."""

from __future__ import annotations

import enum
from typing import Any

from ptc_emulator.emulator.wire.items import dump
from ptc_emulator.emulator.wire.tools import FunctionTool

__all__ = ["ResponseStatus", "echo_tools"]


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


def echo_tools(request: Any) -> list[dict[str, Any]]:
    """The request's tools as a Response carries them (function tools with their defaults)."""
    echoed = []
    for tool in request.tools or ():
        data: dict[str, Any] = dump(tool)
        if isinstance(tool, FunctionTool):
            data.setdefault("parameters", None)
            data.setdefault("strict", True)
        echoed.append(data)
    return echoed
