"""How long other clients wait while a long stored response is made and read back (issue 38).

    .venv/bin/python bench/stored_reads.py                      # this code, 3 runs of each operation
    .venv/bin/python bench/stored_reads.py --old /tmp/old       # and another checkout's, before it
    .venv/bin/python bench/stored_reads.py --store memory --runs 1

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv). This script is the client: it stores one response of 200,000 small input items, then
sends each operation on it while another thread asks `GET /_emulator/health` every 5 ms, and prints
the health answers' latency (max and median) and the operation's own time, medians of the runs:

* `create`: the 200,000-item create itself (`store: true`, a 7 MB body);
* `continue`: a create with `previous_response_id` (its history read back and validated);
* `get`: `GET /v1/responses/{id}`;
* `input_items`: `GET /v1/responses/{id}/input_items?limit=100`;
* `input_tokens`: `POST /v1/responses/input_tokens` with `previous_response_id`.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from health_probe import figures, probing

ROOT = Path(__file__).resolve().parent.parent
ITEMS = 200_000
PROBE_S = 0.005
PTC_TOOLS: list[dict[str, Any]] = [{"type": "programmatic_tool_calling"}]
PROGRAM = "Run this program.\n```js\ntext('ok')\n```"
OPERATIONS = ("create", "continue", "get", "input_items", "input_tokens")


def serve(mode: str, store: str) -> None:
    """The server in this process: prints its port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    data = Path(tempfile.mkdtemp(prefix="bench-stored-"))
    server = EmulatorServer(Settings(data_dir=data, store=store, secret="bench-stored-reads-0123456789abcdef")).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def measure(base: str, send: Callable[[], httpx.Response]) -> dict[str, float]:
    with probing(base, PROBE_S) as latencies:
        time.sleep(0.1)
        asked = time.perf_counter()
        reply = send()
        took = time.perf_counter() - asked
        time.sleep(0.2)  # what the request left behind is measured too
    if reply.status_code != 200:
        raise RuntimeError(f"{reply.status_code}: {reply.text[:300]}")
    return {**figures(latencies), "request s": took}


def sitting(mode: str, store: str, runs: int, only: list[str]) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, "--store", store],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    base = f"http://127.0.0.1:{json.loads(child.stdout.readline())['port']}"
    items: list[Any] = [{"role": "user", "content": f"item {n}"} for n in range(ITEMS - 1)]
    items.append({"role": "user", "content": PROGRAM})
    body = json.dumps({"model": "m", "input": items, "tools": PTC_TOOLS, "store": True}).encode()
    results: dict[str, list[dict[str, float]]] = {}
    try:
        with httpx.Client(base_url=base + "/v1", timeout=600) as http:
            made: list[str] = []

            def create() -> httpx.Response:
                reply = http.post("/responses", content=body, headers={"content-type": "application/json"})
                made.append(reply.json().get("id", ""))
                return reply

            create().raise_for_status()
            rid = made[-1]
            sends: dict[str, Callable[[], httpx.Response]] = {
                "create": create,
                "continue": lambda: http.post(
                    "/responses",
                    json={"model": "m", "previous_response_id": rid, "input": PROGRAM, "tools": PTC_TOOLS},
                ),
                "get": lambda: http.get(f"/responses/{rid}"),
                "input_items": lambda: http.get(f"/responses/{rid}/input_items", params={"limit": 100}),
                "input_tokens": lambda: http.post(
                    "/responses/input_tokens", json={"model": "m", "previous_response_id": rid, "input": "hi"}
                ),
            }
            for _ in range(runs):
                for name in OPERATIONS:
                    if not only or name in only:
                        results.setdefault(name, []).append(measure(base, sends[name]))
    finally:
        child.stdin.close()
        child.wait(120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--op", action="append", choices=OPERATIONS, help="only these operations")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.store)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, {args.store} store, {ITEMS:,} items, median of {args.runs} run(s)")
    by_mode = {label: sitting(mode, args.store, args.runs, args.op or []) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    for name in OPERATIONS:
        if args.op and name not in args.op:
            continue
        print(f"\n{name}")
        print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
        for key in ("health max ms", "health median ms", "request s"):
            row = [statistics.median(r[key] for r in results[name]) for results in by_mode.values()]
            print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
