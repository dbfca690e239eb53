"""The emulator over HTTP beside the floor: a bare FastAPI endpoint at the same path.

    .venv/bin/python bench/http_bench.py            # about a minute and a half
    .venv/bin/python bench/http_bench.py --quick    # a smoke run

Every server runs in its own process under uvicorn on 127.0.0.1, and every figure is measured
by the same client, the official SDK (`openai.OpenAI`), so the ratios show what the emulator
adds to an HTTP round trip. Medians over repeated runs in one client process; the machine is
shared, so read the ratios, not the milliseconds. It prints, for the emulator with its warm
cache of live programs and without it (every resume a replay):

Every request goes through the SDK client's `post()` with the Response type, which is what
`responses.create` does minus its transformation of the parameters: that transformation walks the
whole input in Python and, for the 100-call chain's growing `store: false` replay, costs the
client far more than the emulator (up to hundreds of ms per request at 300 items); the chain's
`responses.create` figure is printed too, so the difference shows.

* the floor: the same call against a FastAPI app that returns a fixed Response;
* create to suspend: a two-call `Promise.all` program, `store: false`;
* resume to completion: the same, its two outputs sent back;
* a 100-call sequential chain over HTTP with `store: false`: the whole loop, 101 requests;
* resumes per second with 8 concurrent clients, each running a program that pauses at five
  sequential tool calls (a resume is one HTTP request that answers a pause), and all requests
  per second alongside.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
from clients import Counts, rates  # bench/, beside this script
from openai.types.responses import Response

from ptc_emulator.testing.process import ServerProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
TOOLS: list[Any] = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]
FANOUT = (
    "```js\nconst [a, b] = await Promise.all([tools.add({a: 1, b: 2}), tools.add({a: 3, b: 4})]);\n"
    "text(String(a + b))\n```"
)
PAUSES = (
    "```js\nlet acc = 0;\nfor (let i = 0; i < 5; i++) acc = await tools.add({a: acc, b: i});\ntext(String(acc))\n```"
)
CHAIN = (
    "```js\nlet acc = 0;\nfor (let i = 0; i < 100; i++) acc = await tools.add({a: acc, b: i});\ntext(String(acc))\n```"
)

FLOOR_APP = """
from fastapi import FastAPI
from fastapi.responses import JSONResponse
app = FastAPI()
BODY = {BODY}
@app.post("/v1/responses")
async def create(body: dict) -> JSONResponse:
    return JSONResponse(BODY)
"""


@contextlib.contextmanager
def serve(argv: list[str], health: str) -> Iterator[str]:
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(health).status_code < 500:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server {argv} did not start")
            time.sleep(0.05)
        yield health
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def emulator(live_cache: int) -> Iterator[str]:
    data = Path(tempfile.mkdtemp(prefix="bench-")) / "data"
    options = ("--live-cache", str(live_cache), "--log-level", "warning")
    with ServerProcess(data, store="memory", workers=os.cpu_count() or 1, args=options) as server:
        yield server.base_url


@contextlib.contextmanager
def floor(body: dict[str, Any]) -> Iterator[str]:
    port = free_port()
    app = Path(tempfile.mkdtemp(prefix="bench-floor-")) / "floor_app.py"
    app.write_text(FLOOR_APP.replace("{BODY}", repr(body)), encoding="utf-8")
    argv = [sys.executable, "-m", "uvicorn", "floor_app:app", "--app-dir", str(app.parent), "--port", str(port)]
    argv += ["--log-level", "warning", "--no-access-log"]
    with serve(argv, f"http://127.0.0.1:{port}/docs"):
        yield f"http://127.0.0.1:{port}/v1"


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)


def create(c: openai.OpenAI, **body: Any) -> Response:
    """`responses.create` without the SDK's parameter transformation."""
    response: Response = c.post("/responses", body=body, cast_to=Response)
    return response


def answers(output: list[Any]) -> list[dict[str, Any]]:
    outputs = []
    for item in output:
        if item.type == "function_call":
            args = json.loads(item.arguments)
            outputs.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": str(args["a"] + args["b"]),
                    "caller": item.caller.model_dump(),
                }
            )
    return outputs


def replayed(items: list[Any], output: list[Any]) -> list[Any]:
    return [*items, *(o.model_dump(exclude_none=True) for o in output), *answers(output)]


def timed(fn: Callable[[], Any], runs: int, warm: int = 3) -> list[float]:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return times


class Fanout:
    """create to suspend, then resume to completion, both store:false."""

    def __init__(self, c: openai.OpenAI) -> None:
        self.c = c
        self.items: list[Any] = []

    def create(self) -> None:
        self.items = [{"role": "user", "content": FANOUT}]
        response = create(self.c, model="m", input=self.items, tools=TOOLS, store=False)
        assert [o.type for o in response.output] == ["program", "function_call", "function_call"]
        self.items = replayed(self.items, response.output)

    def resume(self) -> None:
        response = create(self.c, model="m", input=self.items, tools=TOOLS, store=False)
        assert response.output_text == "10", response.output_text


