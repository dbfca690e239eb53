"""The emulator against its floor: a bare FastAPI endpoint on the same uvicorn stack, same bodies.

    .venv/bin/python bench/floor.py                   # about a minute
    .venv/bin/python bench/floor.py --quick           # a smoke run
    .venv/bin/python bench/floor.py --memory 20000    # RSS of the server across 20,000 chain requests

Two servers run side by side, each in its own process: `ptc-emulator serve --store memory` and
the floor, a FastAPI app under the same uvicorn (httptools, uvloop) whose one endpoint parses the
JSON body it is sent (`body: dict`) and returns a fixed response of the same size as the
emulator's. One raw keep-alive httpx client per server (not the SDK, whose own cost would hide
the server's) sends pre-encoded bodies; only the round trip is timed. The floor is sent exactly
the bodies the emulator was sent in the same block, so both parse the same bytes.

Measured in interleaved blocks (emulator, then floor, then the next block), so that a busy
neighbour slows both alike; it prints medians, the floor's medians, their ratio and:

* create to suspend: a two-call `Promise.all` program, `store: false`;
* resume to complete: the same, its two outputs sent back (replayed input);
* the 100-call `store: false` chain: 101 requests whose bodies grow by three items each;
* resumes/s with 8 concurrent clients (threads, one keep-alive client each) looping over a
  program that pauses at five sequential calls; every request after the first is a resume.

Beside them, a third server is sent the same bodies: the floor's endpoint plus one round trip to
a sandbox pool like the emulator's (the same `Pool`, two spare contexts), running the step of
the program the emulator ran for that body: a start to its suspension, or a live resume. Its
column is the least any server built on this sandbox spends: the floor, the pipe to a worker
and V8, and none of the emulator's own work (validation, rules, scripts, usage, the journal).

Beside each measure it prints the emulator's own share (the emulator minus the floor + V8 pool)
and the sandbox's (the floor + V8 pool minus the floor), and the same 100-call chain two more
ways (`bench/chains.py`): over HTTP by `previous_response_id` (`store: true`) and over one
WebSocket (`response.create` frames, `store: false`, continued by `previous_response_id`), as a
fraction of the HTTP `store: false` chain; then the goals of issue 31 (`bench/floor_report.py`).

The tool definitions are the test suite's (`tests.support.ADD_TOOL`).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the test suite's helpers, for the same tool definitions

from chains import Socket, by_id, replayed_steps  # noqa: E402  (bench/, beside this script)
from clients import Counts, rates  # noqa: E402
from floor_report import report, report_long  # noqa: E402

from ptc_emulator.testing.process import ServerProcess, free_port  # noqa: E402
from tests.support import ADD_TOOL, js  # noqa: E402

TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
FANOUT = js(
    "const [a, b] = await Promise.all([tools.add({a: 1, b: 2}), tools.add({a: 3, b: 4})]);\ntext(String(a + b))"
)
PAUSES = js("let acc = 0;\nfor (let i = 0; i < 5; i++) acc = await tools.add({a: acc, b: i});\ntext(String(acc))")
CHAIN = js("let acc = 0;\nfor (let i = 0; i < 100; i++) acc = await tools.add({a: acc, b: i});\ntext(String(acc))")
LONG = js("let acc = 0;\nfor (let i = 0; i < 400; i++) acc = await tools.add({a: acc, b: i});\ntext(String(acc))")
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}

FLOOR_APP = """
import contextlib, os
from fastapi import FastAPI, Request
from fastapi.responses import Response
REPLY = {"status": "200"}
POOL = None
@contextlib.asynccontextmanager
async def lifespan(app):
    global POOL
    if os.environ.get("PTC_FLOOR_SANDBOX") == "1":
        from ptc_emulator.sandbox import Pool, PoolConfig
        POOL = Pool(PoolConfig(spare_contexts=2))
        await POOL.start()
    yield
    if POOL is not None:
        await POOL.close()
app = FastAPI(lifespan=lifespan)
def program(body, seed):
    # The program step the emulator ran for this body: its code (the user message's inline block)
    # and its journal (each output with the call it answers), as the emulator hands them to its pool.
    from ptc_emulator.sandbox import Program, ToolResult
    items = body["input"]
    code = items[0]["content"].split("```js\\n", 1)[1].rsplit("\\n```", 1)[0]
    called = {i["call_id"]: i for i in items if i.get("type") == "function_call"}
    journal = tuple(
        ToolResult(called[i["call_id"]]["name"], called[i["call_id"]]["arguments"], i["output"])
        for i in items if i.get("type") == "function_call_output"
    )
    return Program(code, ("add",), seed=seed, clock_ms=0, journal=journal)
