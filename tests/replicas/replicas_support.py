"""Replicas of the emulator on one PostgreSQL database, and a client that sends each request to
the next replica in turn (round-robin, as a load balancer would)."""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai

from ptc_emulator.testing.process import ServerProcess

SECRET = "replicas-share-this-secret"
FIXTURES = Path(__file__).parents[2] / "fixtures"


class RoundRobin(httpx.BaseTransport):
    """Each request to the next replica's port (its Host too); `served` counts them per port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self._next = itertools.cycle(ports)
        self._inner = httpx.HTTPTransport()
        self.served: Counter[int] = Counter()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        port = next(self._next)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        self.served[port] += 1
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def round_robin_client(replicas: list[ServerProcess]) -> tuple[openai.OpenAI, RoundRobin]:
    transport = RoundRobin([r.port for r in replicas])
    http = httpx.Client(transport=transport, timeout=60)
    client = openai.OpenAI(base_url=replicas[0].base_url, api_key="sk-local", http_client=http, max_retries=0)
    return client, transport


@contextlib.contextmanager
def replicas(tmp: Path, url: str, n: int, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None
             ) -> Iterator[list[ServerProcess]]:  # fmt: skip
    made = [ServerProcess(tmp / f"replica-{i}", store=url, secret=SECRET, args=args, env=env) for i in range(n)]
    try:
        for server in made:
            server.start()
        yield made
    finally:
        for server in made:
            server.stop()


def admin(server: ServerProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, f"{server.root}/_emulator{path}", timeout=30, **kwargs)
