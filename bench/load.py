"""Load test: N concurrent SDK clients run multi-pause PTC programs against the emulator for a fixed time.

Each client is an `openai.AsyncOpenAI` in one asyncio loop. A client's loop is one program that
pauses `--pauses` times on two parallel tool calls (each answered by the client), then ends with
a text the client checks. `--store false` replays the whole conversation on every request,
`--store true` continues by `previous_response_id`, `--store mixed` (the default) splits the
clients half and half.

By default the script starts the server itself (`python -m ptc_emulator serve` on a free 127.0.0.1
port, SQLite store in a temporary data directory that it removes at the end); `--url` uses one
that is already running instead (loopback addresses only). With `--restart-at SECONDS` the
script kills its server with SIGKILL at that time and starts it again on the same port, data
directory and secret; clients resend a request that the kill cut off, and every loop must still
end with the right answer.

It prints requests/s, loops/s, p50/p99/max latency per request, wrong answers and errors, and
exits non-zero if there was any wrong answer or error. It stops by itself: clients start no new
request after `--duration` seconds, and a request that hangs times out after 60 s.

    .venv/bin/python bench/load.py                              # modest: 16 clients, 30 s
    .venv/bin/python bench/load.py --clients 64 --duration 120 --workers 2      # full size
    .venv/bin/python bench/load.py --clients 64 --duration 120 --workers 2 --restart-at 60
    .venv/bin/python bench/load.py --url http://127.0.0.1:8000/v1 --clients 8 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import openai

from ptc_emulator.testing.process import ServerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.support
from tests.support import ADD_TOOL  # noqa: E402  (the tests' tool list, not a copy of it)

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SECRET = "bench-load-secret-0123456789"
TOOLS: list[dict[str, Any]] = [{"type": "programmatic_tool_calling"}, ADD_TOOL]


def program(start: int, pauses: int) -> tuple[str, str]:
    """A program pausing `pauses` times on two parallel calls, and the text it must end with."""
    code = (
        f"let total = {start};\n"
        f"for (let i = 1; i <= {pauses}; i++) {{\n"
        "  const [x, y] = await Promise.all([tools.add({a: total, b: i}), tools.add({a: i, b: i})]);\n"
        "  total = x.value + y.value;\n"
        "}\n"
        "text(`total=${total}`);"
    )
    return code, f"total={start + 3 * pauses * (pauses + 1) // 2}"


# ---- the clients ------------------------------------------------------------------------------------


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    loops: int = 0
    wrong: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    resent: int = 0


async def client_loop(n: int, base_url: str, store: bool, pauses: int, stop_at: float, stats: Stats) -> None:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-load", max_retries=0, timeout=60) as client:
        loop = 0
        while time.monotonic() < stop_at:
            code, expected = program(start=n * 100_000 + loop, pauses=pauses)
            loop += 1
            items: list[dict[str, Any]] = [{"role": "user", "content": f"Run this.\n```js\n{code}\n```"}]
            request: dict[str, Any] | None = {"model": "load", "input": list(items), "tools": TOOLS, "store": store}
            response: Any = None
            while request is not None:
                if time.monotonic() >= stop_at:
                    return  # the duration is over: this loop is left unfinished and not counted
                started = time.monotonic()
                try:
                    response = await client.responses.create(**request)
                except (openai.APIConnectionError, openai.APITimeoutError):
                    # The server is down or was killed mid-request (--restart-at): resend.
                    stats.resent += 1
                    await asyncio.sleep(0.1)
                    continue
                except openai.APIStatusError as e:
                    stats.errors.append(f"client {n}: HTTP {e.status_code}: {e.message}"[:300])
                    break
                stats.latencies.append(time.monotonic() - started)
                calls = [item for item in response.output if item.type == "function_call"]
                if not calls:
                    request = None
                    break
                outputs = [
                    {
                        "type": "function_call_output",
                        "call_id": call.call_id,
                        "output": json.dumps({"value": sum(json.loads(call.arguments).values())}),
                        "caller": call.caller.model_dump(mode="json", exclude_none=True),
                    }
                    for call in calls
                ]
                if store:
                    request = {
                        "model": "load",
                        "input": outputs,
                        "tools": TOOLS,
                        "store": True,
                        "previous_response_id": response.id,
                    }
                else:
                    items += [item.model_dump(mode="json", exclude_none=True) for item in response.output]
                    items += outputs
                    request = {"model": "load", "input": list(items), "tools": TOOLS, "store": False}
            if request is None and response is not None:
                if response.output_text == expected:
                    stats.loops += 1
                else:
                    stats.wrong.append(f"client {n}: expected {expected!r}, got {response.output_text[:200]!r}")


async def restarter(server: ServerProcess, at: float, started: float, report: dict[str, float]) -> None:
    await asyncio.sleep(max(0.0, started + at - time.monotonic()))
    down = time.monotonic()
    await asyncio.to_thread(server.kill9)
    began = time.monotonic()
    await asyncio.to_thread(server.start)
    report["took"] = time.monotonic() - began
    report["down"] = time.monotonic() - down
    report["at"] = down - started


async def run(
    args: argparse.Namespace, base_url: str, server: ServerProcess | None
) -> tuple[Stats, float, dict[str, float]]:
    stats = Stats()
    started = time.monotonic()
    stop_at = started + args.duration
    restart: dict[str, float] = {}
    tasks = []
    for n in range(args.clients):
        store = {"true": True, "false": False}.get(args.store, n % 2 == 1)
        tasks.append(asyncio.ensure_future(client_loop(n, base_url, store, args.pauses, stop_at, stats)))
    if server is not None and args.restart_at is not None:
        tasks.append(asyncio.ensure_future(restarter(server, args.restart_at, started, restart)))
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            stats.errors.append(f"{type(result).__name__}: {result}"[:300])
    return stats, time.monotonic() - started, restart


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent SDK clients (default 16)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    parser.add_argument("--pauses", type=int, default=3, help="pauses per program (default 3)")
    parser.add_argument(
        "--store", choices=("false", "true", "mixed"), default="mixed", help="the requests' store (default mixed)"
    )
    parser.add_argument("--server-store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--workers", type=int, default=None, help="the server's V8 workers (default: CPU count)")
    parser.add_argument("--restart-at", type=float, default=None, metavar="SECONDS", help="kill -9 and restart")
    parser.add_argument("--url", default=None, help="a running server's /v1 URL (127.0.0.1 only)")
    args = parser.parse_args(argv)
    if args.url is not None and urlparse(args.url).hostname not in LOOPBACK:
        parser.error("--url must be a loopback address: this script only loads this machine")
    if args.url is not None and args.restart_at is not None:
        parser.error("--restart-at needs the server this script starts (no --url)")
    if args.restart_at is not None and args.server_store == "memory" and args.store != "false":
        parser.error("with --server-store memory a restart loses stored responses: use --store false")

    server = None
    base_url = args.url
    log = Path(tempfile.gettempdir()) / f"ptc-load-server-{os.getpid()}.log"
    data_dir = Path(tempfile.mkdtemp(prefix="ptc-load-"))
    if base_url is None:
        workers = args.workers or os.cpu_count() or 1
        options = ("--log-level", "warning")
        server = ServerProcess(
            data_dir / "data", store=args.server_store, secret=SECRET, workers=workers, args=options, log_path=log
        )
        server.start()
        base_url = server.base_url
    try:
        stats, elapsed, restart = asyncio.run(run(args, base_url, server))
        health = httpx.get(base_url[: -len("/v1")] + "/_emulator/health", timeout=10).json()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    where = f"{args.server_store} store, {args.workers or os.cpu_count()} workers" if server else base_url
    requests = len(stats.latencies)
    print(
        f"ptc-emulator load: {args.clients} clients, {args.duration:g} s, store={args.store}, "
        f"{args.pauses} pauses/program ({args.pauses + 1} requests/loop), server: {where}"
    )
    print(f"requests: {requests} ({requests / elapsed:.1f}/s)   loops: {stats.loops} ({stats.loops / elapsed:.1f}/s)")
    print(
        f"latency per request: p50 {percentile(stats.latencies, 0.50) * 1000:.1f} ms   "
        f"p99 {percentile(stats.latencies, 0.99) * 1000:.1f} ms   max {max(stats.latencies, default=0) * 1000:.1f} ms"
    )
    print(f"wrong answers: {len(stats.wrong)}   errors: {len(stats.errors)}   resent after a cut: {stats.resent}")
    if restart:
        print(
            f"restart: kill -9 at {restart['at']:.1f} s, serving again {restart['down']:.2f} s later "
            f"(start took {restart['took']:.2f} s)"
        )
    print(
        f"server: {health['stored_responses']} stored responses; since its last start, "
        f"{health['sandbox_runs']} sandbox runs and {health['sandbox_crashes']} crashes"
    )
    for line in (stats.wrong + stats.errors)[:10]:
        print("  " + line)
    if server is not None and (stats.wrong or stats.errors):
        print(f"server log: {log}")
    elif server is not None:
        log.unlink(missing_ok=True)
    return 1 if stats.wrong or stats.errors else 0


if __name__ == "__main__":
    sys.exit(main())