@app.post("/v1/responses")
async def create(body: dict, request: Request) -> Response:
    # The same parse as the emulator's (the JSON body into Python objects), and a reply of the
    # size the emulator's was: the floor is the HTTP work alone. With the sandbox, it also runs
    # the program's step in a worker pool as the emulator's (start to suspension, or live resume).
    if POOL is not None:
        outcome = await POOL.run(program(body, int(request.headers.get("x-floor-seed", "0"))))
        if type(outcome).__name__ == "Failed":
            return Response(repr(outcome), status_code=500)
    return Response(REPLY.get(request.headers.get("x-floor-reply", ""), b"{}"), media_type="application/json")
@app.put("/reply/{key}")
async def reply(key: str, request: Request) -> dict:
    REPLY[key] = await request.body()
    return {}
@app.get("/health")
async def health() -> dict:
    return {}
@app.get("/pid")
async def pid() -> dict:
    return {"pid": os.getpid(), "workers": POOL.pids if POOL is not None else []}
"""


@contextlib.contextmanager
def emulator(extra: tuple[str, ...] = ()) -> Iterator[ServerProcess]:
    data = Path(tempfile.mkdtemp(prefix="bench-floor-")) / "data"
    options = ("--log-level", "warning", *extra)
    server = ServerProcess(data, store="memory", workers=os.cpu_count() or 1, args=options)
    server.start(timeout=300)  # a busy machine may take a while to start the workers
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def floor(*, sandbox: bool = False) -> Iterator[str]:
    """The bare endpoint's server; with `sandbox`, the endpoint also runs each body's program step
    in a sandbox pool like the emulator's: the least any server built on this sandbox must spend."""
    port = free_port()
    app = Path(tempfile.mkdtemp(prefix="bench-floor-app-")) / "floor_app.py"
    app.write_text(FLOOR_APP, encoding="utf-8")
    argv = [sys.executable, "-m", "uvicorn", "floor_app:app", "--app-dir", str(app.parent), "--port", str(port)]
    argv += ["--log-level", "warning", "--no-access-log", "--http", "httptools", "--loop", "uvloop"]
    env = {**os.environ, "PTC_FLOOR_SANDBOX": "1" if sandbox else "0"}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{root}/health").status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the floor server did not start")
            time.sleep(0.05)
        yield root
    finally:
        process.terminate()
        process.wait(10)


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def answers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """function_call_output items for the function calls in `output` (the caller copied)."""
    return [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": json.dumps(sum(json.loads(item["arguments"]).values())),
            "caller": item.get("caller"),
        }
        for item in output
        if item.get("type") == "function_call"
    ]


def calls(output: list[dict[str, Any]]) -> bool:
    return any(item.get("type") == "function_call" for item in output)


class Timed:
    """One keep-alive client; `post` times the round trip of pre-encoded bytes and keeps them."""

    def __init__(self, root: str) -> None:
        self.http = httpx.Client(base_url=root, timeout=120)
        self.sent: list[tuple[bytes, bytes]] = []
        """(body, reply) of every request since the last `take()`, for the floor to be sent."""

    def post(self, body: bytes, headers: dict[str, str] = HEADERS) -> tuple[float, bytes]:
        began = time.perf_counter()
        reply = self.http.post("/v1/responses", content=body, headers=headers)
        took = time.perf_counter() - began
        if reply.status_code != 200:
            raise RuntimeError(f"{reply.status_code}: {reply.text[:500]}")
        self.sent.append((body, reply.content))
        return took, reply.content

    def take(self) -> list[tuple[bytes, bytes]]:
        sent, self.sent = self.sent, []
        return sent

    def close(self) -> None:
        self.http.close()


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: Iterable[int]) -> float:
    """CPU seconds (user + system) the processes have used: unlike latency, what a busy neighbour
    does not change much."""
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def replay_on_floor(
    floor: Timed, sent: list[tuple[bytes, bytes]], pids: Iterable[int] = ()
) -> tuple[list[float], float]:
    """The same bodies against the floor, each answered with a reply of the emulator's size:
    (round trips, the CPU seconds of `pids` for them; the replies are stored beforehand)."""
    for n, (_, reply) in enumerate(sent):
        floor.http.put(f"/reply/r{n}", content=reply)
    pids = list(pids)
    before = cpu_s(pids)
    times = []
    for n, (body, _) in enumerate(sent):
        took, _ = floor.post(body, {**HEADERS, "x-floor-reply": f"r{n}"})
        times.append(took)
    used = cpu_s(pids) - before
    floor.take()
    return times, used


def fanout(emu: Timed) -> tuple[float, float]:
    """(create to suspend, resume to complete) of one two-call Promise.all program."""
    items: list[Any] = [{"role": "user", "content": FANOUT}]
    create, reply = emu.post(encode({"model": "m", "input": items, "tools": TOOLS, "store": False}))
    output = json.loads(reply)["output"]
    assert [o["type"] for o in output] == ["program", "function_call", "function_call"], output
    items = [*items, *output, *answers(output)]
    resume, reply = emu.post(encode({"model": "m", "input": items, "tools": TOOLS, "store": False}))
    final = json.loads(reply)
    assert final["output"][-1]["content"][0]["text"] == "10", final
    return create, resume


