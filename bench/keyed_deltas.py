"""How long a keyed recording proxy takes over a stream of many small deltas that each could begin
its key, and how long other clients wait meanwhile.

    .venv/bin/python bench/keyed_deltas.py                      # this code, 3 runs
    .venv/bin/python bench/keyed_deltas.py --old /tmp/old       # and another checkout's, before it

The recording server (`serve --upstream URL --upstream-api-key-env NAME`, in a child process; with
`--old DIR` the code of another checkout, `git archive COMMIT | tar -x -C DIR`, through this venv)
proxies to an upstream in the same child that answers every streamed create with 60,000
`response.output_text.delta` events, each the key but its last character written as `\\u`
escapes (each is held back, as it could begin the key, and sent with the next), or with
`--plain` as many deltas of as many plain characters (none held). This script is the client:
it sends the create while another thread asks `GET /_emulator/health` every 5 ms, and prints
the health answers' latency (max and median) and the create's own time, medians of the runs.
The machine's load is printed before and after: compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
DELTAS = 60_000
PROBE_S = 0.005
ENV = "BENCH_KEYED_DELTAS_KEY"
KEY = "sk-bench/KeY+0123456789abcdef"


def _event(kind: str, **fields: object) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def _body(plain: bool) -> bytes:
    """The upstream's SSE stream: a message item of `DELTAS` deltas, then its completed response."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY[:-1])
    delta = "x" * len(escaped) if plain else escaped
    item = {"type": "message", "id": "msg_bench", "role": "assistant", "status": "in_progress", "content": []}
    response = {"id": "resp_bench", "object": "response", "created_at": 1, "model": "m", "output": []}
    parts = [
        _event("response.created", sequence_number=0, response={**response, "status": "in_progress"}),
        _event("response.output_item.added", sequence_number=1, output_index=0, item=item),
    ]
    where = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    parts += [_event("response.output_text.delta", sequence_number=n + 2, delta=delta, **where) for n in range(DELTAS)]
    parts.append(_event("response.completed", sequence_number=DELTAS + 2, response={**response, "status": "completed"}))
    return "".join(parts).encode()


def _upstream(body: bytes) -> int:
    """An HTTP server in a thread answering every request with `body`; its port."""
    loop = asyncio.new_event_loop()
    box: dict[str, int] = {}
    started = threading.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        writer.write(f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        started.set()
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True).start()
    started.wait(30)
    return box["port"]


def serve(mode: str, plain: bool) -> None:
    """The recording server and its upstream in this process: prints the port, runs until stdin closes."""
    if mode != "here":  # another checkout's code, through this venv's editable install
        finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___ptc_emulator"))
        for name, path in finder.MAPPING.items():
            finder.MAPPING[name] = str(Path(mode) / Path(path).relative_to(ROOT))
    from ptc_emulator.api.cli import settle_heap
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    port = _upstream(_body(plain))
    os.environ[ENV] = KEY
    data = Path(tempfile.mkdtemp(prefix="bench-deltas-"))
    settings = Settings(
        data_dir=data,
        store="memory",
        upstream=f"http://127.0.0.1:{port}/v1",
        record_dir=data / "recordings",
        record_mode="all",
        upstream_api_key_env=ENV,
        allow_unguarded_upstream_key=True,
        bundled_fixtures=False,
    )
    server = EmulatorServer(settings).start()
    settle_heap()
    print(json.dumps({"port": server.port}), flush=True)
    sys.stdin.read()
    server.stop()


def sitting(mode: str, runs: int, plain: bool) -> list[dict[str, float]]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, *(["--plain"] if plain else [])],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdin is not None
    base = f"http://127.0.0.1:{json.loads(child.stdout.readline())['port']}"
    results = []
    try:
        with httpx.Client(base_url=base + "/v1", timeout=600) as http:
            for _ in range(runs):
                with probing(base, PROBE_S) as latencies:
                    time.sleep(0.1)
                    asked = time.perf_counter()
                    reply = http.post("/responses", json={"model": "m", "input": "bench", "stream": True})
                    took = time.perf_counter() - asked
                    time.sleep(0.2)
                if reply.status_code != 200 or "response.completed" not in reply.text[-2000:]:
                    raise RuntimeError(f"{reply.status_code}: {reply.text[-300:]}")
                results.append({**figures(latencies), "request s": took})
    finally:
        child.stdin.close()
        child.wait(120)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--old", help="a checkout of older code: measured first, as 'before'")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="deltas of plain characters, none held back")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.plain)
        return
    modes = {"before": str(Path(args.old).resolve())} if args.old else {}
    modes["after"] = "here"
    shape = "plain" if args.plain else "escaped key but its last character"
    print(f"load {os.getloadavg()[0]:.1f}, {DELTAS:,} deltas ({shape}), median of {args.runs} run(s)")
    by_mode = {label: sitting(mode, args.runs, args.plain) for label, mode in modes.items()}
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"  {'':18}" + "".join(f"{label:>12}" for label in by_mode))
    for key in ("health max ms", "health median ms", "request s"):
        row = [statistics.median(r[key] for r in results) for results in by_mode.values()]
        print(f"  {key:18}" + "".join(f"{v:12.2f}" for v in row))


if __name__ == "__main__":
    main()
