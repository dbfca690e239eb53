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
* `chunks-of-1`: one byte a chunk (six bytes on the wire for each byte of body);
* `length-crlf`: with `Content-Length`, the JSON behind `--size` bytes of `\r\n\r\n` repeated
  (whitespace to JSON, a head end to a search for one);
* `chunked-crlf`: the same bytes chunked, 64 KiB a chunk;
* `chunked-zeros`: chunked, 64 KiB chunks of `\n0\r\n\r\n` repeated (a last chunk's look in the data;
  not JSON, so answered the 400), then the JSON in one chunk;
* `chunked-02`: chunked, `--size` bytes of chunks written `02\r\n\r\n\r\n` (a leading zero, a CRLF as
  the data: whitespace to JSON), then the JSON in one chunk.

Two floods are sent for `--flood-s` seconds (or until the server closes), as fast as the server takes
them, and are answered with a refusal rather than served:

* `ext-flood`: chunked, every chunk `1;x=<8000 bytes>\r\nX\r\n` (framing, nearly no body);
* `413-flood`: `Content-Length: 10^12`, its body sent on after the 413.

For these it prints the bytes the server took (MB) and its peak resident memory's growth (MB).

Meanwhile another thread asks `GET /_emulator/health` every 5 ms and a third sends a small create
(another scope, `store: false`) every 20 ms; it prints the health answers' latency (max, median),
the small creates' (max, median), the large create's own time and the server's CPU time meanwhile
(the small creates' and health answers' too), medians of the runs. The machine's
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
BODIES = (
    "length",
    "chunks-of-16",
    "chunks-of-1",
    "length-crlf",
    "chunked-crlf",
    "chunked-zeros",
    "chunked-02",
    "ext-flood",
    "413-flood",
)
FLOODS = ("ext-flood", "413-flood")
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
    if framing in ("chunked-zeros", "chunked-02"):
        body = body.replace(b"a" * size, b"a")
        if framing == "chunked-zeros":
            data = b"\n0\r\n\r\n" * (65536 // 6)
            chunks = (b"%x\r\n" % len(data) + data + b"\r\n") * max(1, size // len(data))
        else:
            chunks = b"02\r\n\r\n\r\n" * (size // 8)
        chunks += b"%x\r\n" % len(body) + body + b"\r\n"
        return f"{head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode() + chunks + b"0\r\n\r\n"
    if framing.endswith("-crlf"):
        body = b"\r\n\r\n" * (size // 4) + body.replace(b"a" * size, b"a")
        if framing == "length-crlf":
            return f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
        chunks = b"".join(b"%x\r\n" % len(piece) + piece + b"\r\n" for piece in pieces)
        return f"{head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode() + chunks + b"0\r\n\r\n"
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


def peak_mb(pid: int) -> float:
    """The server process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    """The server process's CPU time so far (user and system), in seconds (all its clients')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def flood(port: int, framing: str, seconds: float) -> int:
    """Sends `framing`'s flood for `seconds` or until the server stops taking it: the bytes taken."""
    head = f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    if framing == "ext-flood":
        start = f"{head}Transfer-Encoding: chunked\r\n\r\n".encode()
        block = (b"1;x=" + b"e" * 8000 + b"\r\n \r\n") * 32
    else:
        start, block = f"{head}Content-Length: {10**12}\r\n\r\n".encode(), b" " * 2**18
    sent, until = 0, time.perf_counter() + seconds
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(1.0)
        sock.sendall(start)
        try:
            while time.perf_counter() < until:
                sent += sock.send(block)
        except (OSError, TimeoutError):
            pass  # closed by the server, or it stopped reading
    return sent


def measure(port: int, wire: bytes, framing: str = "", pid: int = 0, flood_s: float = 10.0) -> dict[str, float]:
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
            asked, peak, cpu = time.perf_counter(), peak_mb(pid), cpu_s(pid)
            if framing in FLOODS:
                taken = flood(port, framing, flood_s)
            else:
                with socket.create_connection(("127.0.0.1", port)) as sock:
                    sock.sendall(wire)
                    answer = answered(sock)
                if framing == "chunked-zeros":  # not JSON: read whole, then the 400
                    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
                else:
                    assert answer.startswith(b"HTTP/1.1 200") and b"large" in answer, answer[:300]
                taken = len(wire)
            took, grown, used = time.perf_counter() - asked, peak_mb(pid) - peak, cpu_s(pid) - cpu
            time.sleep(0.2)
        finally:
            done.set()
            asker.join()
    return {
        **figures(latencies),
        "small max ms": 1000 * max(small),
        "small median ms": 1000 * statistics.median(small),
        "large create s": took,
        "server CPU s": used,
        "taken MB": taken / 1e6,
        "peak RSS grew MB": grown,
    }


def sitting(mode: str, runs: int, bodies: list[str], size: int, flood_s: float) -> dict[str, list[dict[str, float]]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout is not None and child.stdin is not None
    port = json.loads(child.stdout.readline())["port"]
    results: dict[str, list[dict[str, float]]] = {}
    try:
        for _ in range(runs):
            for framing in bodies:
                wire = b"" if framing in FLOODS else request(port, framing, size)
                results.setdefault(framing, []).append(measure(port, wire, framing, child.pid, flood_s))
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
    parser.add_argument("--flood-s", type=float, default=10.0, help="how long a flood is sent at most")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    bodies = args.body or list(BODIES)
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    print(f"load {os.getloadavg()[0]:.1f}, median of {args.runs} run(s), a body of {args.size:,} bytes")
    by_mode = {label: sitting(mode, args.runs, bodies, args.size, args.flood_s) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    for framing in bodies:
        print(f"\n{framing}")
        print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
        keys = [
            "health max ms",
            "health median ms",
            "small max ms",
            "small median ms",
            "large create s",
            "server CPU s",
        ]
        for key in keys + ["taken MB", "peak RSS grew MB"]:
            row = [statistics.median(r[key] for r in results[framing]) for results in by_mode.values()]
            print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
