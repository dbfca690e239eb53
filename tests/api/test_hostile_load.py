"""Hostile programs under load: many concurrent SDK clients, some of them running programs that
abort their worker process, spin forever after an `await`, exhaust the heap, flood output or
tool calls, or tamper with built-ins, mixed with normal programs that pause several times.

Every normal program must complete with the right answer, every hostile one must end with
`program_output.status == "incomplete"` and a final message saying why, the worker pool must
recover, and the server must keep answering throughout. The server runs with short limits
(1.5 s per run, 2 workers) so the whole module takes well under two minutes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import ProgramRun, adrive, drive, expected_total, pausing_program

LIMITS = Limits(timeout_s=1.5, max_tool_calls=300, max_output_bytes=256 * 2**10)
ABORT = "new Array(2**28).fill(1.5);\ntext('unreachable');"
# Also aborts the process inside a builtin, but within a second instead of after seconds of CPU:
# for the tests where the abort itself, not the deadline racing it, is what ends the program.
FAST_ABORT = "'x'.repeat(2**28).split('');\ntext('unreachable');"


@dataclass(frozen=True)
class Hostile:
    code: str
    kinds: tuple[str, ...]
    """Failure kinds the program_output may name (`crash`, `timeout`, `memory`, `limit`, `runtime`)."""
    reasons: tuple[str, ...]
    """Words the final message must contain one of."""


HOSTILE: dict[str, Hostile] = {
    # V8 aborts the whole worker process (a fatal OOM inside a builtin, after about 8 s), unless
    # the worker is killed first for staying silent past the deadline plus the pool's grace
    # period ("crash"), or reports the run's deadline itself ("timeout"). Either way the worker
    # must not be given another program until it is healthy again.
    "abort-the-worker": Hostile(ABORT, ("crash", "timeout"), ("sandbox worker", "time limit")),
    "spin-after-await": Hostile("await Promise.resolve();\nwhile (true) {}", ("timeout",), ("time limit",)),
    "spin-after-a-pause": Hostile(
        "const r = await tools.add({a: 1, b: 2});\nwhile (r.value === 3) {}", ("timeout",), ("time limit",)
    ),
    # Under this load the heap limit and the deadline race: on two busy cores the program may not
    # get the CPU to fill 64 MiB within its 1.5 s. Either ends it, incomplete.
    "grow-the-heap": Hostile(
        "const keep = [];\nwhile (true) keep.push({s: 'y'.repeat(64) + keep.length});",
        ("memory", "timeout"),
        ("memory limit", "time limit"),
    ),
    "flood-output": Hostile("while (true) text('x'.repeat(1000));", ("limit",), ("bytes",)),
    "flood-tool-calls": Hostile(
        "const calls = [];\nfor (let i = 0; i < 5000; i++) calls.push(tools.add({a: i, b: 1}));\n"
        "await Promise.all(calls);\ntext('unreachable');",
        ("limit",),
        ("tool calls",),
    ),
    "flood-tool-calls-over-pauses": Hostile(
        "for (let round = 0; round < 50; round++) {\n"
        "  await Promise.all(Array.from({length: 100}, (_, i) => tools.add({a: round, b: i})));\n"
        "}\ntext('unreachable');",
        ("limit",),
        ("tool calls",),
    ),
    "poison-object-prototype": Hostile(
        "Object.prototype.toJSON = () => { throw new Error('poisoned'); };\n"
        "const r = await tools.add({a: 1, b: 2});\ntext(String(r.value));",
        ("runtime",),
        ("poisoned",),
    ),
}

# Tampering that tries to forge calls or results: the host's controller uses built-ins captured
# before the program ran and validates what comes back, so these still get the right answer.
TAMPER_BUT_CORRECT: dict[str, str] = {
    "replace-json": 'JSON.stringify = () => \'{"a":100,"b":100}\';\nJSON.parse = () => ({value: 999});\n',
    "break-promises": "Promise.prototype.then = function () { return this; };\nPromise.all = null;\n",
    "break-arrays": "Array.prototype.push = function () { throw new Error('no push'); };\n"
    "Array.prototype.map = null;\n",
    "index-accessor": "Object.defineProperty(Array.prototype, 0, {get() { return 'forged'; }, set(v) {}});\n",
    "overwrite-tools": "try { tools.add = () => ({value: 5}); } catch (e) {}\n"
    "try { globalThis.text = null; } catch (e) {}\n",
    "freeze-everything": "Object.freeze(Object.prototype);\nObject.freeze(Array.prototype);\n"
    "Object.freeze(Function.prototype);\n",
}
TAMPER_TAIL = "const r = await tools.add({a: 20, b: 22});\ntext(`value=${r.value}`);"


class Monitor(threading.Thread):
    """Polls /_emulator/health while the load runs: the server must answer, and quickly."""

    def __init__(self, root: str, period: float = 0.2) -> None:
        super().__init__(name="health-monitor", daemon=True)
        self.root = root
        self.period = period
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._done = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self._done.is_set():
                started = time.monotonic()
                try:
                    reply = http.get(f"{self.root}/_emulator/health")
                    if reply.status_code != 200:
                        self.failures.append(f"{reply.status_code}: {reply.text[:200]}")
                except httpx.HTTPError as e:
                    self.failures.append(repr(e))
                self.latencies.append(time.monotonic() - started)
                self._done.wait(self.period)

    def stop(self) -> None:
        self._done.set()
        self.join(15)


@dataclass
class Load:
    normal: dict[str, tuple[ProgramRun, str]] = field(default_factory=dict)
    hostile: dict[str, tuple[ProgramRun, Hostile]] = field(default_factory=dict)
    tamper: dict[str, ProgramRun] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    """Seconds after the start at which each conversation begins: waves overlap."""

    def runs(self) -> dict[str, ProgramRun]:
        return {
            **{k: v[0] for k, v in self.normal.items()},
            **{k: v[0] for k, v in self.hostile.items()},
            **self.tamper,
        }


def build_load(waves: int, normal_per_wave: int, wave_gap: float) -> Load:
    load = Load()
    for wave in range(waves):
        before = set(load.runs())
        for n in range(normal_per_wave):
            start = 1000 * (wave * normal_per_wave + n)
            pauses = 3 + n % 3
            run = ProgramRun(pausing_program(start, pauses), store=n % 2 == 0)
            load.normal[f"normal-{wave}-{n}"] = (run, expected_total(start, pauses))
        for name, hostile in HOSTILE.items():
            load.hostile[f"{name}-{wave}"] = (ProgramRun(hostile.code, store=wave % 2 == 1), hostile)
        for name, prefix in TAMPER_BUT_CORRECT.items():
            load.tamper[f"{name}-{wave}"] = ProgramRun(prefix + TAMPER_TAIL, store=False)
        for name in set(load.runs()) - before:
            load.delays[name] = wave * wave_gap
    return load


async def run_concurrently(
    base_url: str, runs: dict[str, ProgramRun], delays: dict[str, float]
) -> dict[str, BaseException]:
    """Drive every run concurrently, each with its own SDK client, after its delay; the exceptions."""

    async def one(run: ProgramRun, delay: float) -> None:
        await asyncio.sleep(delay)
        async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=90) as client:
            await adrive(client, run)

    names = list(runs)
    results = await asyncio.gather(*(one(runs[n], delays.get(n, 0.0)) for n in names), return_exceptions=True)
    return {n: r for n, r in zip(names, results, strict=True) if isinstance(r, BaseException)}


@pytest.mark.timeout(600)
def test_hostile_programs_under_load_fail_alone_and_the_server_keeps_serving(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server(pool_size=2, limits=LIMITS)
    root = f"http://127.0.0.1:{server.port}"
    monitor = Monitor(root)
    monitor.start()
    load = build_load(waves=2, normal_per_wave=16, wave_gap=2.5)  # 60 conversations, overlapping
    started = time.monotonic()
    try:
        errors = asyncio.run(run_concurrently(server.base_url, load.runs(), load.delays))
    finally:
        monitor.stop()
    elapsed = time.monotonic() - started

    assert not errors, {name: repr(e)[:300] for name, e in errors.items()}
    for name, (run, expected) in load.normal.items():
        assert run.program_output.status == "completed", (name, run.program_output.result[:300])
        assert run.text == expected, name
    for name, (run, hostile) in load.hostile.items():
        output = run.program_output
        assert output.status == "incomplete", (name, output.result[:300])
        assert run.final.output[-1].type == "message", name
        assert run.text.startswith("The program did not complete"), (name, run.text[:300])
        # The result is the program's text output, if any, then "<kind>: <message>" (and, for a
        # runtime error, the program's stack).
        assert any(f"\n{kind}: " in f"\n{output.result}" for kind in hostile.kinds), (name, output.result[-300:])
        assert any(reason in run.text for reason in hostile.reasons), (name, run.text[-300:])
    for name, run in load.tamper.items():
        assert run.program_output.status == "completed", (name, run.program_output.result[:300])
        assert run.text == "value=42", name
        (call,) = [item for item in run.items if item.get("type") == "function_call"]
        assert json.loads(call["arguments"]) == {"a": 20, "b": 22}, name  # nothing forged

    assert not monitor.failures, monitor.failures[:5]
    assert len(monitor.latencies) >= 10
    # Health answered every poll; the bound is far above any busy machine's delay and far below a
    # blocked event loop (which would hold it for a program's whole run).
    assert max(monitor.latencies) < 20.0, f"health took {max(monitor.latencies):.2f} s while programs ran"

    # The pool recovered: its workers are back, the crashes were counted, and new programs run.
    health = workers_back(root)
    assert len(health["workers"]) == 2, health
    crashed = sum(1 for run, _ in load.hostile.values() if run.program_output.result.startswith("crash: "))
    assert health["sandbox_crashes"] >= crashed, health
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        run = drive(client, ProgramRun(pausing_program(7, 3), store=True))
    assert run.text == expected_total(7, 3)
    print(
        f"{len(load.runs())} conversations in {elapsed:.1f} s; slowest health check "
        f"{max(monitor.latencies):.2f} s; health: {health}"
    )


@pytest.mark.timeout(600)
def test_a_program_queued_behind_an_abort_is_not_charged_with_its_crash(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """Regression: an abort reported as a timeout once left its worker busy dying, and the pool
    gave that worker the next program, which then failed with "crash: ... stopped answering"."""
    server = make_server(pool_size=1, limits=LIMITS)  # one worker: the next program goes to the same one
    runs: dict[str, ProgramRun] = {}
    delays: dict[str, float] = {}
    for n in range(3):
        runs[f"abort-{n}"] = ProgramRun(ABORT, store=False)
        delays[f"abort-{n}"] = 0.3 * n
        for m in range(2):
            runs[f"normal-{n}-{m}"] = ProgramRun(pausing_program(n * 10 + m, 3), store=False)
            delays[f"normal-{n}-{m}"] = 0.3 * n + 0.1
    errors = asyncio.run(run_concurrently(server.base_url, runs, delays))
    assert not errors, {name: repr(e)[:300] for name, e in errors.items()}
    charged = {name: run.program_output.result for name, run in runs.items() if name.startswith("normal")}
    assert all(result.startswith("total=") for result in charged.values()), charged


@pytest.mark.timeout(600)
def test_programs_that_kill_their_worker_process_fail_alone_under_load(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """The abort really kills the worker process (SIGTRAP, "Fatal JavaScript out of memory"): only
    that program fails, the pool replaces the worker and counts the crash, and the programs around
    it finish with the right answers. The time limit is far beyond how long V8 takes to abort,
    even on a busy machine: the abort, not the deadline, ends the program."""
    server = make_server(pool_size=2, limits=Limits(timeout_s=240.0))
    root = f"http://127.0.0.1:{server.port}"
    runs: dict[str, ProgramRun] = {}
    delays: dict[str, float] = {}
    expected: dict[str, str] = {}
    for n in range(2):
        runs[f"abort-{n}"] = ProgramRun(FAST_ABORT, store=n == 1)
        delays[f"abort-{n}"] = 0.5 * n
    for n in range(12):
        runs[f"normal-{n}"] = ProgramRun(pausing_program(50 * n, 4), store=n % 2 == 0)
        delays[f"normal-{n}"] = 0.3 * n
        expected[f"normal-{n}"] = expected_total(50 * n, 4)
    monitor = Monitor(root)
    monitor.start()
    try:
        errors = asyncio.run(run_concurrently(server.base_url, runs, delays))
    finally:
        monitor.stop()
    assert not errors, {name: repr(e)[:300] for name, e in errors.items()}
    for name, run in runs.items():
        if name.startswith("abort"):
            assert run.program_output.status == "incomplete", (name, run.program_output.result[:300])
            assert run.program_output.result.startswith("crash: the sandbox worker running this program"), name
            assert run.text.startswith("The program did not complete: crash"), (name, run.text[:300])
        else:
            assert run.program_output.status == "completed", (name, run.program_output.result[:300])
            assert run.text == expected[name], name
    assert not monitor.failures, monitor.failures[:5]  # health answered throughout
    health = workers_back(root)
    assert len(health["workers"]) == 2, health
    assert health["sandbox_crashes"] == 2, health


def workers_back(root: str, size: int = 2, timeout: float = 30) -> dict[str, Any]:
    """Health once the pool has `size` workers again (or the last answer, after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = httpx.get(f"{root}/_emulator/health", timeout=10).json()
        if len(health["workers"]) == size or time.monotonic() > deadline:
            return health
        time.sleep(0.1)
