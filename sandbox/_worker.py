"""A V8 worker process: reads one JSON request per line on stdin, answers one line on stdout.

Started by `Pool` as `python -m sandbox._worker`. A program that aborts the process (some
allocations do, whatever the heap limit) takes only this worker down; the pool replaces it.
Native code writing to stdout cannot corrupt the protocol: the protocol keeps a private copy of
the original stdout and fd 1 is pointed at stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, BinaryIO

from . import _v8
from ._wire import outcome_to_json, program_from_json


class Spares:
    """Contexts created ahead of time, so a run does not pay for context creation and prelude."""

    def __init__(self, count: int, heap_bytes: int) -> None:
        self.count = count
        self.heap_bytes = heap_bytes
        self._ready: list[_v8.Context] = []

    def take(self, heap_bytes: int) -> _v8.Context | None:
        if heap_bytes == self.heap_bytes and self._ready:
            return self._ready.pop()
        return None

    def refill(self) -> None:
        while len(self._ready) < self.count:
            self._ready.append(_v8.Context(self.heap_bytes))


def serve(requests: BinaryIO, replies: BinaryIO, spares: Spares) -> None:
    def send(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
        replies.flush()

    send({"ready": os.getpid()})
    for line in iter(requests.readline, b""):
        request = json.loads(line)
        program = program_from_json(request["program"])
        outcome = _v8.run(program, spares.take(program.limits.heap_bytes))
        send({"id": request["id"], "outcome": outcome_to_json(outcome)})
        spares.refill()  # off the request path: the reply is already on its way


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox._worker")
    parser.add_argument("--spares", type=int, default=0)
    parser.add_argument("--heap-bytes", type=int, default=64 * 2**20)
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _v8.init()
    spares = Spares(args.spares, args.heap_bytes)
    spares.refill()
    serve(sys.stdin.buffer, replies, spares)


if __name__ == "__main__":
    main()
