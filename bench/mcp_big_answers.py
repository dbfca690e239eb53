"""What one client's large MCP answers cost another client's MCP calls: client A (one scope) runs
`--programs` programs at once, again and again, each awaiting `--rounds` steps of 8 calls at once
to a tool whose answer is `--answer-mib` MiB of MCP; client B (another scope) meanwhile creates
responses in a loop for `--seconds`, whose program calls an `echo` tool of another server. Each
MCP server is a process of its own (this script, `--serve`), so neither holds the emulator's
interpreter.

    .venv/bin/python bench/mcp_big_answers.py [--children N] [--programs 6] [--rounds 20]
                                              [--answer-mib 2] [--seconds 20]

`--children` sets `mcp_child.CHILDREN`, the MCP client processes (default: this code's, one per
CPU, at least 2); `--children 1` is the layout before, every client's sessions in one process,
where the `mcp` package validates each of A's answers (100-250 ms, the interpreter held) while
B's sessions wait. Printed: B's median create alone (a listing and a call each), then beside A:
how many, the first (which may start B's MCP client process), the median, the 90th percentile
and the maximum.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.tools import mcp_child
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for the tests' helpers
from tests.support import js, validating_client  # noqa: E402

A_PROGRAM = """
let n = 0;
for (let k = 0; k < ROUNDS; k++) {
  const found = await Promise.all(Array.from({length: 8}, (_, i) => tools.s.bigjson({i})));
  n += found.length;
}
text(String(n));
"""


def run_server(answer_mib: float) -> None:
    """`--serve`: an MCP server with `bigjson` and `echo` on a free port; prints its URL."""
    import socket

    import uvicorn
    from mcp.server.mcpserver import MCPServer

    big = json.dumps({"rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(40_000)]})
    big = big[: int(answer_mib * 2**20)]
    payload = json.dumps({"blob": big})
    server = MCPServer("bench")

    @server.tool(description="A large answer")
    def bigjson(i: int = 0) -> str:
        return payload

    @server.tool(description="Its argument back")
    def echo(text: str = "") -> str:
        return text

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="critical")).run(sockets=[sock])


def started(answer_mib: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--answer-mib", str(answer_mib)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=mcp_child.CHILDREN)
    parser.add_argument("--programs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--answer-mib", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        run_server(args.answer_mib)
        return
    mcp_child.CHILDREN = args.children
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="mcp-big-answers-")),
        store="memory",
        mcp_allow_hosts=("127.0.0.1",),
        mcp_timeout_s=120.0,
        limits=Limits(timeout_s=300.0),
    )
    big_proc, big_url = started(args.answer_mib)
    echo_proc, echo_url = started(0.001)
    server = EmulatorServer(settings).start()
    stop = threading.Event()

    def tools(url: str) -> list[Any]:
        mcp = {
            "type": "mcp",
            "server_label": "s",
            "server_url": url,
            "allowed_callers": ["programmatic"],
            "require_approval": "never",
        }
        return [{"type": "programmatic_tool_calling"}, mcp]

    try:
        a = PTCEmulator(server.base_url)
        a_code = js(A_PROGRAM.replace("ROUNDS", str(args.rounds)))

        def a_program() -> None:
            with validating_client(a, timeout=600) as client:
                while not stop.is_set():
                    try:
                        client.responses.create(model="gpt-test", tools=tools(big_url), input=a_code)
                    except Exception:  # stopped under it
                        return

        b = PTCEmulator(server.base_url)
        b_code = js("text(await tools.s.echo({text: 'hi'}));")
        with validating_client(b) as client:

            def create() -> float:
                at = time.perf_counter()
                client.responses.create(model="gpt-test", tools=tools(echo_url), input=b_code)
                return time.perf_counter() - at

            alone = statistics.median([create() for _ in range(5)])
            threads = [threading.Thread(target=a_program, daemon=True) for _ in range(args.programs)]
            for thread in threads:
                thread.start()
            time.sleep(3.0)  # A's first answers are in flight
            times = []
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                times.append(create())
            stop.set()
    finally:
        stop.set()
        server.stop()
        big_proc.kill()
        echo_proc.kill()
    first = times[0]
    times.sort()
    print(
        f"children {args.children}: B alone median {alone:.3f} s; beside A's {args.programs} programs of "
        f"{args.rounds} x 8 {args.answer_mib:g} MiB answers, {args.seconds:g} s: {len(times)} creates, "
        f"the first {first:.3f} s, "
        f"median {statistics.median(times):.3f} s, p90 {times[int(len(times) * 0.9)]:.3f} s, max {times[-1]:.3f} s"
    )


if __name__ == "__main__":
    main()
