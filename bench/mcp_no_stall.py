"""What other clients' slow MCP calls cost one client's quick one: `--clients` clients, each in a
scope of its own, create responses in a loop whose program calls a tool that sleeps `--delay`
seconds; meanwhile one more client creates responses in a loop for `--seconds`, whose program
calls a quick tool of the same server (a real MCP server on 127.0.0.1, in this process).

    .venv/bin/python bench/mcp_no_stall.py [--clients 12] [--delay 2] [--seconds 15]

Printed: the quick client's median create alone (a listing and a call each), then its creates
beside the slow clients: how many, the median, the 90th percentile and the maximum. Every session
of a client runs in one MCP client process, on its one event loop (`emulator/tools/mcp_worker.py`;
the figures below were measured when there was one such process for every client), so what a
session does there with the interpreter held, every other there waits for (issue 38).

Measured on a busy 2-core machine (load 5; docs/server-cpu.md, "One TLS context for every MCP
session"), 12 clients, 2 s, 15 s: before (each session read the CA bundle twice) alone 0.174 s,
beside them 64 creates, median 0.133 s, p90 0.218 s, max 2.49 s; after, alone 0.038 s, 364
creates, median 0.031 s, p90 0.054 s, max 0.81 s.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for the tests' helpers
from tests.support import js, validating_client  # noqa: E402
from tests.tools.mcp_servers_support import serve  # noqa: E402


def mixed_server(delay: float) -> MCPServer:
    server = MCPServer("mixed")

    @server.tool(description="Answers after a while")
    async def slow() -> str:
        await asyncio.sleep(delay)
        return "slow"

    @server.tool(description="Answers at once")
    async def fast() -> str:
        return "fast"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="mcp-no-stall-")),
        store="memory",
        mcp_allow_hosts=("127.0.0.1",),
        limits=Limits(timeout_s=max(30.0, 4 * args.delay)),
    )
    server = EmulatorServer(settings).start()
    stop = threading.Event()
    try:
        with serve(mixed_server(args.delay).streamable_http_app()) as served:
            mcp = {
                "type": "mcp",
                "server_label": "mixed",
                "server_url": served.url,
                "allowed_callers": ["programmatic"],
                "require_approval": "never",
            }
            tools: list[Any] = [{"type": "programmatic_tool_calling"}, mcp]

            def create(client: Any, name: str) -> float:
                started = time.perf_counter()
                code = f"text(await tools.mixed.{name}({{}}));"
                client.responses.create(model="gpt-test", tools=tools, input=js(code))
                return time.perf_counter() - started

            def slow_client() -> None:
                with validating_client(PTCEmulator(server.base_url)) as client:
                    while not stop.is_set():
                        create(client, "slow")

            quick = PTCEmulator(server.base_url)
            with validating_client(quick) as client:
                alone = statistics.median([create(client, "fast") for _ in range(5)])
                threads = [threading.Thread(target=slow_client, daemon=True) for _ in range(args.clients)]
                for thread in threads:
                    thread.start()
                times = []
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    times.append(create(client, "fast"))
                stop.set()
                for thread in threads:
                    thread.join(args.delay * 4 + 30)
    finally:
        stop.set()
        server.stop()
    times.sort()
    print(
        f"quick client alone: median {alone:.3f} s; beside {args.clients} clients calling a {args.delay:g} s tool, "
        f"{args.seconds:g} s: {len(times)} creates, median {statistics.median(times):.3f} s, "
        f"p90 {times[int(len(times) * 0.9)]:.3f} s, max {times[-1]:.3f} s"
    )


if __name__ == "__main__":
    main()
