"""Crash attribution: a worker that dies is blamed on no program that did not kill it, and it leaves
the pool's list of workers (what health shows) at once, not at the next request.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from ptc_emulator.sandbox import Completed, PoolConfig
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


# A program that does kill its worker is still blamed, once: see test_sandbox_limits.py's
# test of V8 aborts (`crashes == 2` for two bombs, each run twice before it is blamed).
