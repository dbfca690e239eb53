"""Blocking access to real `Pool`s running on an asyncio loop in a background thread."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from ptc_emulator.sandbox import Outcome, PendingCall, Pool, PoolConfig, Program, ToolResult
from tests.sandbox.sandbox_support import Drive, answer, drive

T = TypeVar("T")


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="sandbox-tests-loop", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 600) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


class SyncPool:
    """A started `Pool` on the background loop, with blocking helpers for tests."""

    def __init__(self, loop: LoopThread, config: PoolConfig) -> None:
        self.loop = loop
        self.pool = Pool(config)
        loop.call(self.pool.start())

    def run(self, program: Program) -> Outcome:
        return self.loop.call(self.pool.run(program))

    def run_many(self, programs: Iterable[Program]) -> list[Outcome]:
        async def gather() -> list[Outcome]:
            return list(await asyncio.gather(*(self.pool.run(p) for p in programs)))

        return self.loop.call(gather())

    def timed(self, program: Program) -> tuple[Outcome, float]:
        start = time.monotonic()
        outcome = self.run(program)
        return outcome, time.monotonic() - start

    def drive(self, program: Program, client: Callable[[PendingCall], ToolResult] = answer) -> Drive:
        return drive(self.run, program, client)

    def pids(self) -> list[int]:
        async def read() -> list[int]:  # read on the loop's thread, which mutates the set
            return self.pool.pids

        return self.loop.call(read())

    def wait_for_workers(self, exclude: Iterable[int] = (), timeout: float = 180) -> list[int]:
        """Wait until the pool has its full size again and none of `exclude` is among them."""
        gone = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if len(pids) == self.pool.config.size and not gone & set(pids):
                return pids
            assert time.monotonic() < deadline, f"the pool did not recover: {pids}"
            time.sleep(0.02)

    def close(self) -> None:
        self.loop.call(self.pool.close())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
