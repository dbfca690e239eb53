"""What a sandbox run costs, next to the bare mini-racer operations it is built from.

    .venv/bin/python bench/sandbox_bench.py [--quick]

Prints medians over repeated runs in this one process, each sandbox figure also as a multiple
of creating (and closing) a bare context and of one bare `eval`. In-process figures call
`sandbox._v8` directly; Pool figures go through a one-worker `Pool` and include the pipe and
JSON round trip. The 100-call chain is resumed call by call: its figure is the total over the
start and all 100 resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from importlib.metadata import version

from py_mini_racer import MiniRacer

from ptc_emulator.sandbox import Completed, Outcome, Pool, PoolConfig, Program, Suspended, ToolResult, _v8

FAN_OUT = """
const [a, b] = await Promise.all([tools.add({a: 1, b: 2}), tools.add({a: 3, b: 4})]);
text(`sum=${a + b}`);
"""

CHAIN = """
let acc = 0;
for (let i = 0; i < 100; i++) acc = await tools.add({a: acc, b: i});
text(`acc=${acc}`);
"""


def program(code: str) -> Program:
    return Program(code, tools=("add",), seed=7, clock_ms=1_700_000_000_000)


def answer(arguments: str) -> ToolResult:
    args = json.loads(arguments)
    return ToolResult("add", arguments, json.dumps(args["a"] + args["b"]))


def answered(prog: Program, outcome: Outcome) -> Program:
    assert isinstance(outcome, Suspended), outcome
    return replace(prog, journal=prog.journal + tuple(answer(p.arguments) for p in outcome.pending))


def expect_completed(outcome: Outcome, text: str) -> None:
    assert isinstance(outcome, Completed) and outcome.outputs[0].type == "text", outcome
    assert outcome.outputs[0].text == text, outcome


# ---- the operations ------------------------------------------------------------------------------


def bare_context() -> None:
    MiniRacer().close()


class BareEval:
    def __init__(self) -> None:
        self.mr = MiniRacer()

    def __call__(self) -> None:
        self.mr.eval("1", timeout_sec=5)


SUSPEND_AT = program(FAN_OUT)


def chain_by_replay_sync() -> None:
    prog = program(CHAIN)
    outcome = _v8.run(prog)
    while isinstance(outcome, Suspended):
        prog = answered(prog, outcome)
        outcome = _v8.run(prog)
    expect_completed(outcome, "acc=4950")
    assert len(prog.journal) == 100


def chain_live() -> None:
    execution = _v8.Execution(program(CHAIN))
    try:
        outcome = execution.start()
        resumes = 0
        while isinstance(outcome, Suspended):
            outcome = execution.resume([answer(p.arguments) for p in outcome.pending])
            resumes += 1
        expect_completed(outcome, "acc=4950")
        assert resumes == 100
    finally:
        execution.close()


async def chain_by_replay_pool(pool: Pool) -> None:
    prog = program(CHAIN)
    outcome = await pool.run(prog)
    while isinstance(outcome, Suspended):
        prog = answered(prog, outcome)
        outcome = await pool.run(prog)
    expect_completed(outcome, "acc=4950")


# ---- measuring -----------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    runs: int
    median_s: float
    sandbox: bool = True


def measure(label: str, fn: Callable[[], object], runs: int, warmup: int = 2, sandbox: bool = True) -> Row:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Row(label, runs, statistics.median(samples), sandbox)


def timed_with_setup(
    label: str, fn: Callable[[], object], setup: Callable[[], object], teardown: Callable[[], object], runs: int
) -> Row:
    """Median of `fn` alone; `setup` before and `teardown` after each sample are not timed."""
    samples = []
    for _ in range(runs + 2):
        setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
        teardown()
    return Row(label, runs, statistics.median(samples[2:]))


async def measure_async(label: str, fn: Callable[[], Awaitable[object]], runs: int, warmup: int = 2) -> Row:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return Row(label, runs, statistics.median(samples))


def in_process(n: dict[str, int]) -> list[tuple[str, list[Row]]]:
    _v8.init()  # the sandbox's process-wide V8 flags, before the first context
    bare_context()  # the first context of a process loads V8 and ICU: not what is measured
    bare_eval = BareEval()
    bare = [
        measure("MiniRacer() + close()", bare_context, n["context"], sandbox=False),
        measure("eval('1', timeout_sec=5)", bare_eval, n["eval"], sandbox=False),
    ]
    if hasattr(_v8, "_fast_eval"):
        mr = bare_eval.mr
        bare.append(
            measure("eval('1') on the cheapest path (_v8._fast_eval)", lambda: _v8._fast_eval(mr, "1", 5), n["eval"])
        )
    bare_eval.mr.close()

    suspended = _v8.run(SUSPEND_AT)
    resume_at = answered(SUSPEND_AT, suspended)
    expect_completed(_v8.run(resume_at), "sum=10")

    def start_to_suspend() -> None:
        assert isinstance(_v8.run(SUSPEND_AT), Suspended)

    # Set-up outside the timed part: each sample gets a context created (or a program suspended)
    # beforehand, and closes it afterwards, so the figure is the one step alone.
    contexts: list[_v8.Context] = []
    ready: list[_v8.Execution] = []
    crossings: dict[str, list[int]] = {"start": [], "resume": []}

    def new_context() -> None:
        contexts.append(_v8.Context(SUSPEND_AT.limits.heap_bytes))

    def close_context() -> None:
        if not contexts:
            contexts.append(_v8.Context(SUSPEND_AT.limits.heap_bytes))
        contexts.pop().close()

    def start_in_ready() -> None:
        execution = ready.pop()
        before = getattr(execution.context, "crossings", 0)
        assert isinstance(execution.start(), Suspended)
        crossings["start"].append(getattr(execution.context, "crossings", 0) - before)
        ready.append(execution)

    def live_resume() -> None:
        execution = ready.pop()
        assert isinstance(execution.outcome, Suspended)
        before = getattr(execution.context, "crossings", 0)
        outcome = execution.resume([answer(p.arguments) for p in execution.outcome.pending])
        crossings["resume"].append(getattr(execution.context, "crossings", 0) - before)
        assert isinstance(outcome, Completed)
        execution.close()

    rows = []
    rows.append(
        timed_with_setup(
            "sandbox Context(): create (prelude included)",
            new_context,
            lambda: None,
            lambda: contexts.pop().close(),
            n["context"],
        )
    )
    rows.append(
        timed_with_setup(
            "sandbox Context: close",
            close_context,
            lambda: contexts.append(_v8.Context(SUSPEND_AT.limits.heap_bytes)),
            lambda: None,
            n["context"],
        )
    )
    rows.append(
        timed_with_setup(
            "start in a ready context, to suspend (2-call Promise.all)",
            start_in_ready,
            lambda: ready.append(_v8.Execution(SUSPEND_AT)),
            lambda: None,
            n["run"],
        )
    )
    rows.append(
        timed_with_setup(
            "live resume to completion (Execution.resume)",
            live_resume,
            lambda: (ready.append(_v8.Execution(SUSPEND_AT)), ready[-1].start()),
            lambda: None,
            n["run"],
        )
    )
    for what in ("start", "resume"):
        print(
            f"evals (V8 crossings) per {what}: median {statistics.median(crossings[what])}, max {max(crossings[what])}"
        )

    def one_resume() -> None:
        assert isinstance(_v8.run(resume_at), Completed)

    v8 = [
        *rows,
        measure("fresh start to suspend (2-call Promise.all)", start_to_suspend, n["run"]),
        measure("one resume (replay to completion)", one_resume, n["run"]),
        measure("100-call chain, start + 100 resumes, replay", chain_by_replay_sync, n["chain"], warmup=1),
        measure("100-call chain, start + 100 resumes, live", chain_live, n["chain"], warmup=1),
    ]
    return [("bare mini-racer", bare), ("sandbox in-process (sandbox._v8)", v8)]


async def through_pool(n: dict[str, int]) -> list[Row]:
    rows = await through_pool_replaying(n)
    async with Pool(PoolConfig(size=1, live_cache=64)) as pool:
        rows.append(
            await measure_async(
                "100-call chain, start + 100 resumes, live cache", lambda: chain_by_replay_pool(pool), n["chain"], 1
            )
        )
    return rows


async def through_pool_replaying(n: dict[str, int]) -> list[Row]:
    async with Pool(PoolConfig(size=1, live_cache=0)) as pool:
        resume_at = answered(SUSPEND_AT, await pool.run(SUSPEND_AT))

        async def start_to_suspend() -> None:
            assert isinstance(await pool.run(SUSPEND_AT), Suspended)

        async def one_resume() -> None:
            assert isinstance(await pool.run(resume_at), Completed)

        return [
            await measure_async("fresh start to suspend (2-call Promise.all)", start_to_suspend, n["run"]),
            await measure_async("one resume (replay to completion)", one_resume, n["run"]),
            await measure_async(
                "100-call chain, start + 100 resumes, replay",
                lambda: chain_by_replay_pool(pool),
                n["chain"],
                1,
            ),
        ]


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:10.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args()
    n = (
        {"context": 40, "eval": 200, "run": 15, "chain": 3}
        if args.quick
        else {"context": 300, "eval": 2000, "run": 100, "chain": 9}
    )

    started = time.perf_counter()
    probe = MiniRacer()
    v8_version = probe.v8_version
    probe.close()
    print("sandbox benchmark: medians over repeated runs in one process")
    print(
        f"cpus: {os.cpu_count()}   python: {platform.python_version()}   "
        f"mini-racer: {version('mini-racer')} (V8 {v8_version})   mode: {'quick' if args.quick else 'full'}"
    )
    sections = in_process(n)
    sections.append(
        ("sandbox through Pool (1 worker, IPC included; live cache off unless said)", asyncio.run(through_pool(n)))
    )

    context_s = sections[0][1][0].median_s
    eval_s = sections[0][1][1].median_s
    width = max(len(r.label) for _, rows in sections for r in rows) + 2
    header = f"{'operation':<{width}}{'runs':>6}{'median':>14}{'x context':>12}{'x eval':>10}"
    print()
    print(header)
    print("-" * len(header))
    for title, rows in sections:
        print(title)
        for r in rows:
            print(
                f"  {r.label:<{width - 2}}{r.runs:>6}{fmt_time(r.median_s):>14}"
                f"{r.median_s / context_s:>12.2f}{r.median_s / eval_s:>10.1f}"
            )
    print("-" * len(header))
    print("x context: multiple of MiniRacer() + close();  x eval: multiple of one eval('1')")
    print(f"total benchmark time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
