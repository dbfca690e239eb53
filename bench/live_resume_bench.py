"""What one live resume costs the server as a program's journal grows: CPU per resume at journal
length 10 and at 600 (or the lengths given), in the pool's process and in its worker.

    .venv/bin/python bench/live_resume_bench.py [--lengths 10 600] [--window 50] [--programs 8]
                                                [--fresh-objects]

A one-worker `Pool` keeps `--programs` chains of tool calls live. Each is first driven, unmeasured,
to the given journal length; then each makes `--window` more calls, resumed live one by one,
and that is what is measured: the pool process's CPU (`time.process_time` around each
`pool.run`, so the driving loop's own work is left out) and the worker's (utime + stime from
/proc, read around the whole window; clock ticks, hence the many resumes per figure). Each tool
result is about 150 characters of JSON. With `--fresh-objects` every request's journal is made
of new, equal `ToolResult` objects (as a server that parses each request anew hands them over);
without it, a step's journal reuses the previous step's objects.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import replace

from ptc_emulator.sandbox import Completed, Limits, Outcome, Pool, PoolConfig, Program, Suspended, ToolResult

CHAIN = """
let acc = 0;
for (let i = 0; i < %d; i++) acc = (await tools.add({a: acc, b: i})).sum;
text(`acc=${acc}`);
"""
NOTE = "a tool result carries some text besides its value, as most do " * 2


def program(calls: int, seed: int) -> Program:
    limits = Limits(timeout_s=60.0, max_tool_calls=calls + 1)
    return Program(CHAIN % calls, tools=("add",), seed=seed, clock_ms=1_700_000_000_000, limits=limits)


def answered(prog: Program, outcome: Outcome, fresh: bool) -> Program:
    assert isinstance(outcome, Suspended), outcome
    new = []
    for call in outcome.pending:
        args = json.loads(call.arguments)
        new.append(ToolResult("add", call.arguments, json.dumps({"sum": args["a"] + args["b"], "note": NOTE})))
    journal = prog.journal
    if fresh:
        journal = tuple(ToolResult(r.name, r.arguments, r.output, r.is_error) for r in journal)
    return replace(prog, journal=journal + tuple(new))


def worker_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(length: int, window: int, programs: int, fresh: bool) -> tuple[float, float, int]:
    """Pool and worker CPU per live resume (seconds), and the live hits, for `window` resumes of
    each of `programs` chains whose journals hold `length` entries."""
    config = PoolConfig(size=1, live_cache=programs + 1, live_cache_bytes=2**30, spare_contexts=1)
    async with Pool(config) as pool:
        (pid,) = pool.pids
        progs = [program(length + window + 1, seed) for seed in range(programs)]
        outcomes = [await pool.run(p) for p in progs]
        for _ in range(length):
            for i, p in enumerate(progs):
                progs[i] = answered(p, outcomes[i], fresh)
                outcomes[i] = await pool.run(progs[i])
        assert all(len(p.journal) == length for p in progs)
        hits = pool.live_hits
        pool_cpu = 0.0
        worker_before = worker_cpu_s(pid)
        for _ in range(window):
            for i, p in enumerate(progs):
                progs[i] = answered(p, outcomes[i], fresh)
                start = time.process_time()
                outcomes[i] = await pool.run(progs[i])
                pool_cpu += time.process_time() - start
        worker_cpu = worker_cpu_s(pid) - worker_before
        assert pool.pids == [pid], "the worker was replaced: its CPU is not all counted"
        resumes = window * programs
        hits = pool.live_hits - hits
        for i, p in enumerate(progs):  # finish each chain: its result shows the run was right
            last = await pool.run(answered(p, outcomes[i], fresh))
            assert isinstance(last, Completed), last
        return pool_cpu / resumes, worker_cpu / resumes, hits


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 600])
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--programs", type=int, default=8)
    parser.add_argument("--fresh-objects", action="store_true")
    args = parser.parse_args()
    print(f"{args.programs} chains x {args.window} live resumes each; fresh objects: {args.fresh_objects}")
    print(f"{'journal length':>16} {'pool CPU/resume':>16} {'worker CPU/resume':>18} {'live hits':>10}")
    for length in args.lengths:
        pool_s, worker_s, hits = await measure(length, args.window, args.programs, args.fresh_objects)
        resumes = args.window * args.programs
        print(f"{length:>16} {pool_s * 1e3:>13.3f} ms {worker_s * 1e3:>15.3f} ms {hits:>5}/{resumes}")


if __name__ == "__main__":
    asyncio.run(main())
