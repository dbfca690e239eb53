"""How long one maximal in-limit request holds the server's event loop (issue 38).

    .venv/bin/python bench/loop_lag.py              # before and after, side by side (a few minutes)
    .venv/bin/python bench/loop_lag.py --quick      # one run of each case
    .venv/bin/python bench/loop_lag.py --only after
    .venv/bin/python bench/loop_lag.py --old /tmp/old   # before: a `git worktree add /tmp/old COMMIT`

The server runs in a child process of this script, in process there (`EmulatorServer`, its heap
frozen once started as `serve` does), so that the child can measure its own event loop: a probe
task sleeps 5 ms over and over on the server's loop, and its lag is how much later than asked it
woke ("lag max after": in the 0.2 s after the answer reached the client), and "loop CPU max" the
most CPU time the loop's own thread used between two of its wakes, whatever else ran: the longest
on-loop step, which the machine's load does not lengthen (the lag counts the worker threads'
long C calls and the other processes too). The child counts the
garbage collector's passes by generation and times them (`gc.callbacks`). This script is the
client: while it sends one large request it asks `GET /_emulator/health` every 5 ms from another
thread, and prints the health answers' latency. `--stacks` prints, for each step of the loop
that used over 5 ms of its CPU, where the loop was (sampled every millisecond once it has not
ticked for 3 ms), the stacks counted.

The cases, each the largest of its kind the default limits take (16 MiB bodies):

* `idle`: no request for a second, health alone: the machine's own noise (the floor);
* `items`: a create with 200,000 small input items (`store: false`), the last one a program;
* `output`: a `store: false` resume whose `function_call_output` is 14 MB of one character;
* `base64`: a `store: false` turn with a 10 MB base64 `data:` image beside its program;
* `mcp`: a `store: false` turn with a hosted `mcp` tool whose server (the `mcp` package's own, in
  another process) lists 1,550 tools, a 7 MB listing (the answer's cap is 8 MiB).

"before" is the server with full collections left to CPython during a large request
(`collector.held_off` made a no-op in the child), or with `--old DIR` the code of another
checkout (`git worktree add DIR COMMIT`, run through this venv), "after" the server as it is. Read the ratios:
the machine is shared.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gc
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
PTC_TOOLS: list[dict[str, Any]] = [
    {"type": "programmatic_tool_calling"},
    {
        "type": "function",
        "name": "echo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "allowed_callers": ["programmatic"],
    },
]
PROBE_S = 0.005
STEP_S = 0.005
"""With --stacks, a step of the loop that used more of its CPU than this has its samples shown."""
STACK_DEPTH = 16
SECRET = "bench-loop-lag-secret-0123456789"


def program(code: str) -> str:
    return f"Run this program.\n```js\n{code}\n```"


# ---- the server (child) ---------------------------------------------------------------------------


def serve(mode: str, stacks: bool) -> None:
    """The server in this process; reads `begin`/`end` lines on stdin, answers with JSON lines."""
    import asyncio

    if mode.startswith("/"):  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api import app as served
    from ptc_emulator.api.cli import settle_heap

    print(f"serving {Path(served.__file__).parent.parent}", file=sys.stderr)
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    if mode == "before":
        from ptc_emulator.emulator import collector

        collector.held_off = _not_held  # type: ignore[assignment]
    data = Path(tempfile.mkdtemp(prefix="bench-lag-"))
    # A body limit of 24 MiB: the `mcp` case's 7 MB listing is then within what a store: false
    # client can send back (11 MiB); under the default 16 MiB (3 MiB of it) the listing is a 424.
    settings = Settings(
        data_dir=data, store="memory", pool_size=2, secret=SECRET, mcp_allow_private=True, max_body_bytes=24 * 2**20
    )
    server = EmulatorServer(settings).start()
    settle_heap()
    lags: list[tuple[float, float]] = []
    cpu: list[tuple[float, float]] = []
    passes: list[tuple[int, float]] = []
    recording = threading.Event()
    started: dict[int, float] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if not recording.is_set():
            return
        if phase == "start":
            started[info["generation"]] = time.perf_counter()
        elif info["generation"] in started:
            passes.append((info["generation"], time.perf_counter() - started.pop(info["generation"])))

    gc.callbacks.append(on_gc)

    ticked = [time.perf_counter()]
    stalls: list[list[str]] = []
    loop_thread: list[int] = []

    async def probe() -> None:
        loop_thread.append(threading.get_ident())
        while True:
            asked = ticked[0] = time.perf_counter()
            used = time.thread_time()
            await asyncio.sleep(PROBE_S)
            ticked[0] = time.perf_counter()
            if recording.is_set():
                spent = time.thread_time() - used
                lags.append((ticked[0], ticked[0] - asked - PROBE_S))
                cpu.append((ticked[0], spent))
                if spent > STEP_S and sampled:
                    stalls.append(
                        [f"loop CPU {1000 * spent:.1f} ms, sampled {len(sampled)} times:", *_counted(sampled)]
                    )
            sampled.clear()

    sampled: list[str] = []

    def watch() -> None:
        """With --stacks: where the loop is while it has not ticked for 3 ms (every millisecond);
        the probe keeps the samples of a step that used more than `STEP_S` of the loop's CPU."""
        while True:
            time.sleep(0.001)
            at = ticked[0]
            if recording.is_set() and loop_thread and time.perf_counter() - at > 0.003:
                frame = sys._current_frames().get(loop_thread[0])
                if frame is not None and ticked[0] == at:
                    stack = traceback.extract_stack(frame)[-STACK_DEPTH:]
                    sampled.append(" < ".join(f"{f.filename.split('/')[-1]}:{f.lineno} {f.name}" for f in stack[::-1]))

    assert server.loop is not None
    asyncio.run_coroutine_threadsafe(probe(), server.loop)
    if stacks:
        sys.setswitchinterval(0.0005)  # the sampler gets the interpreter often enough to see the loop
        threading.Thread(target=watch, daemon=True).start()
    print(json.dumps({"port": server.port}), flush=True)
    for line in sys.stdin:
        if line.strip() == "begin":
            lags.clear()
            cpu.clear()
            passes.clear()
            stalls.clear()
            recording.set()
            print("{}", flush=True)
        elif line.startswith("end"):
            recording.clear()
            answered = float(line.split()[1])  # (perf_counter is the system's monotonic clock)
            during = [lag for at, lag in lags if at <= answered]
            after = [lag for at, lag in lags if at > answered]
            used = [spent for _, spent in cpu]
            seen = {"lags": during, "after": after, "cpu": used, "passes": passes, "stalls": stalls}
            print(json.dumps(seen), flush=True)
    server.stop()


