"""Fixtures for the sandbox battery: one asyncio loop in a background thread, and pools on it.

`Pool` is asyncio; the tests are plain synchronous functions that hand coroutines to a loop
running in its own thread (see `sandbox_harness.py`). No V8 is ever created in the pytest
process: every program runs in a worker process of a real `Pool` or, for the engine-level
tests, in a subprocess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ptc_emulator.sandbox import PoolConfig
from tests.sandbox.sandbox_harness import LoopThread, SyncPool


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


@pytest.fixture(scope="session")
def pool(loop_thread: LoopThread) -> Iterator[SyncPool]:
    """The shared pool. Tests that kill, stall or recycle workers make their own (`make_pool`)."""
    p = SyncPool(loop_thread, PoolConfig(size=2))
    yield p
    p.close()


@pytest.fixture
def make_pool(loop_thread: LoopThread) -> Iterator[Callable[[PoolConfig], SyncPool]]:
    pools: list[SyncPool] = []

    def make(config: PoolConfig) -> SyncPool:
        pools.append(SyncPool(loop_thread, config))
        return pools[-1]

    yield make
    for p in pools:
        p.close()
