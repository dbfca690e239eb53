"""The pool's dispatch of waiting programs to workers (issue 38): by client, not first in, first out.

The pool runs here without processes: stand-in workers are put idle by hand and the waiters are
`Pool._acquire` calls, so the order in which they get a worker is seen exactly. `_spawn` is
replaced by one that makes stand-ins, so an extra worker (a burst) is counted, not started.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ptc_emulator.sandbox import pool as pool_module
from ptc_emulator.sandbox.pool import Pool, PoolConfig, next_client


class _Proc:
    returncode: int | None = None
    pid = 0


class _Worker:
    """What the dispatch looks at of a worker: whether its process still runs, and `retire`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc = _Proc()
        self.retired = False  # what the stand-in records
        self.starts = 0

    async def retire(self) -> None:
        self.retired = True


def _pool(size: int, burst: int | None = 0, burst_after_s: float = 0.0) -> tuple[Pool, list[Any]]:
    pool = Pool(PoolConfig(size=size, burst=burst, burst_after_s=burst_after_s))
    workers: list[Any] = [_Worker(f"w{i}") for i in range(size)]
    pool._workers.update(workers)
    started: list[Any] = []

    async def spawn() -> Any:
        worker: Any = _Worker(f"burst{len(started)}")
        started.append(worker)
        pool._workers.add(worker)
        return worker

    pool._spawn = spawn  # type: ignore[method-assign]
    return pool, started


def _retired(worker: object) -> bool:
    return isinstance(worker, _Worker) and worker.retired


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_next_client_takes_the_fewest_held_then_the_longest_unserved() -> None:
    assert next_client([], {}, {}) is None
    assert next_client(["a", "b"], {"a": 1}, {}) == "b"
    assert next_client(["a", "b"], {"a": 1, "b": 1}, {"a": 5, "b": 3}) == "b"
    assert next_client(["a", "b"], {}, {"a": 5}) == "b", "never counted comes first"
    assert next_client(["a", "b", "c"], {"a": 2, "b": 2, "c": 3}, {"a": 1, "b": 0}) == "b"


def test_waiting_programs_take_turns_by_client_not_by_arrival() -> None:
    async def scenario() -> list[str]:
        pool, _ = _pool(size=1)
        [worker] = pool._workers
        order: list[str] = []

        async def one(client: str, name: str) -> None:
            got = await pool._acquire(client, None)
            order.append(name)
            await pool._release(got)

        pool._put_idle(worker)
        first = await pool._acquire("a", None)  # client a holds the only worker
        tasks = [asyncio.ensure_future(one("a", f"a{i}")) for i in range(1, 4)]
        await _settle()
        tasks += [asyncio.ensure_future(one("b", "b1")), asyncio.ensure_future(one("b", "b2"))]
        await _settle()
        assert pool.waiting == 5
        await pool._release(first)
        await asyncio.gather(*tasks)
        assert pool._held == {} and pool._queues == {}
        return order

    # First in, first out would give a1 a2 a3 b1 b2: b's first program waited for all of a's. b came
    # after a was last served: it joins the ring after a, then they take turns.
    assert asyncio.run(scenario()) == ["a1", "b1", "a2", "b2", "a3"]


def test_a_client_served_before_outranks_scopes_that_came_since() -> None:
    """Scopes are names callers make up: runaway programs sent under a dozen fresh scopes, each
    counted as never served, went before a client served earlier (a hostile pass kept such a
    client's trivial program waiting 14 s on two workers). A client is remembered after it leaves;
    one that comes joins the ring at its end."""

    async def scenario() -> list[str]:
        pool, _ = _pool(size=1)
        [worker] = pool._workers
        pool._put_idle(worker)
        await pool._release(await pool._acquire("victim", None))  # served once, then gone
        order: list[str] = []

        async def one(client: str) -> None:
            got = await pool._acquire(client, None)
            order.append(client)
            await pool._release(got)

        runaway = await pool._acquire("fresh0", None)
        tasks = [asyncio.ensure_future(one(f"fresh{i}")) for i in range(1, 4)]
        await _settle()
        tasks.append(asyncio.ensure_future(one("victim")))
        await _settle()
        await pool._release(runaway)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["victim", "fresh1", "fresh2", "fresh3"]


def test_the_clients_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "REMEMBERED_CLIENTS", 3)

    async def scenario() -> list[str]:
        pool, _ = _pool(size=1)
        [worker] = pool._workers
        pool._put_idle(worker)
        for client in ("a", "b", "c", "d", "b"):
            await pool._release(await pool._acquire(client, None))
        return list(pool._served)

    assert asyncio.run(scenario()) == ["c", "d", "b"]


def test_a_client_alone_gets_every_worker_and_no_burst() -> None:
    async def scenario() -> None:
        pool, started = _pool(size=2, burst=None)
        for worker in list(pool._workers):
            pool._put_idle(worker)
        held = [await pool._acquire("a", None), await pool._acquire("a", None)]
        assert len(set(held)) == 2
        waiter = asyncio.ensure_future(pool._acquire("a", None))
        await _settle()
        assert started == [] and pool.bursts == 0 and not waiter.done()
        await pool._release(held[0])
        assert await waiter is held[0]

    asyncio.run(scenario())


def test_a_client_holding_no_worker_gets_a_burst_worker_retired_when_done() -> None:
    async def scenario() -> None:
        pool, started = _pool(size=1, burst=None)
        [worker] = pool._workers
        pool._put_idle(worker)
        runaway = await pool._acquire("a", None)
        queued = asyncio.ensure_future(pool._acquire("a", None))  # a holds one: it waits its turn
        await _settle()
        assert started == []
        other = await pool._acquire("b", None)  # b holds none, every worker is busy: a burst
        assert started == [other] and pool.bursts == 1 and not queued.done()
        more = asyncio.ensure_future(pool._acquire("c", None))
        await _settle()
        assert not more.done() and len(started) == 1, "at most `size` extra workers (here one)"
        await pool._release(other)  # the pool is beyond its size: the freed worker goes to c only
        assert await more is other and not queued.done()
        await pool._release(other)  # nobody holding none waits: retired, not given to a
        await _settle()
        assert _retired(other) and other not in pool._workers and not queued.done()
        await pool._release(runaway)
        assert await queued is runaway and not _retired(runaway)

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    async def scenario() -> None:
        pool, _ = _pool(size=1)
        [worker] = pool._workers
        pool._put_idle(worker)
        held = await pool._acquire("a", None)
        gone = asyncio.ensure_future(pool._acquire("b", None))
        stays = asyncio.ensure_future(pool._acquire("c", None))
        await _settle()
        gone.cancel()
        await _settle()
        await pool._release(held)
        assert await stays is held and pool.waiting == 0

    asyncio.run(scenario())


def test_no_burst_while_a_busy_worker_has_only_just_started_its_program() -> None:
    async def scenario() -> None:
        pool, started = _pool(size=1, burst=None, burst_after_s=3600)
        [worker] = pool._workers
        pool._put_idle(worker)
        busy = await pool._acquire("a", None)
        waiter = asyncio.ensure_future(pool._acquire("b", None))
        await _settle()
        assert started == [] and not waiter.done(), "the busy worker may be freed soon"
        pool._since[busy] -= 3600  # its program has now run `burst_after_s`
        pool._dispatch()
        other = await waiter
        assert started == [other] and pool.bursts == 1

    asyncio.run(scenario())
