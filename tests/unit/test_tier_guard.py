"""The unit tier refuses what only the integration tier may start: each way in trips the guard."""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading

import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Pool, PoolConfig
from ptc_emulator.testing.server import EmulatorServer
from tests.unit.conftest import TierViolation, _children, _Guard


def test_a_sandbox_pool_cannot_be_built() -> None:
    with pytest.raises(TierViolation, match="built a V8 worker pool"):
        Pool(PoolConfig(size=1))


def test_the_app_without_a_fake_runner_cannot_start() -> None:
    """What a unit test that forgot `runner=` would hit: the lifespan builds a pool."""
    app = create_app(Settings(store="memory", secret="unit-tests"))
    with pytest.raises(TierViolation, match="V8 worker pool"), TestClient(app):
        pass


def test_a_server_cannot_listen() -> None:
    with pytest.raises(TierViolation, match="listened on a socket"):
        EmulatorServer(Settings(store="memory", secret="unit-tests"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        with pytest.raises(TierViolation, match="listened on a socket"):
            sock.listen()


def test_nothing_connects_over_the_network() -> None:
    with socket.socket() as sock, pytest.raises(TierViolation, match="connected to"):
        sock.connect(("127.0.0.1", 9))
    with pytest.raises(TierViolation, match="connected to"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_no_process_can_start() -> None:
    with pytest.raises(TierViolation, match="started a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(TierViolation, match="started a process"):
        multiprocessing.get_context("spawn").Process(target=print).start()
    with pytest.raises(TierViolation, match="forked"):
        os.fork()

    async def spawn() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    with pytest.raises(TierViolation, match="started a process"):
        asyncio.run(spawn())


def test_local_socket_pairs_still_work() -> None:
    """The event loop's self-pipe is a socket pair: the guard leaves those alone."""
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"


@pytest.mark.skipif(_children() is None or shutil.which("sleep") is None, reason="needs /proc and sleep(1)")
def test_a_child_started_past_the_patches_is_still_seen() -> None:
    """libc's posix_spawn, called directly, passes every Python-level patch: the module's end
    still finds the child it left (here ended by its pid before the module ends)."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    libc = ctypes.CDLL(None, use_errno=True)
    pid = ctypes.c_int()
    argv = (ctypes.c_char_p * 3)(sleep.encode(), b"30", None)
    envp = (ctypes.c_char_p * 1)(None)
    assert libc.posix_spawn(ctypes.byref(pid), sleep.encode(), None, None, argv, envp) == 0
    try:
        assert pid.value in (_children() or set())
    finally:
        os.kill(pid.value, signal.SIGKILL)
        os.waitpid(pid.value, 0)
    assert pid.value not in (_children() or set())


def test_a_thread_that_ran_before_the_module_is_left_alone() -> None:
    """In `make test` an integration fixture's pool may replace a worker from its own thread
    while a unit module runs: that thread is not the module's, and goes on."""
    results: list[str] = []
    go, done = threading.Event(), threading.Event()

    def earlier() -> None:
        go.wait(10)
        results.append(spawn())
        done.set()

    thread = threading.Thread(target=earlier)
    thread.start()
    guard = _Guard()  # made while `earlier` runs, as the module's guard is
    spawn = guard.refuse("started a process", lambda: "spawned")
    go.set()
    assert done.wait(10)
    thread.join()
    assert results == ["spawned"]
    with pytest.raises(TierViolation, match="started a process"):
        spawn()  # this test's own thread is watched
