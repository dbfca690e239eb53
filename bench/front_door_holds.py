"""How long other clients wait while one client's large request is read, refused or continued (issue 38).

    .venv/bin/python bench/front_door_holds.py                   # this code, 3 runs of each case
    .venv/bin/python bench/front_door_holds.py --old /tmp/old    # and another checkout's, before it
    .venv/bin/python bench/front_door_holds.py --case nested --runs 1

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv), memory store. This script is the client: it sends each case while another thread asks
`GET /_emulator/health` every 10 ms, and prints the health answers' latency (max and median) and
the case's own time, medians of the runs, before and after side by side:

* `continue`: a create continuing a conversation of 150,000 items (`conversation`, `store: true`);
* `page`: `GET /v1/conversations/{id}/items?limit=100` on it;
* `arrays`: a create whose unknown parameter holds 3,900,000 arrays `[0]` (15.6 MB: the 400);
* `nested`: a create whose function's schema `default` holds 120,000 arrays 63 deep (15.2 MB,
  7,600,000 arrays: the 400 `invalid_function_parameters`).

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
from collections.abc import Callable
from pathlib import Path

import httpx
from health_probe import one_request

ROOT = Path(__file__).resolve().parent.parent
PROBE_S = 0.01
CASES = ("continue", "page", "arrays", "nested")
PROGRAM = "```js\ntext('ok')\n```"


def serve(mode: str) -> None:
    """The server in this process: prints its port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    data = Path(tempfile.mkdtemp(prefix="bench-front-door-"))
    settings = Settings(data_dir=data, store="memory", secret="bench-front-door-holds-0123456789abcdef")
    server = EmulatorServer(settings).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def measure(base: str, send: Callable[[], httpx.Response], status: int) -> dict[str, float]:
    return one_request(base, send, status, PROBE_S)


def bodies() -> dict[str, bytes]:
    nested = "[" * 63 + "]" * 63
    return {
        "arrays": b'{"model":"gpt-test","input":"hi","x":[' + b",".join([b"[0]"] * 3_900_000) + b"]}",
        "nested": (
            '{"model":"gpt-5","input":"hi","tools":[{"type":"function","name":"f","parameters":'
            '{"type":"object","default":[' + ",".join([nested] * 120_000) + "]}}]}"
        ).encode(),
    }


def sitting(mode: str, runs: int, only: list[str]) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdin is not None
    base = f"http://127.0.0.1:{json.loads(child.stdout.readline())['port']}"
    large = bodies()
    results: dict[str, list[dict[str, float]]] = {}
    json_type = {"content-type": "application/json"}
    try:
        with httpx.Client(base_url=base + "/v1", timeout=600) as http:
            cid = http.post("/conversations", json={}).json()["id"]
            history = [{"role": "user", "content": "hi"}] * 150_000 + [{"role": "user", "content": PROGRAM}]
            http.post("/responses", json={"model": "gpt-5", "conversation": cid, "input": history}).raise_for_status()
            sends: dict[str, tuple[Callable[[], httpx.Response], int]] = {
                "continue": (
                    lambda: http.post("/responses", json={"model": "gpt-5", "conversation": cid, "input": PROGRAM}),
                    200,
                ),
                "page": (lambda: http.get(f"/conversations/{cid}/items", params={"limit": 100}), 200),
                "arrays": (lambda: http.post("/responses", content=large["arrays"], headers=json_type), 400),
                "nested": (lambda: http.post("/responses", content=large["nested"], headers=json_type), 400),
            }
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
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, memory store, median of {args.runs} run(s)")
    by_mode = {label: sitting(mode, args.runs, args.case or []) for label, mode in modes.items()}
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
