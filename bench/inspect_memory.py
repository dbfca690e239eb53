"""What `ptc-emulator inspect FILE` costs in memory and time before it serves, for files of many tiny
values and a file of long strings.

    .venv/bin/python bench/inspect_memory.py                    # this code
    .venv/bin/python bench/inspect_memory.py --old /tmp/old     # and another checkout's, before it
    .venv/bin/python bench/inspect_memory.py --files tiny-16mib --runs 1

Each file is read in a child process (`load_trace`, what `inspect` does before it serves; with
`--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through this venv),
which prints its peak resident memory (the interpreter's own included) and the time `load_trace`
took, or the one line it refused the file with. The files:

* `tiny-16mib`: `{"journal": [{"seq": 1, "request": {"input": [[], [], ...]}}]}`, 16 MiB (5.6 million
  empty lists);
* `tiny-at-bound`: the same with as many lists as the value bound lets through (2 million lists,
  4 million of the characters counted, 6 MiB);
* `strings-64mib`: 64 entries, each a request whose input is one message of 1 MiB of text, then the
  same text in the response (a journal of long bodies, just under the 128 MiB file bound);
* `both-at-bounds`: the two at once, just under both bounds (60 such entries and 2 million lists).

Medians of `--runs`; the machine's load (1 minute) is printed before and after.
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

ROOT = Path(__file__).resolve().parent.parent
FILES = ("tiny-16mib", "tiny-at-bound", "strings-64mib", "both-at-bounds")


def child(mode: str, path: str) -> None:
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, where in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(where).relative_to(ROOT))
    from ptc_emulator.api.inspector.serve import TraceError, load_trace

    started = time.perf_counter()
    try:
        page = load_trace(Path(path))
        outcome = f"served ({len(page) / 2**20:.0f} MiB page)"
    except TraceError as error:
        outcome = "refused: " + str(error).split(": ", 1)[1][:60]
    took = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_mb": peak, "s": took, "outcome": outcome}), flush=True)


def write(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.json"
    with path.open("w", encoding="utf-8") as file:
        if kind.startswith("tiny"):
            # Each `[],` is two of the characters counted (`serve.MAX_TRACE_VALUES`).
            count = (16 * 2**20 - 64) // 3 if kind == "tiny-16mib" else (4_000_000 - 20) // 2
            file.write('{"journal": [{"seq": 1, "request": {"input": [')
            file.write(",".join(["[]"] * count))
            file.write("]}}]}")
        else:
            text = "a" * (2**20 - 4096)
            many = 64 if kind == "strings-64mib" else 60
            entries = [
                {
                    "seq": n,
                    "status": 200,
                    "request": {"input": [{"type": "message", "role": "user", "content": text}]},
                    "response": {"output": [{"type": "message", "role": "assistant", "content": text}]},
                }
                for n in range(1, many + 1)
            ]
            if kind == "both-at-bounds":
                entries.append({"seq": many + 1, "status": 200, "request": {"input": [[]] * ((4_000_000 - 2000) // 2)}})
            json.dump({"object": "emulator.trace", "test": "t", "journal": entries}, file)
    return path


def measure(mode: str, path: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", nargs="*", default=list(FILES), choices=FILES)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["now"] = "here"
    print(f"load before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as folder:
        for kind in args.files:
            path = write(kind, Path(folder))
            size = path.stat().st_size / 2**20
            for label, mode in modes.items():
                runs = [measure(mode, path) for _ in range(args.runs)]
                peak = statistics.median(float(r["peak_mb"]) for r in runs)  # type: ignore[arg-type]
                took = statistics.median(float(r["s"]) for r in runs)  # type: ignore[arg-type]
                print(f"{kind:14} {size:6.1f} MiB {label:6} peak {peak:7.0f} MB  {took:6.2f} s  {runs[-1]['outcome']}")
            path.unlink()
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
