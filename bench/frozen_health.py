"""Health with the database frozen and many requests waiting on it: a throwaway PostgreSQL
cluster, one server on it, `N` creates sent at once, the cluster frozen (SIGSTOP), then health
asked; its latency printed, for each `N`. docs/scale-out.md promises an answer within 2 s with the
database away; before health looked on threads of its own it took 10 to 11 s with 80 to 150
requests waiting (they held every worker thread).

    .venv/bin/python -m bench.frozen_health [N ...]   # default: 30 150
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ptc_emulator.testing.process import ServerProcess
from tests.replicas.cluster import Cluster


async def _once(cluster: Cluster, server: ServerProcess, n: int) -> tuple[float, int]:
    limits = httpx.Limits(max_connections=n + 10)
    async with httpx.AsyncClient(base_url=server.root, timeout=120, limits=limits) as http:
        assert (await http.get("/_emulator/health")).status_code == 200
        cluster.freeze()
        try:
            body = {"model": "m", "input": "hello"}
            waiting = [asyncio.ensure_future(http.post("/v1/responses", json=body)) for _ in range(n)]
            await asyncio.sleep(0.5)
            asked = time.perf_counter()
            health = await http.get("/_emulator/health")
            took = time.perf_counter() - asked
            await asyncio.gather(*waiting, return_exceptions=True)
        finally:
            cluster.thaw()
        for _ in range(600):  # until the pool has connected again
            if (await http.get("/_emulator/health")).status_code == 200:
                break
            await asyncio.sleep(0.1)
    return took, health.status_code


def main(sizes: list[int]) -> None:
    with Cluster.started() as cluster, tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", store=cluster.database())
        server.start()
        try:
            for n in sizes:
                took, status = asyncio.run(_once(cluster, server, n))
                print(f"{n:4d} requests waiting: health {status} in {took:.2f} s")
        finally:
            server.stop()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [30, 150])
