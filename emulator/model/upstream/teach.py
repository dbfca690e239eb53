"""What a model upstream is told about a request's tools: the direct-callable ones as ordinary
functions, and, when the request enables Programmatic Tool Calling, one code-execution function
whose description (`prompt.md`, versioned) teaches the runtime and declares every tool a program
may call as a TypeScript-style signature (`typescript.py`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ptc_emulator.emulator.model.runtime import BoundTools, Hosted
from ptc_emulator.emulator.model.upstream.transcript import upstream_name
from ptc_emulator.emulator.model.upstream.typescript import Signature, declarations
from ptc_emulator.emulator.tools.kinds import FUNCTION

__all__ = ["CODE_TOOL", "PROMPT_VERSION", "Function", "Teaching", "code_description", "prompt_template", "teach"]

CODE_TOOL = "run_javascript"
"""The code-execution function's name, as the upstream sees it."""
_CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The whole JavaScript program."}},
    "required": ["code"],
    "additionalProperties": False,
}


@functools.cache
def prompt_template() -> str:
    """`prompt.md` without its version comment."""
    text = resources.files("ptc_emulator.emulator.model.upstream").joinpath("prompt.md").read_text("utf-8")
    first, _, rest = text.partition("\n")
    return rest if first.startswith("<!--") else text


def _version() -> str:
    text = resources.files("ptc_emulator.emulator.model.upstream").joinpath("prompt.md").read_text("utf-8")
    found = re.match(r"<!-- prompt (v\d+)", text)
    return found.group(1) if found else "v0"


PROMPT_VERSION = _version()


def code_description(signatures: list[Signature]) -> str:
    """The code function's description for these program tools."""
    return prompt_template().replace("{declarations}", declarations(signatures)).strip()


@dataclass(frozen=True)
class Function:
    """A function as the upstream is given it (either protocol renders it)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Teaching:
    """The upstream's functions for one response, and the request's tool each name stands for."""

    functions: list[Function] = field(default_factory=list)
    direct: dict[str, str] = field(default_factory=dict)
    """Upstream function name -> the request's (qualified) tool name."""
    programs: bool = False
    """The code function is among them."""


def _parameters(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict) and schema:
        return schema
    return {"type": "object", "properties": {}}


async def teach(tools: BoundTools, hosted: Hosted, *, ptc: bool) -> Teaching:
    """The functions for a response whose tools are `tools` (and `hosted`'s MCP servers)."""
    taught = Teaching()
    for binding in tools.bindings.values():
        if not binding.direct or binding.kind is not FUNCTION or binding.tool is None:
            continue
        name = upstream_name(binding.name)
        taught.direct[name] = binding.name
        tool = binding.tool
        taught.functions.append(Function(name, tool.description or "", _parameters(tool.parameters)))
    if not ptc:
        return taught
    signatures: list[Signature] = []
    for name in tools.program_tools:
        bound = tools.bindings.get(name)
        tool = bound.tool if bound is not None else None
        signatures.append(
            Signature(
                name,
                getattr(tool, "description", None),
                getattr(tool, "parameters", None) if bound is not None and bound.kind is FUNCTION else None,
                getattr(tool, "output_schema", None),
                text_argument=bound is not None and bound.kind.text_argument,
            )
        )
    for label, mcp in hosted.mcp_tools.items():
        if not mcp.programmatic:
            continue
        listing = await hosted.listing(mcp)
        for entry in listing.tools:
            signatures.append(
                Signature(
                    f"{label}.{entry['name']}",
                    entry.get("description"),
                    entry.get("input_schema"),
                    None,
                )
            )
    taught.functions.append(Function(CODE_TOOL, code_description(signatures), _CODE_PARAMETERS))
    taught.programs = True
    return taught
