"""A pure-Python stand-in for the sandbox's `Runner`, for engine tests that need no V8.

A program here is named by its code, and its behaviour is a Python function of the answers so
far: `FakeProgram(batches=[[call, call], [call]], finish=f)` issues each batch of calls once the
previous batch is answered (as `Promise.all` rounds would), then completes with `finish(outputs)`.
Like the real runner it is deterministic and stateless: every run replays from the journal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ptc_emulator.sandbox import Completed, Failed, Outcome, PendingCall, Program, Suspended, TextOutput


@dataclass(frozen=True)
class FakeProgram:
    batches: list[list[tuple[str, Any]]]
    """Each call: a tool name and its parsed arguments (an object, or the string a custom tool takes)."""
    finish: Callable[[list[str]], str]
    fail: str | None = None
    """Fail with this runtime error once every batch is answered, instead of finishing."""


@dataclass
class FakeRunner:
    programs: dict[str, FakeProgram] = field(default_factory=dict)
    runs: list[Program] = field(default_factory=list)

    def define(self, code: str, program: FakeProgram) -> str:
        self.programs[code] = program
        return code

    async def run(self, program: Program, client: str = "") -> Outcome:
        self.runs.append(program)
        spec = self.programs.get(program.code)
        if spec is None:
            return Failed("syntax", f"the fake runner knows no program {program.code!r}")
        answered = 0
        for batch in spec.batches:
            pending = batch
            journal = program.journal[answered : answered + len(batch)]
            for (name, args), result in zip(pending, journal, strict=False):
                if result.name != name or json.loads(result.arguments) != args:
                    return Failed("divergence", f"call {answered} was {result.name}, not {name}")
            if len(journal) < len(batch):
                calls = tuple(
                    PendingCall(answered + i, name, json.dumps(args, separators=(",", ":")))
                    for i, (name, args) in enumerate(batch)
                )
                return Suspended(calls, (), answered + len(batch))
            answered += len(batch)
        if spec.fail is not None:
            return Failed("runtime", spec.fail)
        outputs = [r.output for r in program.journal]
        return Completed((TextOutput(spec.finish(outputs)),), answered)
