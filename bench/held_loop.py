"""How long one in-limit request about scenario templates or user-given patterns holds the
server's event loop: another client asks `GET /_emulator/health` every 20 ms while it runs, and
the slowest answer is printed (the floor, with no request, is a few ms).

    .venv/bin/python bench/held_loop.py --old /tmp/old   # before: a `git worktree add /tmp/old COMMIT`
    .venv/bin/python bench/held_loop.py --only after [--runs 3] [--case history]

The cases (each one request, within the default limits):

* `template`: a scenario added whose message is 60 copies of `{{[0]*100000}}` (850 bytes): its
  constant expressions are folded when it is added;
* `yaml`: a 16 KB YAML scenario of 8,000 list items (`%YAML 1.3`, the pure-Python parser);
* `history`: a `store: false` request of 100 messages of 14,000 random a/b characters, matched
  against a scenario's history pattern `(a|b)*a(a|b){20}c` (RE2's slow path);
* `scenarios`: 60 scenarios whose `match.input` is that pattern, and one request of 13,000 a/b;
* `hosted`: 60 `hosted.code_interpreter` entries of that pattern, and a program whose call's code
  is 13,000 a/b;
* `compile`: a function tool whose schema's `pattern` is `(?i)[\\pL\\pN\\pP]{307}` (a new count
  each run), which RE2 compiles to 440,000 instructions unless stopped.

The server runs in a child process (`EmulatorServer`), of this checkout ("after") or of `--old
DIR` ("before", through this venv's editable install). Printed: for each case the median over the
runs of the slowest health answer during the request, before and after, and the request's status.
The machine is shared: read the ratios.

Measured on a busy 2-core machine, 2 runs, before 78ce6ac and after (slowest health answer):
template 2030 ms -> 45 ms (201 -> 400: the fold passes its 0.5 s in a worker thread), yaml 597 ->
78 ms, history 1846 -> 36 ms, scenarios 1242 -> 73 ms, hosted 1447 -> 29 ms, compile 537 -> 5 ms.
What is left after is the interpreter's switching between the worker thread and the event loop
(a worker thread running Python code hands the interpreter over every 5 ms).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SLOW = "(a|b)*a(a|b){20}c"
CI = {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
PTC = {"type": "programmatic_tool_calling"}


def serve(mode: str) -> None:
    """The server in this process, of this checkout or of another (`mode`: its path); prints its port."""
    if mode != "after":
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="bench-held-")), store="memory", pool_size=1)
    server = EmulatorServer(settings).start()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.readline()  # until the parent closes it
    server.stop()


def ab(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ab") for _ in range(n))


def program(code: str) -> str:
    return f"Run this:\n```js\n{code}\n```"


def template(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    body = {"name": f"t{run}", "match": {"input": "^never$"}, "turns": [{"message": "{{[0]*100000}}" * 60}]}
    return lambda: http.post("/_emulator/scenarios", json=body)


def yaml_case(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    text = f"%YAML 1.3\n---\nname: y{run}\nturns: [{{message: hi}}]\nx: [{','.join(['a'] * 8000)}]\n"
    return lambda: http.post("/_emulator/scenarios", json={"yaml": text})


def history(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    scenario = {"name": "hist", "match": {"input": "^q$", "history": [{"text": SLOW}]}, "turns": [{"message": "x"}]}
    http.post("/_emulator/scenarios", json=scenario).raise_for_status()
    said = [{"role": "user" if i % 2 else "assistant", "content": ab(14_000, i)} for i in range(100)]
    body = {"model": "m", "store": False, "input": [*said, {"role": "user", "content": "q"}]}
    return lambda: http.post("/v1/responses", json=body)


def scenarios(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    for i in range(60):
        scenario = {"name": f"s{i}", "match": {"input": f"{SLOW}({i})?"}, "turns": [{"message": "x"}]}
        http.post("/_emulator/scenarios", json=scenario).raise_for_status()
    body = {"model": "m", "input": ab(13_000, run)}
    return lambda: http.post("/v1/responses", json=body)


def hosted(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    entries = [*({"code": f"{SLOW}({i})?", "logs": "x"} for i in range(60)), {"logs": "y"}]
    http.put("/_emulator/hosted", json={"code_interpreter": entries}).raise_for_status()
    code = program(f"const r = await tools.code_interpreter({{code: '{ab(13_000, run)}'}}); text(r.logs);")
    body = {"model": "m", "input": code, "tools": [PTC, CI]}
    return lambda: http.post("/v1/responses", json=body)


def compile_case(http: httpx.Client, run: int) -> Callable[[], httpx.Response]:
    pattern = r"(?i)[\pL\pN\pP]{" + str(307 + run) + "}"
    tool = {"type": "function", "name": "f", "parameters": {"type": "string", "pattern": pattern}}
    body = {"model": "m", "input": "hi", "tools": [tool]}
    return lambda: http.post("/v1/responses", json=body)


CASES = {
    "template": template,
    "yaml": yaml_case,
    "history": history,
    "scenarios": scenarios,
    "hosted": hosted,
    "compile": compile_case,
}


def held(base: str, request: Callable[[], httpx.Response]) -> tuple[float, int]:
    """The slowest health answer while `request` runs, and the request's status."""
    latencies: list[float] = []
    done = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            while not done.is_set():
                asked = time.perf_counter()
                http.get("/_emulator/health").raise_for_status()
                latencies.append(time.perf_counter() - asked)
                time.sleep(0.02)

    pinger = threading.Thread(target=ping)
    pinger.start()
    time.sleep(0.1)
    try:
        answered = request()
        status, shown = answered.status_code, answered.text
    finally:
        time.sleep(0.05)
        done.set()
        pinger.join()
    if "--show" in sys.argv:
        print(str(shown)[:1500], file=sys.stderr)
    return max(latencies), status


def measure(mode: str, cases: list[str], runs: int) -> dict[str, tuple[float, int]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = json.loads(child.stdout.readline())["port"]
        base = f"http://127.0.0.1:{port}"
        found: dict[str, tuple[float, int]] = {}
        with httpx.Client(base_url=base, timeout=300) as http:
            for case in cases:
                worst, statuses = [], []
                for run in range(runs):
                    http.post("/_emulator/reset", json={}).raise_for_status()
                    slowest, status = held(base, CASES[case](http, run))
                    worst.append(slowest)
                    statuses.append(status)
                found[case] = (statistics.median(worst), statuses[-1])
                print(f"  {mode:>6} {case:<10} {found[case][0] * 1000:9.1f} ms  ({found[case][1]})", file=sys.stderr)
        return found
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(60)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", help="a checkout of older code (git worktree add DIR COMMIT): it is 'before'")
    parser.add_argument("--only", choices=("before", "after"))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print the end of each answer")
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args()
    cases = args.case or list(CASES)
    modes = [args.only] if args.only else (["before", "after"] if args.old else ["after"])
    results = {
        mode: measure(str(Path(args.old).resolve()) if mode == "before" else "after", cases, args.runs)
        for mode in modes
    }
    print(
        f"{'case':<10} " + " ".join(f"{m + ' (status)':>22}" for m in modes) + ("   ratio" if len(modes) == 2 else "")
    )
    for case in cases:
        cells = [f"{results[m][case][0] * 1000:12.1f} ms ({results[m][case][1]})" for m in modes]
        ratio = ""
        if len(modes) == 2:
            ratio = f"   {results['before'][case][0] / max(results['after'][case][0], 1e-6):6.1f}x"
        print(f"{case:<10} " + " ".join(f"{c:>22}" for c in cells) + ratio)


if __name__ == "__main__":
    main()
