"""What `make test-fast` (the unit tier) costs: pytest's own time, the wall clock and the CPU.

    .venv/bin/python bench/unit_tier.py                      # 3 runs, about a minute on two idle cores
    .venv/bin/python bench/unit_tier.py --runs 5
    .venv/bin/python bench/unit_tier.py --against /tmp/old   # interleaved with another checkout's tests
    .venv/bin/python bench/unit_tier.py --xdist              # each run again with `-n 2`

Each run is `python -m pytest -m unit tests/unit -q -p no:cacheprovider` in a subprocess, as
`make test-fast` runs it (bytecode written and read), after one unmeasured run that writes the
bytecode. Printed per run and as medians: pytest's figure ("... in N s"), the process's wall
clock, its CPU seconds (user + system), and the tests it counted; then whether pytest's median
is under the issue's goal (15 s on an idle 2-core machine). The load average is printed before
and after: on a busy machine the wall-clock figures are several times an idle one's; read the
CPU seconds, and compare checkouts with `--against` (the runs alternate, so a busy neighbour
slows both alike). `--against DIR` runs DIR's tests/unit with this checkout's environment: DIR
must be a copy of the project whose app and engine are this one's (`git archive REV | tar -x`).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 15.0
COMMAND = ["-m", "pytest", "-m", "unit", "tests/unit", "-q", "-p", "no:cacheprovider"]
SUMMARY = re.compile(r"(\d+) passed.* in ([\d.]+)s")


def run(where: Path, extra: list[str]) -> tuple[float, float, float, int]:
    """One run in `where`: (pytest's seconds, wall seconds, CPU seconds, tests passed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *COMMAND, *extra], cwd=where, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = SUMMARY.search(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    if done.returncode != 0 or found is None:
        sys.exit(f"the unit tier failed in {where}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return float(found.group(2)), wall, cpu, int(found.group(1))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout whose tests/unit to run interleaved")
    parser.add_argument("--xdist", action="store_true", help="each run again with `-n 2`")
    options = parser.parse_args()
    sides: list[tuple[str, Path, list[str]]] = [("this", ROOT, [])]
    if options.xdist:
        sides.append(("this -n 2", ROOT, ["-n", "2"]))
    if options.against:
        sides.append(("against", options.against.resolve(), []))
    print(f"load average at start: {load()}")
    for _, where, extra in sides:
        run(where, extra)  # unmeasured: bytecode written, files cached
    figures: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name, _, _ in sides}
    for n in range(options.runs):
        for name, where, extra in sides:
            figures[name].append(one := run(where, extra))
            print(
                f"  run {n + 1} {name:>10}: pytest {one[0]:6.2f} s  wall {one[1]:6.2f} s  cpu {one[2]:6.2f} s  "
                f"({one[3]} passed; load {load()})"
            )
    print(f"load average at end: {load()}")
    for name, runs in figures.items():
        pytest_s, wall, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"median {name:>10}: pytest {pytest_s:6.2f} s  wall {wall:6.2f} s  cpu {cpu:6.2f} s")
    mine = statistics.median(r[0] for r in figures["this"])
    print(
        f"goal: pytest's time < {GOAL_S:.0f} s on an idle 2-core machine: {mine:.2f} s here, "
        f"{'met' if mine < GOAL_S else 'not met'} (at the load average above)"
    )


if __name__ == "__main__":
    main()
