"""A V8 worker process: reads one JSON request per line on stdin, answers one line on stdout
(a long string of the answer follows it in frames of its own, `_pieces.framed`).

Started by `Pool` as `python -I -m ptc_emulator.sandbox._worker`. A program that aborts the process (some
allocations do, whatever the heap limit) takes only this worker down; the pool replaces it.
Native code writing to stdout cannot corrupt the protocol: the protocol keeps a private copy of
the original stdout and fd 1 is pointed at stderr.

Two things keep V8's fixed costs off the request path: spare contexts created ahead of time,
and closing finished contexts after the answer is sent. Both happen on a housekeeping thread
(each context is an isolate with a thread of its own; creating or closing one does not stop
another from running), so a request never waits for them.
A warm cache keeps suspended programs alive (`_live.LiveCache`): a request whose journal extends
a cached program's journal by exactly its pending calls resumes it live instead of replaying it.
The outcome is the same either way (a miss simply replays), so correctness never depends on a hit.
A request may carry only the new results (`tail`) with the length and digest of the journal it
continues: if this worker holds that very state, it resumes it (and extends the digest it holds
by the tail alone); otherwise it answers `miss` and the pool sends the whole program. Heap
measures the cache is due are taken while no request waits.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import threading
from typing import Any, BinaryIO

from . import _pieces, _v8
from ._live import LiveCache, Taken
from ._wire import outcome_to_json, program_from_json
from .outcome import Failed, Outcome, Suspended, ToolResult

_IDLE_MEASURE_S = 0.002
"""With a heap measure due, how long no request may come before the worker takes it."""


class Housekeeper:
    """A thread that keeps `count` spare contexts ready and closes the contexts it is handed."""

    def __init__(self, count: int, heap_bytes: int) -> None:
        self.count = count
        self.heap_bytes = heap_bytes
        self._ready: list[_v8.Context] = []
        self._doomed: list[_v8.Execution] = []
        self._busy = False
        self._wake = threading.Condition()
        threading.Thread(target=self._work, name="housekeeping", daemon=True).start()

    def take(self, heap_bytes: int) -> _v8.Context | None:
        with self._wake:
            return self._ready.pop() if heap_bytes == self.heap_bytes and self._ready else None

    def busy(self, busy: bool) -> None:
        """While a request runs, the housekeeping waits: on two cores it would slow the request."""
        with self._wake:
            self._busy = busy
            if not busy:
                self._wake.notify()

    def close(self, executions: list[_v8.Execution]) -> None:
        with self._wake:
            self._doomed.extend(executions)

    def _work(self) -> None:
        while True:
            with self._wake:
                while self._busy or (not self._doomed and len(self._ready) >= self.count):
                    self._wake.wait()
                doomed, self._doomed = self._doomed, []
                short = len(self._ready) < self.count
            for execution in doomed:
                execution.close()
            if short:
                context = _v8.Context(self.heap_bytes)
                with self._wake:
                    self._ready.append(context)


def _close_within(execution: _v8.Execution, seconds: float) -> bool:
    """Close the execution's context; False if that takes longer than `seconds` (V8 is stuck)."""
    closer = threading.Thread(target=execution.close, name="teardown", daemon=True)
    closer.start()
    closer.join(seconds)
    return not closer.is_alive()


