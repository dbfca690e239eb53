"""What the Agents API's takeover watch and a `?limit=1` list of sessions cost with many sessions
carrying the largest metadata allowed (16 keys of 64 characters, values of 512).

    .venv/bin/python bench/session_heads.py                         # this code, SQLite, 20,000 sessions
    .venv/bin/python bench/session_heads.py --old /tmp/old          # and another checkout's, before it
    .venv/bin/python bench/session_heads.py --store postgresql://... --sessions 5000

Each code runs in a child process (with `--old DIR` the code of another checkout, `git archive
COMMIT | tar -x -C DIR`, through this venv). The child starts a server (`EmulatorServer`) on a
fresh store, creates one session through the API, copies its stored row `--sessions` times (new
ids, each with its own metadata), then calls what the watch calls every half lease
(`Harness._running`) and what `GET /v1/agents/sessions?limit=1` calls (`Harness._listed`) in this
thread, `--runs` times each, and prints the medians, how many rows and characters the store's
statements handed back (SQL stores), and the process's peak resident memory. A PostgreSQL store
must be an empty database: the rows are left there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-session-heads-0123456789abcdef"
HEADERS = {"OpenAI-Beta": "agents=v1"}


def metadata(n: int) -> dict[str, str]:
    return {f"{k:02d}{n:010d}".ljust(64, "k"): f"{n}".ljust(512, "v") for k in range(16)}


def measure(mode: str, store: str, sessions: int, runs: int) -> dict[str, Any]:
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.emulator.agents import harness as harness_module
    from ptc_emulator.emulator.storage import pgpool, sqlite
    from ptc_emulator.testing.server import EmulatorServer

    read = {"rows": 0, "chars": 0}
    for tx in (sqlite._Tx, pgpool._Tx):
        for name in ("one", "rows"):
            used = getattr(tx, name)

            def counted(self: Any, *args: Any, _used: Any = used) -> Any:
                got = _used(self, *args)
                rows = got if isinstance(got, list) else [got] if got is not None else []
                read["rows"] += len(rows)
                read["chars"] += sum(len(str(v)) for row in rows for v in row)
                return got

            setattr(tx, name, counted)

    data = Path(tempfile.mkdtemp(prefix="bench-heads-"))
    server = EmulatorServer(Settings(data_dir=data, store=store, secret=SECRET, bundled_fixtures=False)).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            body = {
                "environment": {"type": "none"},
                "agent": {"model": "gpt-5"},
                "input": "Run this:\n```js\ntext('hi')\n```",
                "metadata": metadata(0),
            }
            created = http.post("agents/sessions", headers=HEADERS, json=body)
            assert created.status_code == 200, created.text
            first = created.json()["id"]
            while http.get(f"agents/sessions/{first}", headers=HEADERS).json()["status"] != "idle":
                time.sleep(0.05)
        harness = server.app.state.emulator.agents
        records = harness.records
        doc = records.get(harness_module.SESSION, first)
        for n in range(1, sessions):
            copy = json.loads(json.dumps(doc))
            sid = f"sess_bench{n:08d}"
            copy["session"]["id"] = sid
            copy["session"]["metadata"] = metadata(n)
            records.put(harness_module.SESSION, sid, copy, harness_module._head(copy))
        figures: dict[str, Any] = {}
        for what, call in (
            ("watch", lambda: harness._running()),
            ("list1", lambda: harness._listed(None, {}, None, None, 1, "desc")),
        ):
            times, rows, chars = [], [], []
            for _ in range(runs):
                read["rows"] = read["chars"] = 0
                started = time.perf_counter()
                call()
                times.append(time.perf_counter() - started)
                rows.append(read["rows"])
                chars.append(read["chars"])
            figures[what] = {"s": statistics.median(times), "rows": max(rows), "chars": max(chars)}
        figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return figures
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--store", default="sqlite", help="sqlite (a fresh folder), memory, or a PostgreSQL URL")
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.store, args.sessions, args.runs)))
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}; {args.sessions} sessions, store {args.store.split('@')[-1]}")
    for label, mode in modes.items():
        command = [sys.executable, __file__, "--child", mode, "--store", args.store]
        command += ["--sessions", str(args.sessions), "--runs", str(args.runs)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        for what in ("watch", "list1"):
            f = got[what]
            print(f"{label:6} {what:5}: {f['s']:.3f} s, {f['rows']} rows, {f['chars']:,} characters read")
        print(f"{label:6} peak RSS {got['peak_rss_mb']} MB")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
