"""How long one client's trivial program waits while another's runaway programs hold every worker.

    .venv/bin/python bench/fair_workers.py [--workers 2] [--runaways 6] [--timeout 5] [--rounds 3]
    .venv/bin/python bench/fair_workers.py --scopes 12 --runaways 12 --old /tmp/old   # and before

A `Pool` of `--workers` workers; client `runaway` sends `--runaways` `while (true) {}` programs
(deadline `--timeout` s; with `--scopes N`, spread over N clients, `runaway0`...: scopes are names a
caller makes up), then client `other`, served before, sends `text('quick')`. Printed: the median wait of
the quick program over `--rounds` rounds with the extra workers on (the default: as many as
`--workers`) and off (`burst=0`: the quick one still goes first, but only once a runaway program
ends), next to the same program on an idle pool, and the resident memory of one idle worker (what
each extra worker costs while it lives). Also: 8 clients sending 50 trivial programs each at once,
the total time and the extra workers that started (none should: `burst_after_s`). Before the
dispatch by client, programs were served first in, first out: the quick program waited for
ceil(runaways / workers) deadlines. With `--old DIR` (another checkout, `git archive COMMIT | tar
-x -C DIR`) the same is run on its code first, each in a process of its own, printed side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _round(pool: Any, runaways: int, scopes: int, timeout_s: float) -> float:
    spin = Program("while (true) {}", (), 7, 0, (), Limits(timeout_s=timeout_s))
    held = [asyncio.ensure_future(pool.run(spin, f"runaway{i % scopes}")) for i in range(runaways)]
    extra = pool.config.size if pool.config.burst is None else pool.config.burst
    busy = min(runaways, pool.config.size + (extra if scopes > 1 else 0))
    while len(pool._serving) < busy or pool.waiting < runaways - busy:  # every worker busy, the rest queued
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


async def _idle(pool: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        await pool.run(QUICK, "other")
        times.append(time.perf_counter() - began)
    return statistics.median(times)


async def _many_short(pool: Any, clients: int, each: int) -> tuple[float, int]:
    """`clients` clients sending `each` trivial programs at once, one after another each: the
    total time and the extra workers started (short programs should start none)."""
    bursts = pool.bursts

    async def client(name: str) -> None:
        for _ in range(each):
            await pool.run(QUICK, name)

    began = time.perf_counter()
    await asyncio.gather(*(client(f"c{i}") for i in range(clients)))
    return time.perf_counter() - began, pool.bursts - bursts


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for burst in (None, 0):
        async with Pool(PoolConfig(size=args.workers, burst=burst, live_cache=0)) as pool:
            idle = await _idle(pool, 5)
            rss = statistics.median(_rss_mib(pid) for pid in pool.pids)
            short, short_bursts = await _many_short(pool, 8, 50)
            waits = [await _round(pool, args.runaways, args.scopes, args.timeout) for _ in range(args.rounds)]
            results["on" if burst is None else "off"] = {
                "quick program waited ms": 1000 * statistics.median(waits),
                "its longest round ms": 1000 * max(waits),
                "idle pool ms": 1000 * idle,
                "extra workers started": pool.bursts,
                "idle worker RSS MiB": rss,
                "8x50 trivial at once ms": 1000 * short,
                "extra workers for them": short_bursts,
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runaways", type=int, default=6)
    parser.add_argument("--scopes", type=int, default=1, help="the clients the runaway programs are spread over")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.code:
        if args.code != "here":  # another checkout's code, through this venv's editable install
            finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
            for name, path in finder.MAPPING.items():
                finder.MAPPING[name] = str(Path(args.code) / Path(path).relative_to(ROOT))
        global Limits, Pool, PoolConfig, Program, QUICK
        from ptc_emulator.sandbox import Limits, Pool, PoolConfig, Program

        QUICK = Program("text('quick')", (), 7, 0, (), Limits())
        print(json.dumps(asyncio.run(measure(args))))
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    given = [a for a in sys.argv[1:] if a != "--old" and a != args.old]
    by_mode = {
        label: json.loads(
            subprocess.run(
                [sys.executable, __file__, *given, "--code", code], check=True, capture_output=True, text=True, cwd=ROOT
            ).stdout.splitlines()[-1]
        )
        for label, code in modes.items()
    }
    print(
        f"{args.runaways} runaway programs under {args.scopes} scope(s), "
        f"{args.workers} workers, timeout {args.timeout} s"
    )
    for burst in ("on", "off"):
        print(f"\nextra workers {burst}")
        print(f"  {'':28}" + "".join(f"{label:>12}" for label in by_mode))
        for key in next(iter(by_mode.values()))[burst]:
            print(f"  {key:28}" + "".join(f"{r[burst][key]:12.1f}" for r in by_mode.values()))
    fifo = -(-args.runaways // args.workers) * args.timeout
    print(f"\nfirst in, first out (before dispatch by client): about {fifo:.0f} s")


if __name__ == "__main__":
    main()
