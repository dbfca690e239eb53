"""JSON form of programs and outcomes, for the pipe between the pool and its workers."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
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

__all__ = [
    "MEMOS",
    "digest_and_size",
    "extend_digest",
    "journal_to_json",
    "outcome_from_json",
    "outcome_to_json",
    "program_from_json",
    "program_key",
    "program_to_json",
]


@functools.lru_cache(maxsize=64)
def _limits_json(limits: Limits) -> dict[str, Any]:
    return dataclasses.asdict(limits)


def journal_to_json(journal: tuple[ToolResult, ...]) -> list[list[Any]]:
    return [[r.name, r.arguments, r.output, r.is_error] for r in journal]


_JOURNAL_ROOT = hashlib.sha256(b"ptc-journal").hexdigest()


def digest_and_size(journal: list[Any]) -> tuple[str, int]:
    """A journal's digest (wire form, as `journal_to_json` gives it or a worker parsed it) and
    the length of its text: how a tail-only resume names the prefix it continues, so that the
    worker holding the program checks it instead of being sent it. The digest is a chain over
    the entries (`extend_digest` from the empty journal's), so the digest of a longer journal is
    made from a prefix's and the rest alone."""
    return extend_digest(_JOURNAL_ROOT, 1, journal)


def extend_digest(digest: str, size: int, entries: list[Any]) -> tuple[str, int]:
    """The digest and text length of a journal whose prefix has `digest` and `size`, extended by
    `entries` (wire form): each entry's digest is sha256 of the one before it (32 bytes) and the
    entry's compact JSON, and each entry adds its JSON and a separator to the size. The empty
    journal's digest is sha256(b"ptc-journal"), its size 1 (`[]` has 2 characters, `[e]` 2 more
    than `e`: the size is the compact JSON text's length for any journal but the empty one)."""
    chained = bytes.fromhex(digest)
    for entry in entries:
        text = json.dumps(entry, separators=(",", ":")).encode("utf-8")
        chained = hashlib.sha256(chained + text).digest()
        size += len(text) + 1
    return chained.hex(), size


def program_to_json(program: Program) -> dict[str, Any]:
    return {
        "code": program.code,
        "tools": list(program.tools),
        "seed": str(program.seed),  # may exceed a double's integer range
        "clock_ms": program.clock_ms,
        "journal": journal_to_json(program.journal),
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


def program_key(program: Program) -> str:
    """Identifies a program apart from its journal: the key of its live copy in a worker. The
    digest of its wire form (`program_to_json`) without the journal; kept for the few hundred
    programs seen last, since every resume of a program asks again."""
    if len(program.code) + sum(len(t) for t in program.tools) > _CACHED_KEY_CHARS:
        return _key.__wrapped__(
            program.code, program.tools, program.seed, program.clock_ms, program.limits, program.text_tools
        )
    return _key(program.code, program.tools, program.seed, program.clock_ms, program.limits, program.text_tools)


_CACHED_KEY_CHARS = 32_768
"""A program whose code and tool names are up to this long has its key kept (512 of them, so at
most 16 MiB); a longer one's key is made on every run (a digest: under a millisecond a 256 KiB)."""


@functools.lru_cache(maxsize=512)
def _key(
    code: str, tools: tuple[str, ...], seed: int, clock_ms: int, limits: Limits, text_tools: tuple[str, ...]
) -> str:
    data = program_to_json(Program(code, tools, seed, clock_ms, (), limits, text_tools))
    ident = {name: value for name, value in data.items() if name != "journal"}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode("utf-8")).hexdigest()


MEMOS = {"sandbox: programs' keys": _key, "sandbox: limits as JSON": _limits_json}
"""This module's memos (`functools.lru_cache`, each bounded by its `maxsize`), for the engine's
registry of caches (`emulator/caches.py`): `POST /_emulator/reset` clears them."""