def converse(emu: Timed, code: str, each: Callable[[int], None] | None = None) -> float:
    """One program's whole `store: false` conversation, each output answered, until it completes:
    the sum of its round trips. `each(n)` runs after the n-th request (0 is the create)."""
    items: list[Any] = [{"role": "user", "content": code}]
    total = 0.0
    for n in itertools.count():
        took, reply = emu.post(encode({"model": "m", "input": items, "tools": TOOLS, "store": False}))
        total += took
        if each is not None:
            each(n)
        output = json.loads(reply)["output"]
        if not calls(output):
            break
        items = [*items, *output, *answers(output)]
    return total


def chain(emu: Timed, steps: int = 100) -> float:
    """The whole `store: false` loop of a 100-call program: the sum of its 101 round trips."""
    return converse(emu, CHAIN if steps == 100 else CHAIN.replace("100", str(steps)))


def throughput(root: str, clients: int, seconds: float) -> tuple[float, float]:
    """(resumes/s, requests/s): `clients` threads loop over a five-pause program."""
    stop = time.monotonic() + seconds

    def work(counts: Counts) -> None:
        emu = Timed(root)

        def counted(n: int) -> None:
            emu.sent.clear()
            counts[1] += 1
            counts[0] += n > 0

        try:
            while time.monotonic() < stop:
                converse(emu, PAUSES, counted)
        finally:
            emu.close()

    return rates(clients, work)


def throughput_on_floor(root: str, clients: int, seconds: float, conversation: list[tuple[bytes, bytes]]) -> float:
    """Resumes/s of `clients` threads each replaying `conversation` (a five-pause program's bodies,
    as the emulator was sent them) over and over against a floor, each a program of its own."""
    with httpx.Client(base_url=root) as http:
        for n, (_, reply) in enumerate(conversation):
            http.put(f"/reply/t{n}", content=reply)
    stop = time.monotonic() + seconds

    def work(counts: Counts) -> None:
        client = Timed(root)
        mine = id(counts)
        try:
            while time.monotonic() < stop:
                mine += 1
                for n, (body, _) in enumerate(conversation):
                    client.post(body, {**HEADERS, "x-floor-reply": f"t{n}", "x-floor-seed": str(mine)})
                    client.sent.clear()
                    counts[0] += n > 0
                    counts[1] += 1
        finally:
            client.close()

    return rates(clients, work)[0]