def _counted(samples: list[str]) -> list[str]:
    """The distinct stacks sampled, the most seen first, each with its count."""
    counts: dict[str, int] = {}
    for stack in samples:
        counts[stack] = counts.get(stack, 0) + 1
    return [f"{n}x {stack}" for stack, n in sorted(counts.items(), key=lambda kv: -kv[1])]


@contextlib.contextmanager
def _not_held() -> Iterator[None]:
    yield


MCP_TOOLS = 1_550


def serve_mcp(port: int) -> None:
    """An MCP server listing `MCP_TOOLS` tools of 4.8 KB of description each (the `mcp` case)."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big")
    for i in range(MCP_TOOLS):

        def tool(a: str = "", b: int = 0) -> str:
            return "ok"

        server.tool(name=f"tool_{i}", description=f"d{i} " * 800)(tool)
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="critical")


@contextlib.contextmanager
def mcp_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, __file__, "--mcp-server", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(url, timeout=1)
                break
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(30)


# ---- the client (this script) --------------------------------------------------------------------


def bodies(base: str, mcp_url: str) -> dict[str, Any]:
    """Each case's large body (made once, before anything is measured)."""
    items: list[Any] = [{"role": "user", "content": "hi"}] * 199_999
    items.append({"role": "user", "content": program("text('big')")})
    code = program("const r = await tools.echo({text: 'x'}); text(`got ${r.text.length}`);")
    with httpx.Client(base_url=base, timeout=120) as http:
        first = http.post("/responses", json={"model": "m", "input": code, "tools": PTC_TOOLS, "store": False})
        first.raise_for_status()
    (call,) = [o for o in first.json()["output"] if o["type"] == "function_call"]
    answer = {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "caller": call["caller"],
        "output": json.dumps({"text": "y" * 14_000_000}),
    }
    blob = base64.b64encode(b"\x89PNG" + bytes(7_500_000)).decode("ascii")
    image = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": program("text('seen')")},
            {"type": "input_image", "image_url": f"data:image/png;base64,{blob}"},
        ],
    }
    return {
        "idle": None,
        "items": {"model": "m", "input": items, "tools": PTC_TOOLS, "store": False},
        "output": {
            "model": "m",
            "input": [{"role": "user", "content": code}, *first.json()["output"], answer],
            "tools": PTC_TOOLS,
            "store": False,
        },
        "base64": {"model": "m", "input": [image], "tools": PTC_TOOLS, "store": False},
        "mcp": {
            "model": "m",
            "input": program("text('listed')"),
            "tools": [
                {"type": "programmatic_tool_calling"},
                {"type": "mcp", "server_label": "big", "server_url": mcp_url, "require_approval": "never"},
            ],
            "store": False,
        },
    }


