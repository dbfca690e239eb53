"""How long one client's trivial program waits while another's runaway programs hold every worker.

    .venv/bin/python bench/fair_workers.py [--workers 2] [--runaways 6] [--timeout 5] [--rounds 3]

A `Pool` of `--workers` workers; client `runaway` sends `--runaways` `while (true) {}` programs
(deadline `--timeout` s), then client `other` sends `text('quick')`. Printed: the median wait of
the quick program over `--rounds` rounds with the extra workers on (the default: as many as
`--workers`) and off (`burst=0`: the quick one still goes first, but only once a runaway program
ends), next to the same program on an idle pool, and the resident memory of one idle worker (what
each extra worker costs while it lives). Also: 8 clients sending 50 trivial programs each at once,
the total time and the extra workers that started (none should: `burst_after_s`). Before the
dispatch by client, programs were served first in, first out: the quick program waited for
ceil(runaways / workers) deadlines.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from ptc_emulator.sandbox import Limits, Pool, PoolConfig, Program

QUICK = Program("text('quick')", (), 7, 0, (), Limits())


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _round(pool: Pool, runaways: int, timeout_s: float) -> float:
    spin = Program("while (true) {}", (), 7, 0, (), Limits(timeout_s=timeout_s))
    held = [asyncio.ensure_future(pool.run(spin, "runaway")) for _ in range(runaways)]
    while pool.waiting < runaways - pool.config.size:  # every worker busy, the rest queued
        await asyncio.sleep(0.01)
    began = time.perf_counter()
    await pool.run(QUICK, "other")
    waited = time.perf_counter() - began
    for task in held:
        task.cancel()  # their workers are killed and replaced
    await asyncio.gather(*held, return_exceptions=True)
    while len(pool.pids) != pool.config.size or pool.waiting:
        await asyncio.sleep(0.05)
    return waited


async def _idle(pool: Pool, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        await pool.run(QUICK, "other")
        times.append(time.perf_counter() - began)
    return statistics.median(times)


async def _many_short(pool: Pool, clients: int, each: int) -> tuple[float, int]:
    """`clients` clients sending `each` trivial programs at once, one after another each: the
    total time and the extra workers started (short programs should start none)."""
    bursts = pool.bursts

    async def client(name: str) -> None:
        for _ in range(each):
            await pool.run(QUICK, name)

    began = time.perf_counter()
    await asyncio.gather(*(client(f"c{i}") for i in range(clients)))
    return time.perf_counter() - began, pool.bursts - bursts


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runaways", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for burst in (None, 0):
        async with Pool(PoolConfig(size=args.workers, burst=burst, live_cache=0)) as pool:
            idle = await _idle(pool, 5)
            rss = statistics.median(_rss_mib(pid) for pid in pool.pids)
            short, short_bursts = await _many_short(pool, 8, 50)
            waits = [await _round(pool, args.runaways, args.timeout) for _ in range(args.rounds)]
            name = "extra workers on " if burst is None else "extra workers off"
            print(
                f"{name}: quick program waited median {statistics.median(waits) * 1000:8.1f} ms "
                f"(rounds {', '.join(f'{w * 1000:.0f}' for w in waits)} ms; idle pool {idle * 1000:.1f} ms; "
                f"extra workers started {pool.bursts}; idle worker RSS {rss:.0f} MiB)"
            )
            print(f"  8 clients x 50 trivial programs at once: {short * 1000:.0f} ms, {short_bursts} extra workers")
    fifo = -(-args.runaways // args.workers) * args.timeout
    print(f"first in, first out (before): about {fifo:.0f} s ({args.runaways} runaways / {args.workers} workers)")


if __name__ == "__main__":
    asyncio.run(main())
