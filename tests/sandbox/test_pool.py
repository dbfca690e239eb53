"""The worker pool: cancellation, silent workers, recycling, spare contexts and closing."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

import pytest

from ptc_emulator.sandbox import Completed, PoolClosed, PoolConfig
from tests.sandbox.sandbox_harness import SyncPool, pid_alive
from tests.sandbox.sandbox_support import completed_texts, failed, program

MakePool = Callable[[PoolConfig], SyncPool]


def test_cancelling_a_run_kills_and_replaces_its_worker(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1))
    [old] = p.pids()
    spin = program("while (true) {}", timeout_s=600)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        # wait_for cancels pool.run after 0.5 s, as a server does when its client goes away.
        p.loop.call(asyncio.wait_for(p.pool.run(spin), 0.5))
    [new] = p.wait_for_workers(exclude=[old])
    assert new != old and not pid_alive(old)
    assert p.pool.replaced == 1 and p.pool.crashes == 0
    # The pool serves again long before the cancelled program's own 600 s deadline.
    assert completed_texts(p.run(program("text('next');"))) == ["next"]
    assert time.monotonic() - start < 300


def test_cancelling_a_waiting_caller_leaves_the_workers_alone(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1))
    [pid] = p.pids()

    async def scenario() -> list[str]:
        busy = asyncio.ensure_future(
            p.pool.run(program("let x = 0;\nfor (let i = 0; i < 6e8; i++) x += i;\ntext('busy');"))
        )
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(p.pool.run(program("text('never');")))
        await asyncio.sleep(0.05)
        waiting.cancel()  # still queued for a worker: nothing to kill
        outcome = await busy
        assert waiting.cancelled()
        return completed_texts(outcome)

    assert p.loop.call(scenario()) == ["busy"]
    assert p.pids() == [pid] and p.pool.replaced == 0


def test_a_silent_worker_is_killed_after_deadline_and_grace(make_pool: MakePool) -> None:
    # A stopped process is the purest silent worker: it neither answers nor exits.
    p = make_pool(PoolConfig(size=1, grace_s=0.5))
    [old] = p.pids()
    os.kill(old, signal.SIGSTOP)
    try:
        outcome, elapsed = p.timed(program("text('hi');", timeout_s=1.0))
    finally:
        if pid_alive(old):
            os.kill(old, signal.SIGCONT)
    # A worker silent past the deadline and grace is given up, and the program is not blamed
    # for one such worker: it runs once more on a fresh one.
    assert completed_texts(outcome) == ["hi"]
    assert p.pool.crashes == 0
    assert 1.4 <= elapsed < 120, elapsed  # never before the deadline and grace; and it did end
    [new] = p.wait_for_workers(exclude=[old])
    assert not pid_alive(old)
    assert completed_texts(p.run(program("text('next');"))) == ["next"]
    assert new != old


def test_a_worker_that_exits_is_replaced_before_it_is_used(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1))
    [old] = p.pids()
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(old) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Either it is noticed idle (and replaced) or the run finds the pipe closed (a crash); the
    # next run always succeeds.
    first = p.run(program("text('a');"))
    assert isinstance(first, Completed) or failed(first, "crash")
    assert completed_texts(p.run(program("text('b');"))) == ["b"]
    assert old not in p.wait_for_workers(exclude=[old])


def test_workers_are_recycled_after_max_jobs(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1, max_jobs_per_worker=3))
    seen = [p.pids()[0]]
    for i in range(7):
        assert completed_texts(p.run(program(f"text('{i}');"))) == [str(i)]
        pid = p.wait_for_workers()[0]
        if pid != seen[-1]:
            seen.append(pid)
    assert len(seen) == 3, seen  # retired after runs 3 and 6
    assert not any(pid_alive(pid) for pid in seen[:-1])
    assert p.pool.replaced == 0 and p.pool.crashes == 0


def test_recycling_under_concurrent_load_loses_nothing(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=2, max_jobs_per_worker=3))
    first = set(p.pids())
    outcomes = p.run_many(program(f"text('{i}', await tools.add({{a: {i}, b: 0}}) === undefined);") for i in range(14))
    assert all(o.status == "suspended" for o in outcomes), outcomes
    assert [o.pending[0].arguments for o in outcomes] == [f'{{"a":{i},"b":0}}' for i in range(14)]  # type: ignore[union-attr]
    assert not first & set(p.wait_for_workers(exclude=first))
    assert p.pool.crashes == 0 and p.pool.replaced == 0


def test_spare_contexts_serve_runs_and_other_heap_limits(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1, spare_contexts=2, heap_bytes=64 * 2**20))
    assert [completed_texts(p.run(program(f"text('{i}');"))) for i in range(4)] == [
        ["0"],
        ["1"],
        ["2"],
        ["3"],
    ]
    # A run with another heap limit gets a context of its own, with its own limit.
    bomb = "const k = [];\nfor (;;) k.push(new Array(1e5).fill(1.5));"
    assert failed(p.run(program(bomb, heap_bytes=16 * 2**20)), "memory").message.endswith("16 MiB")
    assert failed(p.run(program(bomb)), "memory").message.endswith("64 MiB")
    # A spare context is fresh: nothing a previous program did is visible.
    p.run(program("globalThis.leak = 1; Object.prototype.leaked = 2;"))
    assert completed_texts(p.run(program("text(typeof leak, typeof ({}).leaked);"))) == ["undefined undefined"]


def test_a_closed_pool_refuses_runs(make_pool: MakePool) -> None:
    p = make_pool(PoolConfig(size=1))
    [pid] = p.pids()
    p.close()
    with pytest.raises(PoolClosed):
        p.run(program("text('late');"))
    assert not pid_alive(pid)
    assert p.pids() == []


def test_closing_ends_a_worker_whose_retirement_it_cancels(make_pool: MakePool) -> None:
    """A worker worn out by its last run is retired by a task of its own; closing the pool cancels
    that task before it ran. The worker is stopped (SIGSTOP) so that it cannot end by itself: the
    pool must still end it (its process was left running, and its pipes to the garbage collector,
    which warned of them in whichever test ran then)."""
    p = make_pool(PoolConfig(size=1, max_jobs_per_worker=1))
    [pid] = p.pids()

    async def run_then_close() -> None:
        assert completed_texts(await p.pool.run(program("text('last');"))) == ["last"]
        os.kill(pid, signal.SIGSTOP)  # (its retirement is scheduled, not started: no await since)
        await p.pool.close()

    try:
        p.loop.call(run_then_close())
        assert not pid_alive(pid), "the worker worn out before the close is still running"
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
