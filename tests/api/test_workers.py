"""The worker threads lend a spare while one of theirs waits (`api.workers.Workers`,
`emulator.waiting`): work submitted meanwhile runs though every thread waits, and once the waits
end the pool is its size again. Events only: nothing is timed."""

from __future__ import annotations

import threading

from ptc_emulator.api.workers import Workers
from ptc_emulator.emulator import waiting


def test_work_runs_while_every_thread_waits_with_a_spare_lent() -> None:
    pool = Workers(2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def wait() -> None:
        with waiting.waiting():
            started.release()
            release.wait(60)

    try:
        waiters = [pool.submit(wait) for _ in range(5)]  # more than the pool's size
        for _ in waiters:
            assert started.acquire(timeout=60)
        assert pool.lending == 5
        assert pool.submit(lambda: "answered").result(timeout=60) == "answered"
        release.set()
        for waiter in waiters:
            waiter.result(timeout=60)
        assert pool.lending == 0 and pool._max_workers == 2
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_past_the_spares_a_wait_is_refused_and_holds_no_thread_of_the_pool() -> None:
    """Before, a thread past the spares waited as one of the pool's own: enough of them took
    every thread (the other parts' requests of a replica stalled for the waits' length)."""
    pool = Workers(1, spare=1)
    release = threading.Event()
    started = threading.Semaphore(0)

    def wait() -> str:
        try:
            with waiting.waiting():
                started.release()
                release.wait(60)
        except waiting.NoSpare:
            return "refused"
        return "waited"

    try:
        first = pool.submit(wait)
        assert started.acquire(timeout=60)
        second = pool.submit(wait)  # runs in the spare lent for the first; none is left to lend
        assert second.result(timeout=60) == "refused"
        assert pool.lending == 1
        assert pool.submit(lambda: "answered").result(timeout=60) == "answered"
        release.set()
        assert first.result(timeout=60) == "waited"
        assert pool.lending == 0 and pool._max_workers == 1
    finally:
        release.set()
        pool.shutdown(wait=True)


def test_a_thread_of_no_such_pool_waits_as_it_is() -> None:
    with waiting.waiting():
        pass
