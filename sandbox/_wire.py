"""JSON form of programs and outcomes, for the pipe between the pool and its workers."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from .outcome import (
    Completed,
    Failed,
    ImageOutput,
    Limits,
    Outcome,
    Output,
    PendingCall,
    Program,
    Suspended,
    TextOutput,
    ToolResult,
)

__all__ = ["outcome_from_json", "outcome_to_json", "program_from_json", "program_to_json"]


@functools.lru_cache(maxsize=64)
def _limits_json(limits: Limits) -> dict[str, Any]:
    return dataclasses.asdict(limits)


def program_to_json(program: Program) -> dict[str, Any]:
    return {
        "code": program.code,
        "tools": list(program.tools),
        "seed": str(program.seed),  # may exceed a double's integer range
        "clock_ms": program.clock_ms,
        "journal": [[r.name, r.arguments, r.output, r.is_error] for r in program.journal],
        "limits": _limits_json(program.limits),
        "text_tools": list(program.text_tools),
    }


def program_from_json(d: dict[str, Any]) -> Program:
    return Program(
        code=d["code"],
        tools=tuple(d["tools"]),
        seed=int(d["seed"]),
        clock_ms=d["clock_ms"],
        journal=tuple(ToolResult(n, a, o, e) for n, a, o, e in d["journal"]),
        limits=Limits(**d["limits"]),
        text_tools=tuple(d.get("text_tools", ())),
    )


def _outputs_to_json(outputs: tuple[Output, ...]) -> list[dict[str, str]]:
    return [
        {"type": "text", "text": o.text} if isinstance(o, TextOutput) else {"type": "image", "url": o.url}
        for o in outputs
    ]


def _outputs_from_json(items: list[dict[str, str]]) -> tuple[Output, ...]:
    return tuple(TextOutput(o["text"]) if o["type"] == "text" else ImageOutput(o["url"]) for o in items)


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    d: dict[str, Any] = {"status": outcome.status, "outputs": _outputs_to_json(outcome.outputs), "calls": outcome.calls}
    if isinstance(outcome, Suspended):
        d["pending"] = [[p.index, p.name, p.arguments] for p in outcome.pending]
    elif isinstance(outcome, Failed):
        d["kind"] = outcome.kind
        d["message"] = outcome.message
    return d


def outcome_from_json(d: dict[str, Any]) -> Outcome:
    outputs = _outputs_from_json(d["outputs"])
    if d["status"] == "completed":
        return Completed(outputs, d["calls"])
    if d["status"] == "suspended":
        return Suspended(tuple(PendingCall(i, n, a) for i, n, a in d["pending"]), outputs, d["calls"])
    return Failed(d["kind"], d["message"], outputs, d["calls"])