class Child:
    def __init__(self, mode: str, stacks: bool) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", mode, *(["--stacks"] if stacks else [])],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.port = self._read()["port"]
        self.base = f"http://127.0.0.1:{self.port}"

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the server process ended")
        return json.loads(line)  # type: ignore[no-any-return]

    def say(self, word: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)


def run_case(child: Child, body: bytes) -> dict[str, Any]:
    latencies: list[float] = []
    done = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=child.base, timeout=120) as http:
            while not done.is_set():
                asked = time.perf_counter()
                http.get("/_emulator/health").raise_for_status()
                latencies.append(time.perf_counter() - asked)
                time.sleep(PROBE_S)

    child.say("begin")
    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        with httpx.Client(base_url=child.base + "/v1", timeout=300) as http:
            asked = time.perf_counter()
            if body:
                reply = http.post("/responses", content=body, headers={"content-type": "application/json"})
            else:  # the floor: the machine's own noise, with health alone
                time.sleep(1.0)
                reply = httpx.Response(200)
            answered = time.perf_counter()
            took = answered - asked
            time.sleep(0.2)  # what the request left behind (its collection) is measured too
    finally:
        done.set()
        pinger.join()
    seen = child.say(f"end {answered}")
    if reply.status_code != 200:
        raise RuntimeError(f"{reply.status_code}: {reply.text[:300]}")
    for stack in seen["stalls"]:
        print("  a long step of the loop:\n    " + "\n    ".join(stack), file=sys.stderr)
    full = [d for g, d in seen["passes"] if g == 2]
    return {
        "request s": took,
        "loop lag max ms": 1000 * max(seen["lags"], default=0.0),
        "loop lag median ms": 1000 * statistics.median(seen["lags"] or [0.0]),
        "lag max after ms": 1000 * max(seen["after"], default=0.0),
        "loop CPU max ms": 1000 * max(seen["cpu"], default=0.0),
        "health max ms": 1000 * max(latencies, default=0.0),
        "health median ms": 1000 * statistics.median(latencies or [0.0]),
        "gen-2 passes": len(full),
        "gen-2 max ms": 1000 * max(full, default=0.0),
        "gen-0/1 passes": len(seen["passes"]) - len(full),
        "gen-0/1 total ms": 1000 * sum(d for g, d in seen["passes"] if g != 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--mcp-server", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--old", help="a checkout of older code (git worktree add DIR COMMIT): it is 'before'")
    parser.add_argument("--only", choices=("before", "after"))
    parser.add_argument("--quick", action="store_true", help="one run of each case")
    parser.add_argument("--case", action="append", help="only these cases (idle, items, output, base64, mcp)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--stacks", action="store_true", help="print where the loop was in each step over 5 ms of its CPU"
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.stacks)
        return
    if args.mcp_server:
        serve_mcp(args.mcp_server)
        return
    modes = [args.only] if args.only else ["before", "after"]
    runs = 1 if args.quick else args.runs
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    encoded: dict[str, bytes] = {}
    with contextlib.ExitStack() as stack:
        mcp_url = stack.enter_context(mcp_server()) if not args.case or "mcp" in args.case else "http://unused"
        for mode in modes:
            child = Child(str(Path(args.old).resolve()) if mode == "before" and args.old else mode, args.stacks)
            try:
                if not encoded:
                    made = bodies(child.base + "/v1", mcp_url).items()
                    encoded = {name: json.dumps(b).encode() if b else b"" for name, b in made}
                for _ in range(runs):
                    for name, body in encoded.items():
                        if args.case and name not in args.case:
                            continue
                        results.setdefault(name, {}).setdefault(mode, []).append(run_case(child, body))
            finally:
                child.close()
    for name, by_mode in results.items():
        print(f"\n{name} ({len(encoded[name]) / 1e6:.1f} MB body), median of {runs} run(s)")
        print(f"  {'':22}" + "".join(f"{m:>12}" for m in by_mode))
        for key in next(iter(by_mode.values()))[0]:
            row = [statistics.median(r[key] for r in rs) for rs in by_mode.values()]
            print(f"  {key:22}" + "".join(f"{v:12.2f}" if isinstance(v, float) else f"{v:12}" for v in row))


if __name__ == "__main__":
    main()
