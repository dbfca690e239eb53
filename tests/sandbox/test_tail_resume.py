"""A tail-only live resume: the worker that holds a program is sent only the new results, with
the length and digest of the journal they continue; a worker that does not hold that very state
answers `miss`, and the pool sends the whole program (a replay, with the same outcome)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ptc_emulator.sandbox import Outcome, PendingCall, PoolConfig, Program, Suspended, ToolResult
from ptc_emulator.sandbox._wire import digest_and_size, extend_digest, journal_to_json, program_key, program_to_json
from ptc_emulator.sandbox.pool import worker_environment
from tests.sandbox.sandbox_harness import LoopThread, SyncPool
from tests.sandbox.sandbox_support import SEQ50, answer, outcome_json, program
from tests.sandbox.sandbox_support import drive as run_drive


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


def test_every_live_resume_of_a_chain_is_sent_its_tail_only(loop_thread: LoopThread) -> None:
    cached = SyncPool(loop_thread, PoolConfig(size=1, live_cache=4))
    plain = SyncPool(loop_thread, PoolConfig(size=1, live_cache=0))
    try:
        drive = cached.drive(program(SEQ50), answer)
        again = plain.drive(program(SEQ50), answer)
        assert [outcome_json(o) for o in drive.suspensions] == [outcome_json(o) for o in again.suspensions]
        assert outcome_json(drive.outcome) == outcome_json(again.outcome)
        assert cached.pool.live_hits == len(drive.suspensions) == 50
        assert cached.pool.tail_misses == 0
    finally:
        cached.close()
        plain.close()


def test_a_tail_the_holder_no_longer_has_falls_back_to_the_whole_program(loop_thread: LoopThread) -> None:
    # One live place in one worker: b's suspension evicts a, which the pool still takes for held.
    cached = SyncPool(loop_thread, PoolConfig(size=1, live_cache=1))
    plain = SyncPool(loop_thread, PoolConfig(size=1, live_cache=0))
    try:
        first_a = cached.run(program(SEQ50, seed=11))
        first_b = cached.run(program(SEQ50, seed=12))
        assert isinstance(first_a, Suspended) and isinstance(first_b, Suspended)
        resumed = program(SEQ50, seed=11, journal=[answer(c) for c in first_a.pending])
        hits = cached.pool.live_hits
        assert outcome_json(cached.run(resumed)) == outcome_json(plain.run(resumed))
        assert cached.pool.tail_misses == 1
        assert cached.pool.live_hits == hits  # replayed, not resumed live
    finally:
        cached.close()
        plain.close()


def test_the_pool_forgets_programs_its_worker_can_no_longer_hold(loop_thread: LoopThread) -> None:
    # One live place in one worker: of three programs the pool keeps track of the last two (twice
    # the worker's places), so the first one's resume is sent whole at once, not as a tail first.
    cached = SyncPool(loop_thread, PoolConfig(size=1, live_cache=1))
    plain = SyncPool(loop_thread, PoolConfig(size=1, live_cache=0))
    try:
        firsts = [cached.run(program(SEQ50, seed=seed)) for seed in (21, 22, 23)]
        assert all(isinstance(o, Suspended) for o in firsts)
        pending = firsts[0].pending if isinstance(firsts[0], Suspended) else ()
        resumed = program(SEQ50, seed=21, journal=[answer(c) for c in pending])
        assert outcome_json(cached.run(resumed)) == outcome_json(plain.run(resumed))
        assert (cached.pool.live_hits, cached.pool.tail_misses) == (0, 0)  # replayed, no tail tried
    finally:
        cached.close()
        plain.close()


def test_equal_results_in_new_objects_still_resume_live_by_their_tail(loop_thread: LoopThread) -> None:
    # A server parses every request anew: each step's journal is equal to the last one's, entry
    # by entry, without being made of the same objects.
    cached = SyncPool(loop_thread, PoolConfig(size=1, live_cache=4))
    plain = SyncPool(loop_thread, PoolConfig(size=1, live_cache=0))

    def run_copied(prog: Program) -> Outcome:
        copies = tuple(ToolResult(r.name, r.arguments, r.output, r.is_error) for r in prog.journal)
        return cached.run(program(SEQ50, journal=copies))

    try:
        drive = run_drive(run_copied, program(SEQ50), answer)
        again = plain.drive(program(SEQ50), answer)
        assert [outcome_json(o) for o in drive.suspensions] == [outcome_json(o) for o in again.suspensions]
        assert outcome_json(drive.outcome) == outcome_json(again.outcome)
        assert cached.pool.live_hits == 50
        assert cached.pool.tail_misses == 0
    finally:
        cached.close()
        plain.close()


def test_a_journal_that_differs_from_the_held_one_in_an_early_entry_is_sent_whole(loop_thread: LoopThread) -> None:
    cached = SyncPool(loop_thread, PoolConfig(size=1, live_cache=4))
    plain = SyncPool(loop_thread, PoolConfig(size=1, live_cache=0))
    try:
        journal: list[ToolResult] = []
        outcome = cached.run(program(SEQ50))
        for _ in range(3):  # three steps, each resumed live: the holder has consumed 3 results
            assert isinstance(outcome, Suspended)
            journal += [answer(c) for c in outcome.pending]
            outcome = cached.run(program(SEQ50, journal=journal))
        assert isinstance(outcome, Suspended)
        assert (cached.pool.live_hits, cached.pool.tail_misses) == (3, 0)
        # The next step's journal, but with its first result told otherwise: not the state the
        # holder is in, so the pool sends it whole (no tail named), and the holder replays it.
        first = journal[0]
        told_otherwise = [ToolResult(first.name, first.arguments, "1000"), *journal[1:]]
        tampered = program(SEQ50, journal=[*told_otherwise, *(answer(c) for c in outcome.pending)])
        assert outcome_json(cached.run(tampered)) == outcome_json(plain.run(tampered))
        assert (cached.pool.live_hits, cached.pool.tail_misses) == (3, 0)
    finally:
        cached.close()
        plain.close()


class Worker:
    """One worker process spoken to over its own protocol, one JSON line each way."""

    def __init__(self) -> None:
        argv = [sys.executable, "-I", "-m", "ptc_emulator.sandbox._worker", "--live-cache", "4"]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_environment(), text=True
        )
        assert "ready" in self.read()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the worker ended"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()


def test_the_worker_checks_the_digest_of_the_prefix_it_is_told_it_holds() -> None:
    start = program(SEQ50)
    key = program_key(start)
    worker = Worker()
    try:
        first = worker.ask({"id": 1, "program": program_to_json(start), "key": key})
        assert first["cached"] and not first["hit"]
        pending = first["outcome"]["pending"]
        one = program(SEQ50, journal=[answer(PendingCall(*pending[0]))])
        tail = journal_to_json(one.journal)
        right = digest_and_size([])[0]
        wrong = digest_and_size([["add", "{}", "1", False]])[0]
        # A digest of another prefix, or another length: a miss, and the held state stays.
        assert worker.ask({"id": 2, "key": key, "tail": tail, "prefix": 0, "digest": wrong}) == {"id": 2, "miss": True}
        assert worker.ask({"id": 3, "key": key, "tail": tail, "prefix": 1, "digest": right}) == {"id": 3, "miss": True}
        assert worker.ask({"id": 4, "key": "another", "tail": tail, "prefix": 0, "digest": right})["miss"]
        # The right digest resumes it live, with the outcome the whole program replayed gets.
        live = worker.ask({"id": 5, "key": key, "tail": tail, "prefix": 0, "digest": right})
        assert live["hit"] and live["cached"]
        replayed = worker.ask({"id": 6, "program": program_to_json(one), "key": None})
        assert not replayed["hit"]
        assert live["outcome"] == replayed["outcome"]
    finally:
        worker.close()


def test_the_worker_extends_the_digest_it_holds_by_each_resumes_results() -> None:
    start = program(SEQ50)
    key = program_key(start)
    worker = Worker()
    try:
        first = worker.ask({"id": 1, "program": program_to_json(start), "key": key})
        journal: list[ToolResult] = [answer(PendingCall(*first["outcome"]["pending"][0]))]
        tail = journal_to_json(tuple(journal))
        root = digest_and_size([])
        live = worker.ask({"id": 2, "key": key, "tail": tail, "prefix": 0, "digest": root[0]})
        assert live["hit"] and live["cached"]
        # It now holds one result: named by the chain's digest of it, not by that of its JSON text.
        journal.append(answer(PendingCall(*live["outcome"]["pending"][0])))
        tail = journal_to_json(tuple(journal[1:]))
        text = json.dumps(journal_to_json(tuple(journal[:1])), separators=(",", ":"))
        text_digest = hashlib.sha256(text.encode()).hexdigest()  # how the prefix was named before
        ask = {"id": 3, "key": key, "tail": tail, "prefix": 1, "digest": text_digest}
        assert worker.ask(ask) == {"id": 3, "miss": True}
        chained = extend_digest(*root, journal_to_json(tuple(journal[:1])))[0]
        live = worker.ask({"id": 4, "key": key, "tail": tail, "prefix": 1, "digest": chained})
        assert live["hit"] and live["cached"]
        # A resume sent whole (its journal extends the held one) leaves the digest right as well.
        journal.append(answer(PendingCall(*live["outcome"]["pending"][0])))
        whole = worker.ask({"id": 5, "program": program_to_json(program(SEQ50, journal=journal)), "key": key})
        assert whole["hit"] and whole["cached"]
        journal.append(answer(PendingCall(*whole["outcome"]["pending"][0])))
        held = digest_and_size(journal_to_json(tuple(journal[:3])))[0]
        tail = journal_to_json(tuple(journal[3:]))
        live = worker.ask({"id": 6, "key": key, "tail": tail, "prefix": 3, "digest": held})
        assert live["hit"] and live["cached"]
        replayed = worker.ask({"id": 7, "program": program_to_json(program(SEQ50, journal=journal)), "key": None})
        assert live["outcome"] == replayed["outcome"]
    finally:
        worker.close()
