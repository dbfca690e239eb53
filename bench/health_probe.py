"""Another client's view of the server while a bench's request runs: `GET /_emulator/health` asked
every `every_s` from a thread of its own, each answer's latency kept (bench/stored_reads.py,
bench/ws_flood.py)."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator

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


def one_request(base: str, send: Callable[[], httpx.Response], status: int, every_s: float) -> dict[str, float]:
    """`figures` of the health checks asked around one request (from a moment before it to a
    moment after, so what it left behind counts too), and how long the request itself took; a
    reply without `status` is an error (bench/front_door_holds.py, bench/huge_ints.py)."""
    with probing(base, every_s) as latencies:
        time.sleep(0.1)
        asked = time.perf_counter()
        reply = send()
        took = time.perf_counter() - asked
        time.sleep(0.3)  # what the request left behind is measured too
    if reply.status_code != status:
        raise RuntimeError(f"{reply.status_code}: {reply.text[:300]}")
    return {**figures(latencies), "request s": took}
