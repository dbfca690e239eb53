"""Another client's view of the server while a bench's request runs: `GET /_emulator/health` asked
every `every_s` from a thread of its own, each answer's latency kept (bench/stored_reads.py,
bench/ws_flood.py)."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator

import httpx


@contextlib.contextmanager
def probing(base: str, every_s: float) -> Iterator[list[float]]:
    """The latencies, in seconds, of the health checks asked while the block runs."""
    latencies: list[float] = []
    done = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            while not done.is_set():
                asked = time.perf_counter()
                http.get("/_emulator/health").raise_for_status()
                latencies.append(time.perf_counter() - asked)
                time.sleep(every_s)

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        yield latencies
    finally:
        done.set()
        pinger.join()


def figures(latencies: list[float]) -> dict[str, float]:
    return {"health max ms": 1000 * max(latencies), "health median ms": 1000 * statistics.median(latencies)}
