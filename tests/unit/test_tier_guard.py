"""The unit tier refuses what only the integration tier may start: each way in trips the guard."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys

import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Pool, PoolConfig
from ptc_emulator.testing.server import EmulatorServer
from tests.unit.conftest import TierViolation


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
