"""What a scenario scripts for the tools that run on OpenAI's side (its `hosted:` section); the
runtime that answers with it is `hosted.py`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from ptc_emulator.emulator.tools.mcp import McpServerSpec
from ptc_emulator.emulator.wire.items import OpenJSON, WireModel

__all__ = ["CodeInterpreterSpec", "HostedScript", "ShellSpec"]


class CodeInterpreterSpec(WireModel):
    code: str | None = None
    """A regular expression searched in the code; omitted matches any."""
    logs: str | None = None
    """Shorthand for `outputs: [{type: logs, logs: ...}]`."""
    outputs: list[OpenJSON] = Field(default_factory=list)
    error: str | None = None
    """The code fails: the call's status is `failed` and a program's promise rejects with this."""

    @field_validator("code")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    def all_outputs(self) -> list[dict[str, Any]]:
        extra = [{"type": "logs", "logs": self.logs}] if self.logs is not None else []
        return [*extra, *self.outputs]


class ShellSpec(WireModel):
    command: str | None = None
    """A regular expression the whole command must match; omitted matches any."""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    timeout: bool = False

    @field_validator("command")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    def output(self) -> dict[str, Any]:
        outcome: dict[str, Any] = {"type": "timeout"} if self.timeout else {"type": "exit", "exit_code": self.exit_code}
        return {"stdout": self.stdout, "stderr": self.stderr, "outcome": outcome}


class HostedScript(WireModel):
    """Results for the tools that run on OpenAI's side (a scenario's `hosted:` section)."""

    mcp_servers: dict[str, McpServerSpec] = Field(default_factory=dict)
    code_interpreter: list[CodeInterpreterSpec] = Field(default_factory=list)
    shell: list[ShellSpec] = Field(default_factory=list)
