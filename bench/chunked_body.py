"""How long other clients wait while one client sends a large create in tiny chunks (issue 38).

    .venv/bin/python bench/chunked_body.py                      # this code, 3 runs of each body
    .venv/bin/python bench/chunked_body.py --old /tmp/old       # and another checkout's, before it
    .venv/bin/python bench/chunked_body.py --runs 1 --body chunks-of-1

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv). This script is the client: one thread sends a create of `--size` bytes of JSON
(`instructions` long, its program a one-line `text()`) over a raw socket, framed as:

* `length`: with `Content-Length`, the baseline;
* `chunks-of-16`: `Transfer-Encoding: chunked`, 16 bytes a chunk;
* `chunks-of-1`: one byte a chunk (six bytes on the wire for each byte of body).

Meanwhile another thread asks `GET /_emulator/health` every 5 ms and a third sends a small create
(another scope, `store: false`) every 20 ms; it prints the health answers' latency (max, median),
the small creates' (max, median) and the large create's own time, medians of the runs. The machine's
load (1 minute) is printed before and after: compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from health_probe import figures, probing

ROOT = Path(__file__).resolve().parent.parent
PROBE_S = 0.005
SMALL_EVERY_S = 0.02
BODIES = ("length", "chunks-of-16", "chunks-of-1")
SMALL = {
    "model": "gpt-5",
    "tools": [{"type": "programmatic_tool_calling"}],
    "input": "```js\ntext('small')\n```",
    "store": False,
}


def serve(mode: str) -> None:
    """The server in this process: prints its port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    data = Path(tempfile.mkdtemp(prefix="bench-chunked-"))
    server = EmulatorServer(Settings(data_dir=data, store="memory", secret="bench-chunked-0123456789abcdef")).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def request(port: int, framing: str, size: int) -> bytes:
    """The large create's bytes on the wire, head and body."""
    body = json.dumps(
        {"model": "gpt-5", "tools": [{"type": "programmatic_tool_calling"}], "input": "```js\ntext('large')\n```"}
        | {"store": False, "instructions": "a" * size}
    ).encode()
    head = f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    if framing == "length":
        return f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    step = int(framing.rsplit("-", 1)[1])
    size_line = f"{step:x}\r\n".encode()
    chunks = b"".join(size_line + body[i : i + step] + b"\r\n" for i in range(0, len(body) - len(body) % step, step))
    rest = body[len(body) - len(body) % step :]
    if rest:
        chunks += f"{len(rest):x}\r\n".encode() + rest + b"\r\n"
    return f"{head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode() + chunks + b"0\r\n\r\n"


def answered(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(1 << 16):
        got += chunk
    return got


def measure(port: int, wire: bytes) -> dict[str, float]:
    small: list[float] = []
    done = threading.Event()

    def ask_small() -> None:
        headers = {"x-ptc-emulator-scope": "bench-other"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, headers=headers) as http:
            while not done.is_set():
                asked = time.perf_counter()
                answer = http.post("/v1/responses", json=SMALL)
                assert answer.status_code == 200 and "small" in answer.text, answer.text[:300]
                small.append(time.perf_counter() - asked)
                time.sleep(SMALL_EVERY_S)

    asker = threading.Thread(target=ask_small)
    with probing(f"http://127.0.0.1:{port}", PROBE_S) as latencies:
        asker.start()
        try:
            time.sleep(0.2)
            asked = time.perf_counter()
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(wire)
                answer = answered(sock)
            took = time.perf_counter() - asked
            assert answer.startswith(b"HTTP/1.1 200") and b"large" in answer, answer[:300]
            time.sleep(0.2)
        finally:
            done.set()
            asker.join()
    return {
        **figures(latencies),
        "small max ms": 1000 * max(small),
        "small median ms": 1000 * statistics.median(small),
        "large create s": took,
    }


def sitting(mode: str, runs: int, bodies: list[str], size: int) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdin is not None
    port = json.loads(child.stdout.readline())["port"]
    results: dict[str, list[dict[str, float]]] = {}
    try:
        for _ in range(runs):
            for framing in bodies:
                results.setdefault(framing, []).append(measure(port, request(port, framing, size)))
                time.sleep(0.5)
    finally:
        child.stdin.close()
        child.wait(120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=2_000_000, help="the large create's instructions, in bytes")
    parser.add_argument("--body", action="append", choices=BODIES, help="only these framings")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    bodies = args.body or list(BODIES)
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, median of {args.runs} run(s), a body of {args.size:,} bytes")
    by_mode = {label: sitting(mode, args.runs, bodies, args.size) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    for framing in bodies:
        print(f"\n{framing}")
        print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
        for key in ("health max ms", "health median ms", "small max ms", "small median ms", "large create s"):
            row = [statistics.median(r[key] for r in results[framing]) for results in by_mode.values()]
            print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
