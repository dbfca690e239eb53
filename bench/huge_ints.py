"""How long other clients wait while one client's body of huge integers is read (issue 38).

    .venv/bin/python bench/huge_ints.py                   # this code, 3 runs of each case
    .venv/bin/python bench/huge_ints.py --old /tmp/old    # and another checkout's, before it
    .venv/bin/python bench/huge_ints.py --runs 1 --stacks # where the server held the interpreter

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv), memory store. This script is the client: it sends each case while another thread asks
`GET /_emulator/health` every 10 ms, and prints the health answers' latency (max and median) and
the case's own time, medians of the runs, before and after side by side:

* `schema`: a create (`store: false`) whose function tool's `parameters` schema holds, as an
  `enum`, 3,500 integers of 4,000 digits each (14 MB: within the body limit, and under CPython's
  4,300 digits a text-to-int conversion takes): the 200, its reply echoing the tools.
* `input`: the same integers in a function tool's `strict: false` schema `default`, and a create
  that is refused (`input` not a string or array: the 400).
* `socket`: a WebSocket `response.create` of 16 MB that compresses to some 16 KB (the client
  offers permessage-deflate, as the SDK's library does), its answer read.

With `--stacks`, a thread in the server wakes every millisecond; when it woke 50 ms or more late
(another thread held the interpreter), it prints what every other thread was running just before
and just after.

The machine's load (1 minute) is printed before and after: the health figures are the scheduler's
as much as the server's on a busy machine, so compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import httpx
from health_probe import one_request

ROOT = Path(__file__).resolve().parent.parent
PROBE_S = 0.01
CASES = ("schema", "input", "socket")
PROGRAM = "```js\ntext('ok')\n```"
COUNT = 3_500
DIGITS = 4_000


IDLE = ("release.py", "thread.py:81 _worker", "runners.py", "huge_ints.py")
"""Where a thread waits for work (the stacks of threads found there are not printed)."""


def _stacks() -> dict[int, str]:
    here = threading.get_ident()
    seen = {}
    for ident, frame in sys._current_frames().items():
        if ident == here:
            continue
        stack = traceback.extract_stack(frame)[-8:]
        seen[ident] = " < ".join(f"{f.filename.split('/')[-1]}:{f.lineno} {f.name}" for f in stack[::-1])
    return seen


def watch(loop_ticks: list[float], loop_thread: list[int]) -> None:
    """Where the other threads were around each wake of this thread 50 ms or more late; and where
    the event loop's thread was while it had not ticked for 50 ms or more."""
    before = _stacks()
    sampled: list[str] = []
    while True:
        asked = time.perf_counter()
        time.sleep(0.001)
        now = time.perf_counter()
        late = now - asked - 0.001
        after = _stacks()
        if late > 0.05:
            lines = [f"held {1000 * late:.0f} ms"]
            for ident, stack in after.items():
                if not stack.startswith(IDLE):
                    lines += [f"  before: {before.get(ident, '?')}", f"  after:  {stack}"]
            print("\n".join(lines), file=sys.stderr, flush=True)
        before = after
        if loop_thread and now - loop_ticks[0] > 0.003:
            sampled.append(after.get(loop_thread[0], "?"))
        elif sampled:
            if len(sampled) > 50:
                counted: dict[str, int] = {}
                for stack in sampled:
                    counted[stack] = counted.get(stack, 0) + 1
                top = sorted(counted.items(), key=lambda kv: -kv[1])[:4]
                lines = [f"loop busy ~{len(sampled)} ms", *(f"  {n}x {stack}" for stack, n in top)]
                print("\n".join(lines), file=sys.stderr, flush=True)
            sampled.clear()


def serve(mode: str, stacks: bool) -> None:
    """The server in this process: prints its port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    data = Path(tempfile.mkdtemp(prefix="bench-huge-ints-"))
    settings = Settings(data_dir=data, store="memory", secret="bench-huge-ints-0123456789abcdef0123")
    server = EmulatorServer(settings).start()
    settle_heap()
    if stacks:
        sys.setswitchinterval(0.0005)
        import asyncio

        ticks = [time.perf_counter()]
        thread: list[int] = []

        async def tick() -> None:
            thread.append(threading.get_ident())
            while True:
                ticks[0] = time.perf_counter()
                await asyncio.sleep(0.001)

        assert server.loop is not None
        asyncio.run_coroutine_threadsafe(tick(), server.loop)
        threading.Thread(target=watch, args=(ticks, thread), daemon=True).start()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def measure(base: str, send: Callable[[], httpx.Response], status: int) -> dict[str, float]:
    return one_request(base, send, status, PROBE_S)


def bodies() -> dict[str, bytes]:
    ints = ",".join(str(10 ** (DIGITS - 1) + n) for n in range(COUNT))
    schema = '{"type":"object","properties":{"n":{"type":"integer","enum":[' + ints + "]}}}"
    loose = '{"type":"object","default":[' + ints + "]}"
    return {
        "schema": (
            '{"model":"gpt-5","store":false,"input":"' + PROGRAM.replace("\n", "\\n") + '",'
            '"tools":[{"type":"function","name":"f","parameters":' + schema + "}]}"
        ).encode(),
        "input": (
            '{"model":"gpt-5","store":false,"input":5,'
            '"tools":[{"type":"function","name":"f","strict":false,"parameters":' + loose + "}]}"
        ).encode(),
    }


def _socket(base: str) -> httpx.Response:
    """A long compressed create over a WebSocket, its answer read (as a 200 when it completed)."""
    import websockets.sync.client

    text = "x" * (16 * 10**6) + "\n" + PROGRAM
    with websockets.sync.client.connect(base.replace("http", "ws", 1) + "/v1/responses", max_size=None) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "gpt-5", "store": False, "input": text}))
        while True:
            kind = json.loads(ws.recv(timeout=600))["type"]
            if kind in ("error", "response.completed", "response.failed"):
                return httpx.Response(200 if kind == "response.completed" else 500)


def sitting(mode: str, runs: int, only: list[str], stacks: bool) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, *(["--stacks"] if stacks else [])],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    base = f"http://127.0.0.1:{json.loads(child.stdout.readline())['port']}"
    large = bodies()
    results: dict[str, list[dict[str, float]]] = {}
    json_type = {"content-type": "application/json"}
    try:
        with httpx.Client(base_url=base + "/v1", timeout=600) as http:
            sends: dict[str, tuple[Callable[[], httpx.Response], int]] = {
                "schema": (lambda: http.post("/responses", content=large["schema"], headers=json_type), 200),
                "input": (lambda: http.post("/responses", content=large["input"], headers=json_type), 400),
            }
            sends["socket"] = (lambda: _socket(base), 200)
            for _ in range(runs):
                for name in CASES:
                    if not only or name in only:
                        send, status = sends[name]
                        results.setdefault(name, []).append(measure(base, send, status))
    finally:
        child.stdin.close()
        child.wait(120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--case", action="append", choices=CASES, help="only these cases")
    parser.add_argument("--stacks", action="store_true", help="print where the server held the interpreter")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.stacks)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, memory store, median of {args.runs} run(s)")
    by_mode = {label: sitting(mode, args.runs, args.case or [], args.stacks) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    for name in CASES:
        if args.case and name not in args.case:
            continue
        print(f"\n{name}")
        print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
        for key in ("health max ms", "health median ms", "request s"):
            row = [statistics.median(r[key] for r in results[name]) for results in by_mode.values()]
            print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