def chain(c: openai.OpenAI, sdk_create: bool = False) -> None:
    items: list[Any] = [{"role": "user", "content": CHAIN}]
    while True:
        if sdk_create:
            response = c.responses.create(model="m", input=items, tools=TOOLS, store=False)
        else:
            response = create(c, model="m", input=items, tools=TOOLS, store=False)
        if not any(o.type == "function_call" for o in response.output):
            break
        items = replayed(items, response.output)
    assert response.output_text == "4950", response.output_text


def throughput(base_url: str, clients: int, seconds: float) -> tuple[float, float]:
    """(resumes per second, requests per second): clients loop over a five-pause program."""
    stop = time.monotonic() + seconds

    def work(counts: Counts) -> None:
        with client(base_url) as c:
            while time.monotonic() < stop:
                items: list[Any] = [{"role": "user", "content": PAUSES}]
                response = create(c, model="m", input=items, tools=TOOLS, store=False)
                counts[1] += 1
                while any(o.type == "function_call" for o in response.output):
                    items = replayed(items, response.output)
                    response = create(c, model="m", input=items, tools=TOOLS, store=False)
                    counts[0] += 1
                    counts[1] += 1
                assert response.output_text == "10", response.output_text

    return rates(clients, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, chains, seconds = (20, 2, 3.0) if args.quick else (150, 7, 10.0)

    print("HTTP benchmark: medians, one client process, every server in its own process")
    print(f"cpus: {os.cpu_count()}   python: {sys.version.split()[0]}   openai: {openai.__version__}")
    print()
    with contextlib.ExitStack() as stack:
        on = stack.enter_context(emulator(64))
        off = stack.enter_context(emulator(0))
        with client(on) as c:  # a real suspend response, for the floor to return
            fixed = create(c, model="m", input=[{"role": "user", "content": FANOUT}], tools=TOOLS, store=False)
        bare = stack.enter_context(floor(fixed.model_dump(mode="json")))
        clients = {name: stack.enter_context(client(url)) for name, url in (("floor", bare), ("on", on), ("off", off))}
        fans = {name: Fanout(clients[name]) for name in ("on", "off")}
        # Interleaved, so that a noisy neighbour slows the floor and the emulator alike.
        times: dict[str, list[float]] = {k: [] for k in ("floor", "on create", "on resume", "off create", "off resume")}
        for n in range(runs + 5):
            for name, fn in (
                ("floor", lambda: create(clients["floor"], model="m", input="x")),
                ("on create", fans["on"].create),
                ("on resume", fans["on"].resume),
                ("off create", fans["off"].create),
                ("off resume", fans["off"].resume),
            ):
                began = time.perf_counter()
                fn()
                if n >= 5:
                    times[name].append(time.perf_counter() - began)
        chain_times: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(chains):
            for name in ("on", "off"):
                chain_times[name] += timed(functools.partial(chain, clients[name]), 1, warm=0)
        sdk_chain = timed(lambda: chain(clients["on"], sdk_create=True), 1, warm=0)[0]
        rates = {name: throughput(url, 8, seconds) for name, url in (("on", on), ("off", off))}

    base = statistics.median(times["floor"])
    rows: list[tuple[str, str, float]] = [("floor: bare FastAPI endpoint, same path, same client", "", base)]
    for name, label in (("on", "cache on"), ("off", "cache off")):
        rows.append(
            (f"{label}: create to suspend (2-call Promise.all)", "", statistics.median(times[f"{name} create"]))
        )
        rows.append((f"{label}: resume to completion", "", statistics.median(times[f"{name} resume"])))
        rows.append((f"{label}: 100-call chain, store:false, 101 requests", "", statistics.median(chain_times[name])))
        if name == "on":
            rows.append((f"{label}: the same chain through responses.create", "", sdk_chain))
        rows.append((f"{label}: resumes/s, 8 concurrent clients", "rate", rates[name][0]))
        rows.append((f"{label}: requests/s, the same run", "rate", rates[name][1]))

    print(f"{'measure':62} {'median':>12} {'x floor':>9}")
    print("-" * 85)
    for name, kind, value in rows:
        if kind == "rate":
            print(f"{name:62} {value:9.0f} /s {'':>9}")
        else:
            print(f"{name:62} {value * 1000:9.2f} ms {value / base:9.1f}")
    print("-" * 85)
    print("cache on/off: the warm cache of live programs in each worker; off, every resume is a replay")
    print("targets: create and resume within 3x the floor; the 100-call chain within 200x; 300 resumes/s")


if __name__ == "__main__":
    main()
