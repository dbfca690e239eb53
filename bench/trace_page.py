"""How long health waits while the server makes a large trace page (`GET /_emulator/inspector/trace.html`).

    .venv/bin/python bench/trace_page.py                      # this code, 6 pages
    .venv/bin/python bench/trace_page.py --old /tmp/old       # and another checkout's, before it
    .venv/bin/python bench/trace_page.py --runs 3 --items 40000

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv). Its journal is filled with `--requests` store:false creates, each `--items` small
message items and a program (millions of objects once the page is made from them). Then the page
is asked for `--runs` times while another thread asks `GET /_emulator/health` every 5 ms; it prints,
per run and as medians, the health answers' worst and median latency and the page's own time and
size. The machine's load (1 minute) is printed before and after: compare runs of one sitting.
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
from pathlib import Path

import httpx
from health_probe import figures, probing

ROOT = Path(__file__).resolve().parent.parent
PROBE_S = 0.005


def serve(mode: str) -> None:
    """The server in this process: prints its port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    data = Path(tempfile.mkdtemp(prefix="bench-trace-"))
    server = EmulatorServer(Settings(data_dir=data, store="memory", secret="bench-trace-0123456789abcdef")).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def sitting(mode: str, runs: int, requests: int, items: int) -> list[dict[str, float]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdin is not None
    port = json.loads(child.stdout.readline())["port"]
    root = f"http://127.0.0.1:{port}"
    results = []
    try:
        with httpx.Client(base_url=root, timeout=600) as http:
            message = {"type": "message", "role": "user", "content": "an earlier turn"}
            program = {"type": "message", "role": "user", "content": "```js\ntext('done')\n```"}
            for n in range(requests):
                body = {
                    "model": "gpt-5",
                    "tools": [{"type": "programmatic_tool_calling"}],
                    "store": False,
                    "input": [message] * items + [program],
                    "instructions": f"conversation {n}",
                }
                http.post("/v1/responses", json=body).raise_for_status()
            for _ in range(runs):
                time.sleep(0.5)
                with probing(root, PROBE_S) as latencies:
                    started = time.perf_counter()
                    page = http.get("/_emulator/inspector/trace.html", params={"test": "x"})
                    took = time.perf_counter() - started
                page.raise_for_status()
                result = figures(latencies) | {"page s": took, "page MB": len(page.content) / 1e6}
                print("  " + "  ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)
                results.append(result)
    finally:
        child.stdin.close()
        child.wait(120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--items", type=int, default=60_000)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, {args.requests} creates of {args.items:,} items, {args.runs} pages")
    by_mode = {}
    for label, mode in modes.items():
        print(label)
        by_mode[label] = sitting(mode, args.runs, args.requests, args.items)
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"  {'medians':18}" + "".join(f"{label:>12}" for label in by_mode))
    for key in ("health max ms", "health median ms", "page s", "page MB"):
        row = [statistics.median(r[key] for r in results) for results in by_mode.values()]
        print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))
    print(
        f"  {'worst health ms':18}" + "".join(f"{max(r['health max ms'] for r in rs):12.2f}" for rs in by_mode.values())
    )


if __name__ == "__main__":
    main()
