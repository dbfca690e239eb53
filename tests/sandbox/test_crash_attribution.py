"""Crash attribution: a worker that dies is blamed on no program that did not kill it, and it leaves
the pool's list of workers (what health shows) at once, not at the next request.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import pytest

from ptc_emulator.sandbox import Completed, Failed, PoolConfig
from tests.sandbox.sandbox_harness import LoopThread, SyncPool, pid_alive
from tests.sandbox.sandbox_support import completed_texts, program


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


@pytest.fixture
def pool(loop_thread: LoopThread) -> Iterator[SyncPool]:
    p = SyncPool(loop_thread, PoolConfig(size=1))
    yield p
    p.close()


def test_a_dead_idle_worker_leaves_the_list_at_once_and_is_replaced(pool: SyncPool) -> None:
    [old] = pool.pids()
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while old in pool.pids() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert old not in pool.pids()  # no request was needed to notice
    replacement = pool.wait_for_workers(exclude=[old])
    assert replacement and old not in replacement
    assert pool.pool.crashes == 0


def test_a_program_sent_to_a_worker_that_is_dying_is_not_blamed(pool: SyncPool) -> None:
    # Kill the worker and send a program at once: whether the pool notices first or the program
    # finds the pipe closed, the program completes (on a fresh worker) and nobody is blamed.
    for i in range(3):
        [old] = pool.wait_for_workers()
        os.kill(old, signal.SIGKILL)
        outcome = pool.run(program(f"text('after {i}');"))
        assert isinstance(outcome, Completed), outcome
        assert completed_texts(outcome) == [f"after {i}"]
        while pid_alive(old):
            time.sleep(0.01)
    assert pool.pool.crashes == 0


# A program that does kill its worker is still blamed, once: see test_limits.py's
# test of V8 aborts (`crashes == 2` for two bombs, each run twice before it is blamed), and the
# last two tests here.


ABORT = "new Array(2**28).fill(1.5);\ntext('unreachable');"
"""Times out inside a V8 builtin that no termination reaches; V8 aborts the process seconds later."""


def test_a_worker_whose_timed_out_context_will_not_close_takes_no_new_work(pool: SyncPool) -> None:
    # One worker: the normal programs queue behind the abort. The abort's run ends by its time
    # limit while V8 is still inside the builtin; the worker must not be given the next program
    # (which V8's abort would then kill). Either the worker retires after answering (the usual
    # case: "timeout") or V8 aborts before it could answer ("crash", the abort's own).
    [old] = pool.wait_for_workers()
    outcomes = pool.run_many([program(ABORT, timeout_s=1.0), *(program(f"text('next {i}');") for i in range(3))])
    aborted, *normal = outcomes
    assert isinstance(aborted, Failed) and aborted.kind in ("timeout", "crash"), aborted
    for i, outcome in enumerate(normal):
        assert isinstance(outcome, Completed), outcome
        assert completed_texts(outcome) == [f"next {i}"]
    assert pool.pool.crashes == (aborted.kind == "crash")
    assert pool.pool.retired_stuck == (aborted.kind == "timeout")
    assert old not in pool.wait_for_workers(exclude=[old])  # the stuck worker is gone, replaced


SPIN = "let x = 0;\nfor (let i = 0; i < 2e8; i++) x = (x + i) % 7;\ntext(`spun ${x}`);"
"""About a second of CPU: long enough to kill its worker while it runs, short enough to run twice."""


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_while_running(pool: SyncPool, pid: int) -> None:
    """SIGKILL `pid` once it has spent a tenth of a second of CPU in its program: well after the
    program was sent, well before the spin ends."""
    start = cpu_seconds(pid)
    deadline = time.monotonic() + 120
    while cpu_seconds(pid) - start < 0.1:
        assert time.monotonic() < deadline, "the worker never started spinning"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)


def test_a_worker_killed_under_a_program_once_is_not_blamed_on_it(pool: SyncPool) -> None:
    # The run's worker dies under the program (here killed by us; in the wild V8 has aborted on
    # ordinary programs): the program runs again on a fresh worker and completes as if nothing
    # happened. Only a second death would be its crash.
    [old] = pool.wait_for_workers()
    running = asyncio.run_coroutine_threadsafe(pool.pool.run(program(SPIN, timeout_s=300)), pool.loop.loop)
    kill_while_running(pool, old)
    outcome = running.result(300)
    assert isinstance(outcome, Completed), outcome
    assert completed_texts(outcome) == ["spun 6"]
    assert pool.pool.crashes == 0
    assert pool.pool.recovered == 1
    assert pool.pool.runs == 2
    assert old not in pool.wait_for_workers(exclude=[old])


def test_a_program_whose_second_worker_dies_too_is_a_crash(pool: SyncPool) -> None:
    [first] = pool.wait_for_workers()
    running = asyncio.run_coroutine_threadsafe(pool.pool.run(program(SPIN, timeout_s=300)), pool.loop.loop)
    kill_while_running(pool, first)
    [second] = pool.wait_for_workers(exclude=[first])
    kill_while_running(pool, second)
    outcome = running.result(300)
    assert isinstance(outcome, Failed) and outcome.kind == "crash", outcome
    assert outcome.message == "the sandbox worker running this program was killed by SIGKILL", outcome.message
    assert pool.pool.crashes == 1
    assert pool.pool.recovered == 0
    assert pool.pool.runs == 2