class Worker:
    def __init__(
        self, replies: BinaryIO, housekeeper: Housekeeper, cache: LiveCache, close_wait_s: float = 2.0
    ) -> None:
        self.replies = replies
        self.housekeeper = housekeeper
        self.cache = cache
        self.close_wait_s = close_wait_s
        """How long a timed-out or out-of-memory context may take to close before this process
        retires instead (a normal teardown takes a few milliseconds)."""

    def send(self, message: dict[str, Any]) -> None:
        self.replies.write(_pieces.framed(message))  # a long string in frames of its own
        self.replies.flush()

    def handle(self, request: dict[str, Any]) -> None:
        if request.get("forget"):  # `Pool.forget_live`: no answer, the pool waits for none
            self.housekeeper.close(self.cache.drain())
            return
        self.housekeeper.busy(True)
        try:
            self._handle(request)
        finally:
            self.housekeeper.busy(False)

    def _handle(self, request: dict[str, Any]) -> None:
        key: str | None = request.get("key")
        hit: Taken | None
        if "tail" in request:  # only the new results: resume the state it names, or say miss
            assert key is not None
            hit = self.cache.take_tail(key, request["prefix"], request["digest"], request["tail"])
            if hit is None:
                self.send({"id": request["id"], "miss": True})
                return
            journal = hit.journal
        else:
            journal = request["program"]["journal"]
            hit = self.cache.take(key, journal) if key is not None and self.cache.size > 0 else None
        outcome: Outcome
        if hit is not None:
            execution = hit.execution
            outcome = execution.resume([ToolResult(n, a, o, e) for n, a, o, e in hit.more])
        else:
            program = program_from_json(request["program"])
            execution = _v8.Execution(program, self.housekeeper.take(program.limits.heap_bytes))
            outcome = execution.start()
        retire = False
        if isinstance(outcome, Failed) and outcome.kind in ("timeout", "memory"):
            # V8 may still be running this program inside a builtin that no termination reaches,
            # on its way to aborting the process. Tear the context down before answering: if V8
            # aborts doing it, the abort is this program's. If the teardown does not finish soon,
            # this process is not trusted with another program: the answer says so, the pool
            # takes no new work here, and the process ends right after answering.
            retire = not _close_within(execution, self.close_wait_s)
        keep = key is not None and self.cache.size > 0 and isinstance(outcome, Suspended) and execution.alive
        answer = {"id": request["id"], "outcome": outcome_to_json(outcome), "cached": keep, "hit": hit is not None}
        if retire:
            answer["retire"] = True
            self.send(answer)
            os._exit(0)  # never wait for V8: it may be stuck or aborting
        self.send(answer)
        if keep:
            assert key is not None
            self.housekeeper.close(self.cache.put(key, execution, journal, hit.known if hit is not None else None))
        else:
            self.housekeeper.close([execution])

    def idle(self) -> None:
        self.housekeeper.close(self.cache.expired())

    def measure(self) -> None:
        """No request waits: take one heap measure the live cache is due."""
        self.housekeeper.close(self.cache.measure_one())


def serve(fd: int, worker: Worker) -> None:
    """Answer requests as they come; when none comes for a second, evict idle live programs, and
    when none comes for `_IDLE_MEASURE_S` while a heap measure is due, take it."""
    worker.send({"ready": os.getpid()})
    buffer = b""
    while True:
        if b"\n" not in buffer:
            due = worker.cache.due
            ready, _, _ = select.select([fd], [], [], _IDLE_MEASURE_S if due else 1.0)
            if not ready:
                if due:
                    worker.measure()
                else:
                    worker.idle()
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return  # the pool closed our stdin: retire
            buffer += chunk
            continue
        line, buffer = buffer.split(b"\n", 1)
        worker.handle(json.loads(line))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -I -m ptc_emulator.sandbox._worker")
    parser.add_argument("--spares", type=int, default=0)
    parser.add_argument("--heap-bytes", type=int, default=64 * 2**20)
    parser.add_argument("--live-cache", type=int, default=0, help="suspended programs kept live (0: none)")
    parser.add_argument("--live-idle", type=float, default=120.0, help="seconds a live program may stay idle")
    parser.add_argument("--live-cache-bytes", type=int, default=256 * 2**20, help="heap the live programs may hold")
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _v8.init()
    worker = Worker(
        replies,
        Housekeeper(args.spares, args.heap_bytes),
        LiveCache(args.live_cache, args.live_idle, args.live_cache_bytes),
    )
    serve(sys.stdin.fileno(), worker)


if __name__ == "__main__":
    main()
