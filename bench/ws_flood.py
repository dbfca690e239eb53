"""How long other clients wait while one WebSocket client floods its socket with frames (issue 38).

    .venv/bin/python bench/ws_flood.py                      # this code, 3 runs of each flood
    .venv/bin/python bench/ws_flood.py --old /tmp/old       # and another checkout's, before it
    .venv/bin/python bench/ws_flood.py --runs 1 --flood junk
    .venv/bin/python bench/ws_flood.py --fragments --old /tmp/old   # what a fragmented message keeps

The server runs in a child process (`EmulatorServer`, its heap frozen once started, as `serve`
does; with `--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through
this venv). This script is the client: it opens `ws://…/v1/responses`, writes a flood of frames in
one go from a thread (a raw socket, the frames made beforehand) while another thread reads the
answers, and meanwhile a third asks `GET /_emulator/health` every 5 ms; it prints the health
answers' latency (max and median) and the flood's own time, medians of the runs:

* `junk`: 50,000 text frames of 1,000 `x` (each answered with a `frame_not_json` error event);
* `creates`: 20,000 `response.create` frames (`store: false`): 64 are queued and played, the rest
  refused with the 429 `too_many_queued_requests` error event.

`--fragments` measures instead what one message sent in fragments keeps: a text frame `{` with
`fin` 0, then 2,000,000 masked continuations with `fin` 0 (1-byte ones, then empty ones), a ping
after them; it prints the server's resident memory grown once the ping is answered (or the socket
closed), and again once the client has closed its socket, and whether the server closed it first
(each in a server of its own).

The flood's answers are read (a client that reads none is bounded by the backpressure and, past
`--write-pause-timeout`, aborted; that is not what is measured here). The machine's load (1 minute)
is printed before and after: compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from health_probe import figures, probing

ROOT = Path(__file__).resolve().parent.parent
PROBE_S = 0.005
FLOODS = {
    "junk": (50_000, "x" * 1000),
    "creates": (20_000, json.dumps({"type": "response.create", "model": "gpt-5", "input": "hello", "store": False})),
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

    data = Path(tempfile.mkdtemp(prefix="bench-wsflood-"))
    server = EmulatorServer(Settings(data_dir=data, store="memory", secret="bench-ws-flood-0123456789abcdef")).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


FRAGMENTS = 2_000_000


def raw_frame(first: int, payload: bytes) -> bytes:
    """A masked client frame whose first byte (FIN and opcode) is `first` (the mask all zero)."""
    size = len(payload)
    if size < 126:
        return struct.pack("!BB", first, 0x80 | size) + b"\0\0\0\0" + payload
    return struct.pack("!BBH", first, 0x80 | 126, size) + b"\0\0\0\0" + payload


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def fragmented(port: int, pid: int, fragment: bytes, count: int = FRAGMENTS) -> dict[str, float]:
    """`{` then `count` continuations of `fragment`, then a ping: the server's memory grown."""
    flood = raw_frame(0x01, b"{") + raw_frame(0x00, fragment) * count + raw_frame(0x89, b"now")
    before = resident_mb(pid)
    sock = opened(port)
    closed = 0.0
    with contextlib.suppress(OSError):
        sock.sendall(flood)
    with contextlib.suppress(OSError):
        seen = b""
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                closed = 1.0
                break
            seen += chunk
            if b"\x8a\x03now" in seen:  # the pong: every fragment was read
                break
            if seen.startswith(b"\x88"):  # a close frame
                closed = 1.0
    held = resident_mb(pid) - before
    sock.close()
    time.sleep(1.0)
    return {"grown MB, open": held, "grown MB, closed": resident_mb(pid) - before, "server closed it": closed}


def fragments_sitting(mode: str, runs: int) -> dict[str, list[dict[str, float]]]:
    """Each kind of fragments, each run, in a server of its own (memory freed by one run is reused
    by the next, which would hide what it keeps)."""
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(runs):
        for name, fragment in (("1-byte", b"x"), ("empty", b"")):
            child = subprocess.Popen(
                [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            assert child.stdout is not None and child.stdin is not None
            port = json.loads(child.stdout.readline())["port"]
            try:
                fragmented(port, child.pid, b"x", 1000)  # the first socket's warm-up (imports, caches): not counted
                results.setdefault(name, []).append(fragmented(port, child.pid, fragment))
            finally:
                child.stdin.close()
                child.wait(120)
    return results


def frame(text: str) -> bytes:
    """A masked client text frame (the mask all zero: the payload goes as it is)."""
    payload = text.encode()
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x81, 0x80 | size)
    elif size < 65536:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
    return head + b"\0\0\0\0" + payload


def opened(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head[:200]
    return sock


def measure(port: int, flood: bytes, read: bool) -> dict[str, float]:
    sock = opened(port)

    def drain() -> None:
        with socket.socket(fileno=os.dup(sock.fileno())) as reader:
            while reader.recv(1 << 20):
                pass

    reader = threading.Thread(target=drain, daemon=True)
    try:
        with probing(f"http://127.0.0.1:{port}", PROBE_S) as latencies:
            if read:
                reader.start()
            time.sleep(0.2)
            asked = time.perf_counter()
            with contextlib.suppress(OSError):  # a client that reads nothing is aborted in the end
                sock.sendall(flood)
            took = time.perf_counter() - asked
            time.sleep(0.3)
    finally:
        sock.close()
    return {**figures(latencies), "flood sent s": took}


def sitting(mode: str, runs: int, only: list[str], read: bool) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdin is not None
    port = json.loads(child.stdout.readline())["port"]
    floods = {name: frame(text) * count for name, (count, text) in FLOODS.items()}
    results: dict[str, list[dict[str, float]]] = {}
    try:
        for _ in range(runs):
            for name, flood in floods.items():
                if not only or name in only:
                    results.setdefault(name, []).append(measure(port, flood, read))
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
    parser.add_argument("--unread", action="store_true", help="the flooding client reads none of its answers")
    parser.add_argument("--flood", action="append", choices=tuple(FLOODS), help="only these floods")
    parser.add_argument("--fragments", action="store_true", help="what one message sent in fragments keeps")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    if args.fragments:
        by_kind = {label: fragments_sitting(mode, args.runs) for label, mode in modes.items()}
        for kind in ("1-byte", "empty"):
            print(f"\n{kind} fragments: {FRAGMENTS:,} of them after a first frame, median of {args.runs} run(s)")
            print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_kind))
            for key in ("grown MB, open", "grown MB, closed", "server closed it"):
                row = [statistics.median(r[key] for r in results[kind]) for results in by_kind.values()]
                print(f"  {key:18}" + "".join(f"{v:12.1f}" for v in row))
        return
    print(f"load {os.getloadavg()[0]:.1f}, median of {args.runs} run(s)")
    by_mode = {label: sitting(mode, args.runs, args.flood or [], not args.unread) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    for name in FLOODS:
        if args.flood and name not in args.flood:
            continue
        count, text = FLOODS[name]
        print(f"\n{name}: {count:,} frames of {len(text)} characters")
        print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
        for key in ("health max ms", "health median ms", "flood sent s"):
            row = [statistics.median(r[key] for r in results[name]) for results in by_mode.values()]
            print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
