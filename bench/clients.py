"""Concurrent benchmark clients: threads that each count (resumes, requests) until they stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Counts = list[int]
"""One client's [resumes, requests]."""


def rates(clients: int, work: Callable[[Counts], None]) -> tuple[float, float]:
    """(resumes/s, requests/s) over `clients` threads each running `work(counts)`; the first error
    any of them raised is raised here, after all have ended (never a hang)."""
    counts = [[0, 0] for _ in range(clients)]
    errors: list[BaseException] = []

    def run(mine: Counts) -> None:
        try:
            work(mine)
        except BaseException as e:  # report it; never hang the benchmark
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in counts]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    elapsed = time.monotonic() - began
    return sum(c[0] for c in counts) / elapsed, sum(c[1] for c in counts) / elapsed
