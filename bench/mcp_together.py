"""What a program's `Promise.all` of calls to a slow MCP server costs one request: the median wall
time of a response whose program awaits `--calls` calls together, against a real MCP server on
127.0.0.1 whose tool sleeps `--delay` seconds before answering.

    .venv/bin/python bench/mcp_together.py [--calls 60] [--delay 0.12] [--runs 3] [--timeout 30]

Printed: the median, the time the calls would take one after another (calls x delay), and their
ratio. The calls run `HOSTED_CONCURRENCY` at a time (`emulator/model/runtime/hosted.py`), so the
median sits near calls / 8 x delay plus each call's own connection and MCP session (CPU, shared
with the server, which runs in this process: `--delay 0` shows that floor). With `--timeout`
below what the calls need, the program ends `incomplete` at its time limit (the line says so).

Measured on a busy 2-core machine: 60 calls of 0.12 s, median 5.7 s (11.8 s with the calls made
one after another, as before); `--delay 0`, 3.8 s; `--calls 900 --timeout 3 --runs 1`, 3.5 s and
`incomplete` (before: over 120 s).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for the tests' helpers
from tests.support import js, validating_client  # noqa: E402
from tests.tools.mcp_servers_support import serve  # noqa: E402


def slow_server(delay: float) -> MCPServer:
    server = MCPServer("slow")

    @server.tool(description="Answers after a while")
    async def slow(n: int) -> str:
        await asyncio.sleep(delay)
        return str(n)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--delay", type=float, default=0.12)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0, help="the program's --timeout")
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="mcp-together-")),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
        limits=Limits(timeout_s=args.timeout, max_tool_calls=max(args.calls + 1, Limits().max_tool_calls)),
    )
    code = (
        f"const got = await Promise.all(Array.from({{length: {args.calls}}}, (_, n) => tools.slow.slow({{n}})));"
        " text(String(got.length));"
    )
    server = EmulatorServer(settings).start()
    emulator = PTCEmulator(server.base_url)
    times, statuses = [], set()
    try:
        with serve(slow_server(args.delay).streamable_http_app()) as served, validating_client(emulator) as client:
            mcp = {
                "type": "mcp",
                "server_label": "slow",
                "server_url": served.url,
                "allowed_callers": ["programmatic"],
                "require_approval": "never",
            }
            tools = [{"type": "programmatic_tool_calling"}, mcp]
            for _ in range(args.runs):
                started = time.perf_counter()
                response = client.responses.create(model="gpt-test", tools=tools, input=js(code))
                times.append(time.perf_counter() - started)
                done = [i for i in response.output if i.type == "program_output"]
                statuses.update(getattr(i, "status", "?") for i in done)
    finally:
        emulator.close()
        server.stop()
    median = statistics.median(times)
    serial = args.calls * args.delay
    print(
        f"{args.calls} calls of {args.delay:g} s under Promise.all, --timeout {args.timeout:g}: median {median:.2f} s "
        f"over {args.runs} runs; one after another {serial:.2f} s; ratio {serial / median:.1f}x; "
        f"program_output {', '.join(sorted(statuses))}"
    )


if __name__ == "__main__":
    main()
