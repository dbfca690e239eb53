"""Memory is bounded by bytes, not by counts: the live cache by its programs' heap, the token
cache by characters, the journal by bytes; reset and clearing the journal free what they own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ptc_emulator.emulator.journal.entries import Journal, JournalEntry
from ptc_emulator.emulator.responses import usage
from ptc_emulator.sandbox import PoolConfig, Suspended
from tests.sandbox.sandbox_harness import LoopThread, SyncPool
from tests.sandbox.sandbox_support import answer, outcome_json, program

# Keeps about 24 MB of heap reachable while it waits for its one call.
HEAVY = (
    "const keep = Array.from({length: 3e6}, (_, i) => i + 0.5);\n"
    "const r = await tools.add({a: 1, b: 2});\n"
    "text(String(keep.length + r));"
)


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


def test_the_live_cache_is_bounded_by_heap_bytes_and_evicts_to_replay(loop_thread: LoopThread) -> None:
    pool = SyncPool(loop_thread, PoolConfig(size=1, live_cache=64, live_cache_bytes=40 * 2**20))
    try:
        a = program(HEAVY, seed=1)
        b = program(HEAVY, seed=2)
        first_a, first_b = pool.run(a), pool.run(b)
        assert isinstance(first_a, Suspended) and isinstance(first_b, Suspended)
        hits = pool.pool.live_hits
        # Both together exceed the bound: the older one (a) was evicted and replays; b is live.
        end_a = pool.run(program(HEAVY, seed=1, journal=[answer(c) for c in first_a.pending]))
        assert pool.pool.live_hits == hits
        end_b = pool.run(program(HEAVY, seed=2, journal=[answer(c) for c in first_b.pending]))
        assert pool.pool.live_hits == hits + 1
        assert outcome_json(end_a) == outcome_json(end_b)
        assert end_a.status == "completed", end_a
    finally:
        pool.close()


def test_a_small_program_stays_live_under_the_default_bound(loop_thread: LoopThread) -> None:
    pool = SyncPool(loop_thread, PoolConfig(size=1, live_cache=64))
    try:
        first = pool.run(program(HEAVY, seed=3))
        assert isinstance(first, Suspended)
        pool.run(program(HEAVY, seed=3, journal=[answer(c) for c in first.pending]))
        assert pool.pool.live_hits == 1
    finally:
        pool.close()


def test_the_token_cache_is_bounded_by_characters_and_can_be_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bound of 2.5 M characters, so five texts of a million each go past it (at the default
    # 16 Mi, five would fit and the bound would never be reached).
    monkeypatch.setattr(usage, "MAX_CACHED_CHARS", 2_500_000)
    usage.clear_cache()
    big = "word " * 200_000  # a million characters
    for i in range(5):
        assert usage.count(f"{i} {big}") > 0
    assert 0 < usage.cached_chars() <= usage.MAX_CACHED_CHARS
    assert usage.count(big) == usage.count(big)
    usage.clear_cache()
    assert usage.cached_chars() == 0


def test_the_journal_is_bounded_by_bytes_and_clear_frees_it() -> None:
    journal = Journal(limit=10_000, max_bytes=1_000_000)
    for seq in range(100):
        journal.record(
            JournalEntry(
                seq=seq,
                at=0.0,
                scope=None,
                method="POST",
                path="/v1/responses",
                status=200,
                request={"input": "x" * 50_000},
                response={"id": f"resp_{seq}"},
            )
        )
    assert journal.bytes <= 1_000_000
    kept = journal.entries()
    assert 0 < len(kept) < 100 and kept[-1].seq == 99  # the newest are kept
    journal.clear()
    assert journal.bytes == 0 and journal.entries() == []
