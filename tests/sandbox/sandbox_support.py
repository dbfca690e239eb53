"""Shared by the sandbox tests and by `engine_driver.py` (which runs in a subprocess).

A simulated client that answers tool calls deterministically, a driver that resumes a program
by replay until it stops suspending, and a catalogue of programs that the live-resume test runs
both ways. Nothing here imports `sandbox._v8` at module level: V8 must never be created in the
pytest process.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ptc_emulator.sandbox import Completed, Failed, Limits, Outcome, PendingCall, Program, Suspended, ToolResult

CLOCK_MS = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z
SEED = 0x5EED_0000_0000_0000_0000_0000_0000_0042
TOOLS = ("add", "echo", "fail", "raw")

FAST = Limits(timeout_s=1.0)
"""For programs that must time out: a short deadline keeps the battery quick."""


def program(
    code: str,
    *,
    tools: tuple[str, ...] = TOOLS,
    seed: int = SEED,
    clock_ms: int = CLOCK_MS,
    journal: tuple[ToolResult, ...] | list[ToolResult] = (),
    **limits: Any,
) -> Program:
    return Program(code, tools, seed, clock_ms, tuple(journal), Limits(**limits))


def answer(call: PendingCall) -> ToolResult:
    """What the simulated client returns for one call; a pure function of the call."""
    args = json.loads(call.arguments)
    if call.name == "add":
        return ToolResult(call.name, call.arguments, json.dumps(args["a"] + args["b"]))
    if call.name == "echo":
        return ToolResult(call.name, call.arguments, call.arguments)
    if call.name == "fail":
        return ToolResult(call.name, call.arguments, f"tool failed: {args.get('why', '?')}", is_error=True)
    if call.name == "raw":
        return ToolResult(call.name, call.arguments, args["out"], is_error=bool(args.get("error")))
    raise AssertionError(f"the client has no tool {call.name!r}")


@dataclass
class Drive:
    """A program driven to a final outcome, one resume per suspension."""

    outcome: Outcome
    suspensions: list[Suspended] = field(default_factory=list)
    journal: list[ToolResult] = field(default_factory=list)

    @property
    def trace(self) -> list[tuple[int, str, str]]:
        return [(p.index, p.name, p.arguments) for s in self.suspensions for p in s.pending]

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": outcome_json(self.outcome),
            "suspensions": [outcome_json(s) for s in self.suspensions],
        }


def _answer_all(
    suspended: Suspended, journal: list[ToolResult], client: Callable[[PendingCall], ToolResult]
) -> list[ToolResult]:
    # Replay resolves calls by position: the pending calls are exactly the ones past the journal.
    expected = list(range(len(journal), len(journal) + len(suspended.pending)))
    assert [p.index for p in suspended.pending] == expected, suspended
    assert suspended.calls == expected[-1] + 1, suspended
    return [client(p) for p in suspended.pending]


def drive(
    run: Callable[[Program], Outcome],
    prog: Program,
    client: Callable[[PendingCall], ToolResult] = answer,
    max_resumes: int = 500,
) -> Drive:
    """Resume `prog` by replay (a fresh run with a longer journal) until it stops suspending."""
    d = Drive(run(prog), journal=list(prog.journal))
    while isinstance(d.outcome, Suspended):
        assert len(d.suspensions) < max_resumes, "the program never stopped suspending"
        d.suspensions.append(d.outcome)
        d.journal += _answer_all(d.outcome, d.journal, client)
        d.outcome = run(replace(prog, journal=tuple(d.journal)))
    return d


def drive_live(prog: Program, client: Callable[[PendingCall], ToolResult] = answer, max_resumes: int = 500) -> Drive:
    """The same, but keeping one context alive and handing it results (`Execution.resume`)."""
    from ptc_emulator.sandbox import _v8

    execution = _v8.Execution(prog)
    try:
        d = Drive(execution.start(), journal=list(prog.journal))
        while isinstance(d.outcome, Suspended):
            assert len(d.suspensions) < max_resumes, "the program never stopped suspending"
            d.suspensions.append(d.outcome)
            results = _answer_all(d.outcome, d.journal, client)
            d.journal += results
            d.outcome = execution.resume(results)
        return d
    finally:
        execution.close()


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """A plain, comparable form of an outcome (what crosses a process boundary)."""
    result: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(outcome)))
    return result


def texts(outcome: Outcome) -> list[str]:
    return [o.text for o in outcome.outputs if o.type == "text"]


def completed_texts(outcome: Outcome) -> list[str]:
    assert isinstance(outcome, Completed), outcome
    return texts(outcome)


def failed(outcome: Outcome, kind: str) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.kind == kind, outcome
    return outcome


# ---- programs ------------------------------------------------------------------------------------

FANOUT9 = """
const ids = [1, 2, 3, 4, 5, 6, 7, 8, 9];
const sums = await Promise.all(ids.map((i) => tools.add({a: i, b: i * 10})));
text(`sums=${sums.join(',')}`);
"""

SEQ50 = """
let acc = 0;
for (let i = 1; i <= 50; i++) {
  acc = await tools.add({a: acc, b: i});
}
text(`acc=${acc}`);
"""

RACE = """
const winner = await Promise.race([
  tools.echo({who: "first"}),
  tools.echo({who: "second"}),
]);
text(`winner=${winner.who}`);
const next = await tools.add({a: 40, b: 2});
text(`next=${next}`);
"""

CAUGHT_ERROR = """
try {
  await tools.fail({why: "no such order\\nsecond line \u00fc"});
  text("unreachable");
} catch (e) {
  text(`caught ${e instanceof Error} ${e.constructor.name}: ${e.message}`);
}
text(`after=${await tools.add({a: 40, b: 2})}`);
"""

THROW_AFTER_AWAIT = """const v = await tools.add({a: 1, b: 1});
text(`v=${v}`);
function inner(x) {
  throw new TypeError("bad thing " + x);
}
inner(v);
"""

RANDOM_AND_CLOCK = """
const r1 = Math.random();
const a = await tools.echo({r1, now: Date.now(), iso: new Date().toISOString()});
const r2 = Math.random();
const [b, c] = await Promise.all([
  tools.echo({r2, s: Date()}),
  tools.echo({fmt: new Intl.DateTimeFormat('en-US', {dateStyle: 'full', timeStyle: 'long'}).format()}),
]);
text(JSON.stringify({a, b, c, r3: Math.random()}));
"""

LOOP_AFTER_AWAIT = "await tools.add({a: 1, b: 2});\ntext('spinning');\nwhile (true) {}\n"

HEAP_AFTER_AWAIT = """
await tools.add({a: 1, b: 1});
const keep = [];
while (true) keep.push(new Array(1e5).fill(1.5));
"""

IMAGES = """
image('data:image/png;base64,iVBORw0KGgo=');
const url = await tools.echo({image_url: 'https://example.com/cat.png'});
image(url);
try { image('javascript:alert(1)'); } catch (e) { text(e.name); }
"""

TOOL_CALL_LIMIT = """
let n = 0;
for (;;) {
  try { n += await tools.add({a: n, b: 1}); } catch (e) { text('caught ' + e.message); }
}
"""

# Programs for the live-resume-equals-replay test, with their limits.
CATALOGUE: dict[str, Program] = {
    "fanout9": program(FANOUT9),
    "seq50": program(SEQ50),
    "race": program(RACE),
    "caught_error": program(CAUGHT_ERROR),
    "throw_after_await": program(THROW_AFTER_AWAIT),
    "syntax_error": program("const a = await tools.add({a: 1, b: 2});\nlet x = ;\n"),
    "random_and_clock": program(RANDOM_AND_CLOCK),
    "loop_after_await": program(LOOP_AFTER_AWAIT, timeout_s=0.5),
    "heap_after_await": program(HEAP_AFTER_AWAIT, heap_bytes=32 * 2**20),
    "images": program(IMAGES),
    "tool_call_limit": program(TOOL_CALL_LIMIT, max_tool_calls=4),
    "output_limit": program(
        "text('a');\nawait tools.add({a: 1, b: 1});\ntry { text('x'.repeat(500)); } catch (e) { text('caught'); }",
        max_output_bytes=200,
    ),
}
