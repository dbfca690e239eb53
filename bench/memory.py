"""Memory under a mixed load: RSS of the server and its V8 workers across N requests.

Starts `python -m ptc_emulator serve` (2 workers, a 2 s program timeout) and sends a mix of
requests from a few concurrent clients, then prints the total RSS (server + workers) after a
warm-up, at every tenth of the run and at the end:

* HTTP conversations running a program that pauses on tool calls, with `store` true and false;
* the same over SSE (`stream: true`) and over a WebSocket (`response.create` frames);
* hostile programs: a heap kept alive across a suspension (the live cache), output at the
  output limit, deeply nested values, a lone surrogate, an infinite loop, and 2 MB user messages
  (the token cache and the journal).

    .venv/bin/python bench/memory.py                    # 2,000 requests, sqlite store
    .venv/bin/python bench/memory.py --requests 500 --store memory

It exits non-zero if any request got a 5xx or the final RSS exceeds `--bound-mb`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

from ptc_emulator.testing.process import ServerProcess

TOOLS: list[dict[str, Any]] = [
    {"type": "programmatic_tool_calling"},
    {
        "type": "function",
        "name": "add",
        "description": "a + b",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
        "allowed_callers": ["programmatic"],
    },
]
PAUSING = "let t = 0;\nfor (let i = 0; i < 3; i++) t += await tools.add({a: t, b: i});\ntext('t=' + t);"
HOSTILE = [
    "const keep = Array.from({length: 2e6}, (_, i) => i + 0.5);\nawait tools.add({a: 1, b: 2});\ntext('kept');",
    "text('x'.repeat(1000000));",
    "let x = 1; for (let i = 0; i < 5000; i++) x = {a: x};\ntry { await tools.add(x); } catch (e) { text(e.message); }",
    "text('\\ud800'); image('data:image/png;base64,iVBORw0KGgo=');",
    "await tools.add({a: 1, b: 1});\nwhile (true) {}",
]


def message(code: str) -> str:
    return f"Run this.\n```js\n{code}\n```"


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1024


def answers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": json.dumps(
                (json.loads(item["arguments"]).get("a") or 0) + (json.loads(item["arguments"]).get("b") or 0)
            ),
            "caller": item.get("caller"),
        }
        for item in output
        if item.get("type") == "function_call"
    ]


class Load:
    def __init__(self, server: ServerProcess, total: int) -> None:
        self.server = server
        self.total = total
        self.sent = 0
        self.errors: list[str] = []
        self.samples: list[tuple[int, float]] = []

    def take(self) -> bool:
        if self.sent >= self.total:
            return False
        self.sent += 1
        return True

    async def post(self, http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any] | None:
        reply = await http.post("/responses", json=body)
        if reply.status_code >= 500:
            self.errors.append(f"{reply.status_code}: {reply.text[:200]}")
        return reply.json() if reply.status_code == 200 else None

    async def conversation(self, http: httpx.AsyncClient, code: str, store: bool, stream: bool) -> None:
        items: list[Any] = [{"type": "message", "role": "user", "content": message(code)}]
        body: dict[str, Any] = {"model": "m", "input": items, "tools": TOOLS, "store": store}
        while self.take():
            if stream:
                response = await self.sse(http, body)
            else:
                response = await self.post(http, body)
            if response is None:
                return
            outputs = answers(response["output"])
            if not outputs:
                return
            if store:
                body = {"model": "m", "input": outputs, "tools": TOOLS, "previous_response_id": response["id"]}
            else:
                items = [*items, *response["output"], *outputs]
                body = {"model": "m", "input": items, "tools": TOOLS, "store": False}

    async def sse(self, http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any] | None:
        final = None
        async with http.stream("POST", "/responses", json={**body, "stream": True}) as reply:
            if reply.status_code >= 500:
                self.errors.append(f"SSE {reply.status_code}")
            async for line in reply.aiter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    if event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                        final = event["response"]
        return final

    async def websocket(self, code: str) -> None:
        url = self.server.base_url.replace("http://", "ws://") + "/responses"
        async with websockets.connect(url, max_size=2**25, open_timeout=120, ping_interval=None) as ws:
            body: dict[str, Any] = {"model": "m", "input": message(code), "tools": TOOLS}
            while self.take():
                await ws.send(json.dumps({"type": "response.create", **body}))
                final = None
                while final is None:
                    event = json.loads(await ws.recv())
                    if event["type"] == "error":
                        if int(event.get("status") or 0) >= 500:
                            self.errors.append(f"WS {event}")
                        return
                    if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
                        final = event["response"]
                outputs = answers(final["output"])
                if not outputs:
                    return
                body = {"model": "m", "input": outputs, "tools": TOOLS, "previous_response_id": final["id"]}

    async def client(self, n: int) -> None:
        async with httpx.AsyncClient(base_url=self.server.base_url, timeout=120) as http:
            k = n
            while self.sent < self.total:
                k += 1
                kind = k % 6
                if kind in (0, 1):
                    await self.conversation(http, PAUSING, store=bool(k % 2), stream=False)
                elif kind == 2:
                    await self.conversation(http, PAUSING, store=bool(k % 3), stream=True)
                elif kind == 3:
                    await self.websocket(PAUSING)
                elif kind == 4:
                    await self.conversation(http, HOSTILE[k % len(HOSTILE)], store=bool(k % 2), stream=bool(k % 3))
                elif self.take():
                    big = "lorem ipsum dolor " * 110_000 + str(k)  # about 2 MB, new every time
                    await self.post(http, {"model": "m", "input": message(f"text('{k}');") + big, "tools": TOOLS})

    async def sampler(self) -> None:
        step = max(1, self.total // 10)
        next_at = step
        while self.sent < self.total:
            if self.sent >= next_at:
                self.samples.append((self.sent, rss_mb(self.pids())))
                next_at += step
            await asyncio.sleep(0.2)

    def pids(self) -> list[int]:
        assert self.server.proc is not None
        return [self.server.proc.pid, *self.server.health()["workers"]]

    async def run(self, clients: int) -> None:
        await asyncio.gather(self.sampler(), *(self.client(n) for n in range(clients)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--bound-mb", type=float, default=1500.0, help="the final RSS must stay under this")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="ptc-memory-"))
    server = ServerProcess(data / "data", store=args.store, workers=2, args=("--timeout", "2"))
    try:
        server.start()
        warm = Load(server, 60)
        asyncio.run(warm.run(3))
        start = rss_mb(warm.pids())
        load = Load(server, args.requests)
        began = time.monotonic()
        asyncio.run(load.run(args.clients))
        took = time.monotonic() - began
        end = rss_mb(load.pids())
        peak = max([start, end, *(mb for _, mb in load.samples)])
        print(f"requests: {load.sent} in {took:.1f} s, {args.clients} clients, store {args.store}")
        print(f"RSS (server + workers) after warm-up: {start:.0f} MB")
        for sent, mb in load.samples:
            print(f"  after {sent:5d} requests: {mb:.0f} MB")
        print(f"RSS at the end: {end:.0f} MB; peak sampled: {peak:.0f} MB; bound: {args.bound_mb:.0f} MB")
        print(f"5xx errors: {len(load.errors)}")
        for error in load.errors[:5]:
            print("  ", error)
        return 0 if not load.errors and end <= args.bound_mb else 1
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
