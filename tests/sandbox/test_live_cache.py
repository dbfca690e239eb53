"""The warm cache of live programs changes no result: with it and without it, every step of every
program has the same outcome, and every way of missing it (no copy, a restart, another worker, a
journal that differs) falls back to replay and still gets that outcome."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ptc_emulator.sandbox import PendingCall, PoolConfig, Program, Suspended, ToolResult
from ptc_emulator.sandbox import pool as pool_module
from tests.sandbox.sandbox_harness import LoopThread, SyncPool
from tests.sandbox.sandbox_support import (
    CAUGHT_ERROR,
    FANOUT9,
    RACE,
    RANDOM_AND_CLOCK,
    SEQ50,
    THROW_AFTER_AWAIT,
    answer,
    completed_texts,
    outcome_json,
    program,
)

PROGRAMS = {
    "fanout9": FANOUT9,
    "seq50": SEQ50,
    "race": RACE,
    "caught_error": CAUGHT_ERROR,
    "throw_after_await": THROW_AFTER_AWAIT,
    "random_and_clock": RANDOM_AND_CLOCK,
}


@pytest.fixture(scope="module")
def cached(loop_thread: LoopThread) -> Iterator[SyncPool]:
    pool = SyncPool(loop_thread, PoolConfig(size=2, live_cache=64))
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def uncached(loop_thread: LoopThread) -> Iterator[SyncPool]:
    pool = SyncPool(loop_thread, PoolConfig(size=2, live_cache=0))
    yield pool
    pool.close()


def steps(pool: SyncPool, prog: Program, client: Callable[[PendingCall], ToolResult] = answer) -> list[object]:
    """Every outcome on the way to the end, in comparable form."""
    drive = pool.drive(prog, client)
    return [outcome_json(o) for o in [*drive.suspensions, drive.outcome]]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_cache_changes_no_outcome(name: str, cached: SyncPool, uncached: SyncPool) -> None:
    hits = cached.pool.live_hits
    with_cache = steps(cached, program(PROGRAMS[name]))
    without = steps(uncached, program(PROGRAMS[name]))
    assert with_cache == without
    resumes = len(with_cache) - 1
    assert cached.pool.live_hits - hits == resumes  # every resume was live
    assert uncached.pool.live_hits == 0


def test_a_program_the_worker_never_saw_replays(cached: SyncPool, uncached: SyncPool) -> None:
    """Started in one pool, resumed in another (as after a restart, or on another server)."""
    first = uncached.run(program(SEQ50))
    assert isinstance(first, Suspended)
    resumed = program(SEQ50, journal=[answer(c) for c in first.pending])
    hits = cached.pool.live_hits
    assert outcome_json(cached.run(resumed)) == outcome_json(uncached.run(resumed))
    assert cached.pool.live_hits == hits


def test_a_restart_replays(loop_thread: LoopThread, uncached: SyncPool) -> None:
    before = SyncPool(loop_thread, PoolConfig(size=1, live_cache=64))
    try:
        first = before.run(program(FANOUT9))
    finally:
        before.close()  # the live copy dies with its worker
    after = SyncPool(loop_thread, PoolConfig(size=1, live_cache=64))
    try:
        assert isinstance(first, Suspended)
        resumed = program(FANOUT9, journal=[answer(c) for c in first.pending])
        assert outcome_json(after.run(resumed)) == outcome_json(uncached.run(resumed))
        assert after.pool.live_hits == 0
    finally:
        after.close()


def test_a_resume_waits_for_its_busy_holder_rather_than_replay_on_an_idle_worker(
    loop_thread: LoopThread, uncached: SyncPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No deadline on the wait here (the default gives up after 50 ms): the event under test is
    # the holder freeing, whenever that happens on a busy machine.
    monkeypatch.setattr(pool_module, "_HOLDER_WAIT_S", 600.0)
    pool = SyncPool(loop_thread, PoolConfig(size=2, live_cache=64))
    try:
        first = pool.run(program(SEQ50))
        assert isinstance(first, Suspended)
        resumed = program(SEQ50, journal=[answer(c) for c in first.pending])
        # The other worker takes the quick program and is idle again long before the holder ends
        # its spin; the resume still goes to the holder, and is live.
        quick = program("text('done')")
        spin = program("while (true) {}", timeout_s=1.0)
        hits = pool.pool.live_hits
        outcomes = pool.run_many([quick, spin, resumed])
        assert [o.status for o in outcomes[:2]] == ["completed", "failed"]
        assert outcome_json(outcomes[2]) == outcome_json(uncached.run(resumed))
        assert pool.pool.live_hits == hits + 1
    finally:
        pool.close()


def test_another_worker_replays_while_the_holder_is_busy(loop_thread: LoopThread, uncached: SyncPool) -> None:
    pool = SyncPool(loop_thread, PoolConfig(size=2, live_cache=64))
    try:
        first = pool.run(program(SEQ50))
        assert isinstance(first, Suspended)
        resumed = program(SEQ50, journal=[answer(c) for c in first.pending])
        # Both workers busy: the one that started the program (and holds it live) for longer. The
        # resume waits for the holder (50 ms), then takes the worker that frees first, which never
        # saw the program.
        short = program("while (true) {}", timeout_s=0.5)
        long = program("while (true) {}", timeout_s=2.5)
        hits = pool.pool.live_hits
        outcomes = pool.run_many([short, long, resumed])
        assert [o.status for o in outcomes[:2]] == ["failed", "failed"]
        assert outcome_json(outcomes[2]) == outcome_json(uncached.run(resumed))
        assert pool.pool.live_hits == hits  # replayed on the other worker
        # The holder's copy is now stale; the next step goes to the worker with the fresh copy,
        # or replays, with the same outcome either way.
        second = outcomes[2]
        assert isinstance(second, Suspended)
        onward = program(SEQ50, journal=[*resumed.journal, *(answer(c) for c in second.pending)])
        assert outcome_json(pool.run(onward)) == outcome_json(uncached.run(onward))
        assert pool.pool.live_hits == hits + 1
    finally:
        pool.close()


def test_a_journal_that_differs_replays(cached: SyncPool, uncached: SyncPool) -> None:
    """The client answers the same pause twice, differently: the second answer is not the state the
    live copy moved to, so it replays, and gets what a replay gets."""
    first = cached.run(program(SEQ50))
    assert isinstance(first, Suspended)
    (call,) = first.pending
    one = program(SEQ50, journal=[ToolResult(call.name, call.arguments, "1")])
    other = program(SEQ50, journal=[ToolResult(call.name, call.arguments, "1000")])
    hits = cached.pool.live_hits
    assert outcome_json(cached.run(one)) == outcome_json(uncached.run(one))
    assert cached.pool.live_hits == hits + 1
    got = cached.run(other)
    assert outcome_json(got) == outcome_json(uncached.run(other))
    assert cached.pool.live_hits == hits + 1  # no hit for a journal that differs
    assert isinstance(got, Suspended) and json.loads(got.pending[0].arguments)["a"] == 1000


@pytest.mark.parametrize(("step_s", "completed_steps"), [(1.0, 6), (3.0, 4), (4.0, 3)])
def test_a_live_resume_gets_what_is_left_of_the_time_limit(step_s: float, completed_steps: int) -> None:
    """A live resume gets only what the earlier steps left of the 10 s limit, as a replay (which
    runs everything again) would: with a fake clock charging `step_s` per step, the program times
    out at the step that would cross the limit, and never otherwise."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.sandbox.clock_driver", str(step_s)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout)
    if completed_steps == 6:  # 6 steps of 1 s fit in 10 s: the program completes
        assert [o["status"] for o in outcomes] == ["suspended"] * 5 + ["completed"]
        return
    assert [o["status"] for o in outcomes] == ["suspended"] * completed_steps + ["failed"]
    assert outcomes[-1]["kind"] == "timeout"