def pauses(emu: Timed) -> list[tuple[bytes, bytes]]:
    """The bodies and replies of one five-pause program's conversation with the emulator."""
    converse(emu, PAUSES)
    return emu.take()


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def memory(requests: int, bound_mb: float, extra: tuple[str, ...]) -> int:
    """`requests` chain requests (100-call chains, 101 requests each); the server's RSS as it goes."""
    with emulator(extra) as server:
        emu = Timed(server.root)
        assert server.proc is not None
        pid = server.proc.pid
        chain(emu, 10)
        emu.take()
        start = rss_mb([pid])
        print(f"server RSS after warm-up: {start:.0f} MB (workers, not counted: {server.worker_pids})")
        sent, step, began = 0, max(1, requests // 10), time.monotonic()
        next_at = step
        while sent < requests:
            chain(emu, min(100, max(1, requests - sent - 1)))
            sent += len(emu.take())
            if sent >= next_at:
                print(f"  after {sent:6d} requests: server {rss_mb([pid]):.0f} MB   ({time.monotonic() - began:.0f} s)")
                next_at += step
        end = rss_mb([pid])
        total = rss_mb([pid, *server.health()["workers"]])
        print(f"server RSS after {sent} chain requests: {end:.0f} MB (bound {bound_mb:.0f} MB)")
        print(f"server and workers: {total:.0f} MB")
        emu.close()
        return 0 if end <= bound_mb else 1


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few blocks, short throughput")
    parser.add_argument("--blocks", type=int, default=None, help="interleaved blocks (default 12; quick 2)")
    parser.add_argument("--seconds", type=float, default=None, help="throughput run length (default 10; quick 2)")
    parser.add_argument("--memory", type=int, default=0, metavar="N", help="instead: N chain requests, server RSS")
    parser.add_argument(
        "--bound-mb", type=float, default=400.0, help="with --memory: the RSS the server must stay under"
    )
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra `serve` option (repeatable)")
    args = parser.parse_args(argv)
    extra = tuple(args.serve_arg)
    if args.memory:
        return memory(args.memory, args.bound_mb, extra)
    blocks = args.blocks or (2 if args.quick else 12)
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    fanouts_per_block = 20

    print("the emulator against its floor: raw keep-alive httpx, same bodies, interleaved blocks; medians")
    print(f"cpus: {os.cpu_count()}   python: {sys.version.split()[0]}   blocks: {blocks}   serve args: {list(extra)}")
    results: dict[str, list[float]] = {f"{p}{k}": [] for p in ("", "f", "s") for k in ("create", "resume", "chain")}
    results.update(idchain=[], wschain=[])
    first = {"model": "m", "input": [{"role": "user", "content": CHAIN}], "tools": TOOLS}
    with emulator(extra) as server, floor() as bare, floor(sandbox=True) as sandboxed:
        emu, flo, sfl = Timed(server.root), Timed(bare), Timed(sandboxed)
        assert server.proc is not None
        floor_pid = int(httpx.get(f"{bare}/pid").json()["pid"])
        known = httpx.get(f"{sandboxed}/pid").json()
        sandbox_pids = [int(known["pid"]), *known["workers"]]
        server_pids, worker_pids = [server.proc.pid], list(server.worker_pids)
        cpu = {f"{p}{k}": 0.0 for p in ("", "chain ") for k in ("server", "workers", "floor", "sandboxed")}
        requests_sent = {"emulator": 0, "floor": 0, "chain": 0}
        for _ in range(3):  # warm all three (the first programs, the tokenizer, the JIT of the paths)
            fanout(emu)
            sent = emu.take()
            replay_on_floor(flo, sent)
            replay_on_floor(sfl, sent)
        chain(emu, 10)
        sent = emu.take()
        replay_on_floor(flo, sent)
        replay_on_floor(sfl, sent)
        socket = Socket(server.root, HEADERS)
        socket.chain(first, answers)
        by_id(emu.http, HEADERS, first, answers)
        for _ in range(blocks):
            for _ in range(fanouts_per_block):
                before = cpu_s(server_pids), cpu_s(worker_pids)
                create, resume = fanout(emu)
                cpu["server"] += cpu_s(server_pids) - before[0]
                cpu["workers"] += cpu_s(worker_pids) - before[1]
                results["create"].append(create)
                results["resume"].append(resume)
                sent = emu.take()
                requests_sent["emulator"] += len(sent)
                (fcreate, fresume), used = replay_on_floor(flo, sent, [floor_pid])
                cpu["floor"] += used
                requests_sent["floor"] += len(sent)
                results["fcreate"].append(fcreate)
                results["fresume"].append(fresume)
                (screate, sresume), used = replay_on_floor(sfl, sent, sandbox_pids)
                cpu["sandboxed"] += used
                results["screate"].append(screate)
                results["sresume"].append(sresume)
            before = cpu_s(server_pids), cpu_s(worker_pids)
            results["chain"].append(chain(emu))
            cpu["chain server"] += cpu_s(server_pids) - before[0]
            cpu["chain workers"] += cpu_s(worker_pids) - before[1]
            sent = emu.take()
            requests_sent["chain"] += len(sent)
            times, used = replay_on_floor(flo, sent, [floor_pid])
            results["fchain"].append(sum(times))
            cpu["chain floor"] += used
            times, used = replay_on_floor(sfl, sent, sandbox_pids)
            results["schain"].append(sum(times))
            cpu["chain sandboxed"] += used
            results["idchain"].append(by_id(emu.http, HEADERS, first, answers))
            results["wschain"].append(socket.chain(first, answers))
        # A step of a longer chain, early and late: over the socket, and over HTTP store:false
        # beside the floor sent the same bodies (whose growing size the floor parses too).
        longer = {"model": "m", "input": [{"role": "user", "content": LONG}], "tools": TOOLS}
        long_steps = {"socket": socket.steps(longer, answers), "replayed": replayed_steps(emu.post, longer, answers)}
        long_steps["floor"] = replay_on_floor(flo, emu.take())[0]
        socket.close()
        conversation = pauses(emu)
        emu.close()
        flo.close()
        sfl.close()
        least_resumes = throughput_on_floor(sandboxed, 8, seconds, conversation)
        before = time.process_time(), cpu_s(server_pids), cpu_s(worker_pids), time.monotonic()
        resumes, requests = throughput(server.root, 8, seconds)
        elapsed = time.monotonic() - before[3]
        load = {
            "client": time.process_time() - before[0],
            "server": cpu_s(server_pids) - before[1],
            "workers": cpu_s(worker_pids) - before[2],
        }

    medians = {key: median_ms(values) for key, values in results.items()}
    rates_seen = {"resumes": resumes, "requests": requests, "least": least_resumes}
    report(medians, rates_seen, cpu, requests_sent, load, elapsed)
    report_long(long_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
