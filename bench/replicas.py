"""Replicas on PostgreSQL beside one server on SQLite: requests per second and latency.

    .venv/bin/python bench/replicas.py            # about two minutes
    .venv/bin/python bench/replicas.py --quick    # a smoke run

Starts a throwaway PostgreSQL cluster (tests/replicas/cluster.py: as the `postgres` user when
run as root), then, one configuration at a time, 1, 2 and 3 replicas on one database with one
secret, and 1 server on SQLite, each server with one V8 worker. The same clients drive each: 8
threads of the official SDK, each request sent to the next replica in turn (round-robin, as a
load balancer would), each loop one `store: true` program paused at a tool call and its
continuation by `previous_response_id` on another replica. Printed: requests/s, p50 and p99 of
the request latency, with the machine's core count beside them: replicas share its cores, so
on a small machine more replicas add the database's work, not capacity.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' cluster and round-robin client

from ptc_emulator.testing.process import ServerProcess  # noqa: E402
from tests.replicas.cluster import Cluster, why_not  # noqa: E402
from tests.replicas.replicas_support import SECRET, RoundRobin  # noqa: E402

TOOLS: list[Any] = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]
PROGRAM = "```js\nconst x = await tools.add({a: 2, b: 3});\ntext('x=' + x)\n```"
CLIENTS = 8


@contextlib.contextmanager
def servers(tmp: Path, store: str, n: int) -> Iterator[list[ServerProcess]]:
    made = [ServerProcess(tmp / f"s{n}-{i}", store=store, secret=SECRET, workers=1) for i in range(n)]
    try:
        for server in made:
            server.start(timeout=120)
        yield made
    finally:
        for server in made:
            server.stop()


def loop(client: openai.OpenAI, latencies: list[float]) -> None:
    began = time.perf_counter()
    paused = client.responses.create(model="m", input=PROGRAM, tools=TOOLS)
    middle = time.perf_counter()
    (call,) = [i for i in paused.output if i.type == "function_call"]
    answer = {
        "type": "function_call_output",
        "call_id": call.call_id,
        "output": json.dumps(sum(json.loads(call.arguments).values())),
        "caller": call.caller.model_dump() if call.caller else None,
    }
    done = client.responses.create(model="m", previous_response_id=paused.id, input=[answer], tools=TOOLS)
    end = time.perf_counter()
    assert done.output_text == "x=5", done.output_text
    latencies += [middle - began, end - middle]


def measure(replicas: list[ServerProcess], seconds: float) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) with CLIENTS threads for `seconds`, after a warm-up."""
    stop = threading.Event()
    per_client: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []

    def run(latencies: list[float]) -> None:
        transport = RoundRobin([r.port for r in replicas])
        with openai.OpenAI(
            base_url=replicas[0].base_url,
            api_key="sk-local",
            http_client=httpx.Client(transport=transport, timeout=60),
            max_retries=0,
        ) as client:
            try:
                loop(client, [])  # warm-up: not counted
                latencies.clear()
                while not stop.is_set():
                    loop(client, latencies)
            except BaseException as e:  # reported after all end: never a hang
                errors.append(e)
                stop.set()

    threads = [threading.Thread(target=run, args=(mine,)) for mine in per_client]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # the warm-ups
    for mine in per_client:
        mine.clear()
    began = time.monotonic()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    if errors:
        raise errors[0]
    every = sorted(x for mine in per_client for x in mine)
    p99 = every[min(len(every) - 1, int(len(every) * 0.99))]
    return len(every) / elapsed, statistics.median(every) * 1000, p99 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 s per configuration instead of 15")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (3.0 if args.quick else 15.0)
    reason = why_not()
    if reason is not None:
        sys.exit(f"bench/replicas.py: {reason}")
    cores = os.cpu_count() or 1
    rows: list[tuple[str, float, float, float]] = []
    with Cluster.started() as cluster, tempfile.TemporaryDirectory() as tmp:
        with servers(Path(tmp), "sqlite", 1) as started:
            rows.append(("SQLite, 1 server", *measure(started, seconds)))
        for n in (1, 2, 3):
            with servers(Path(tmp), cluster.database(), n) as started:
                rows.append((f"PostgreSQL, {n} replica{'s' if n > 1 else ''}", *measure(started, seconds)))
    print(f"\nreplicas: {CLIENTS} clients, round-robin, {seconds:.0f} s each, {cores} cores on this machine")
    print(f"{'configuration':<24} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'cores':>6}")
    for name, rate, p50, p99 in rows:
        print(f"{name:<24} {rate:>10.1f} {p50:>8.1f} {p99:>8.1f} {cores:>6}")


if __name__ == "__main__":
    main()
