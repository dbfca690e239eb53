"""A process's first V8 isolates made by several threads at once (a worker's housekeeping thread
making its first spare context while a program that came at once makes its own) must not abort
the process. V8 sets up a process-wide address-space pool with the first isolate, and two threads
doing it at once hit PartitionAlloc's fatal "Check failed: !IsConfigurablePoolInitialized()"
(SIGTRAP): before `sandbox/_v8.py` made the first isolate alone, about one fresh process in six
aborted here. Each run is a fresh process, as only the first isolates race."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

from ptc_emulator.sandbox.pool import worker_environment

PROBE = textwrap.dedent(
    """
    import threading
    from ptc_emulator.sandbox import _v8

    _v8.init()
    start = threading.Barrier(3)
    made = []

    def make():
        start.wait()
        made.append(_v8.Context(64 * 2**20))

    threads = [threading.Thread(target=make) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for context in made:
        context.close()
    print(len(made))
    """
)

RUNS = 24


def run_probe(_: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env=worker_environment(),
    )


def test_threads_making_the_first_isolates_at_once_do_not_abort_the_process() -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run_probe, range(RUNS)))
    failed = [(r.returncode, r.stderr[-400:]) for r in results if r.returncode != 0 or r.stdout.strip() != "3"]
    assert not failed, f"{len(failed)} of {RUNS} processes failed; first: {failed[0]}"