def test_the_pool_keeps_its_workers_journals_within_bytes(loop_thread: LoopThread) -> None:
    """The pool keeps, for each program a worker holds live, the journal it last sent there (so a
    resume sends only the new results). It kept them by count alone (twice the worker's cache:
    128), while the worker evicts by bytes too: 256 conversations resumed once with a 12 MB tool
    output each kept some 3 GB of journals in the server, the workers having dropped most of
    their copies long before. It keeps at most twice the worker's bytes now (the newest whatever
    its size); a program forgotten there is sent whole next time, with the same outcome."""
    pool = SyncPool(loop_thread, PoolConfig(size=1, live_cache=64, live_cache_bytes=2 * 2**20))
    try:
        code = "const a = await tools.raw({out: 1});\nconst b = await tools.raw({out: 2});\ntext(String(b.length));"
        journals = []
        for n in range(12):  # each held with 1 MB of journal: 12 MB, past 2 x 2 MiB
            first = pool.run(program(code + f"\n// {n}"))
            assert isinstance(first, Suspended)
            journal = [ToolResult("raw", first.pending[0].arguments, str(n) * 2**20)]
            assert isinstance(pool.run(program(code + f"\n// {n}", journal=journal)), Suspended)
            journals.append(journal)
        assert 1 <= pool.pool.live_held <= 4, pool.pool.live_held
        last = ToolResult("raw", '{"out":2}', "done")
        for n in (0, 11):  # forgotten or held: the same outcome
            assert completed_texts(pool.run(program(code + f"\n// {n}", journal=[*journals[n], last]))) == ["4"]
    finally:
        pool.close()
