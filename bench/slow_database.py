"""Clients of a server whose PostgreSQL database is slow: a throwaway cluster behind a delay proxy
(each reply from the database held `LAG_S` seconds), one server through it, `N` creates sent at
once, then `/nosuch`, health and `/v1/models` asked while they are in flight; each one's latency
printed. Before the store's calls on the create paths left the event loop (the journal's number
and write, a background create's lease and queued record), every one of them waited for the
creates: up to a minute with 200 in flight at 0.3 s.

    .venv/bin/python -m bench.slow_database [N [LAG_S]]   # default: 200 0.3
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from ptc_emulator.testing.process import ServerProcess, free_port
from tests.replicas.cluster import Cluster

BODY = {"model": "m", "input": "Run this:\n```js\ntext('x')\n```", "tools": [{"type": "programmatic_tool_calling"}]}


class DelayProxy:
    """A TCP proxy to the database holding each of its replies `lag` seconds (set to 0 to pass)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.lag = 0.0
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        started.set()
        self.loop.run_forever()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, held: bool) -> None:
        try:
            while data := await reader.read(65536):
                if held and self.lag:
                    await asyncio.sleep(self.lag)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        to_reader, to_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(self._pipe(reader, to_writer, False), self._pipe(to_reader, writer, True))


async def _timed(http: httpx.AsyncClient, path: str) -> str:
    asked = time.perf_counter()
    try:
        status = str((await http.get(path)).status_code)
    except httpx.HTTPError as e:
        status = type(e).__name__
    return f"{path} {status} in {time.perf_counter() - asked:.2f} s"


async def _once(server: ServerProcess, proxy: DelayProxy, n: int, lag: float) -> None:
    limits = httpx.Limits(max_connections=n + 10)
    async with (
        httpx.AsyncClient(base_url=server.root, timeout=20, limits=limits) as creates,
        httpx.AsyncClient(base_url=server.root, timeout=60) as http,
    ):
        print("database answering at once:", *[await _timed(http, p) for p in ("/nosuch", "/_emulator/health")])
        proxy.lag = lag
        waiting = [asyncio.ensure_future(creates.post("/v1/responses", json=BODY)) for _ in range(n)]
        began = time.perf_counter()
        for at in (1.0, 5.0, 15.0):
            await asyncio.sleep(max(0.0, at - (time.perf_counter() - began)))
            asked = await asyncio.gather(*[_timed(http, p) for p in ("/nosuch", "/_emulator/health", "/v1/models")])
            print(f"{n} creates in flight, the database {lag} s a reply, about {at:.0f} s in:", "; ".join(asked))
        done = await asyncio.gather(*waiting, return_exceptions=True)
        proxy.lag = 0.0
        answered = sum(1 for d in done if isinstance(d, httpx.Response) and d.status_code == 200)
        print(f"creates answered 200 within the client's 20 s: {answered} of {n}")


def main(n: int, lag: float) -> None:
    with Cluster.started() as cluster, tempfile.TemporaryDirectory() as tmp:
        proxy = DelayProxy(cluster.port)
        url = cluster.database().replace(f":{cluster.port}/", f":{proxy.port}/")
        server = ServerProcess(Path(tmp) / "data", store=url)
        server.start()
        try:
            asyncio.run(_once(server, proxy, n, lag))
        finally:
            server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200, float(sys.argv[2]) if len(sys.argv) > 2 else 0.3)
