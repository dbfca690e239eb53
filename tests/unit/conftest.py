"""The unit tier: no V8 worker, no server, no process, no socket, and checked.

`_no_worker_no_server` is active around every module here: building a sandbox `Pool`, starting a
process (`subprocess.Popen`, `asyncio.create_subprocess_exec`, `multiprocessing`, `os.fork`),
listening on a socket or connecting one over the network raises `TierViolation`, so a test that
needs any of them fails here and belongs in the integration tier; and a module that leaves a new
child process behind (however it was started) errors at its end. `test_tier_guard.py` proves
each of those trips.

The app itself runs in this process: `create_app(settings, runner=fake_runner)` behind
Starlette's test transport (no socket; the app runs on a portal thread), driven with the
official `openai.OpenAI` (`unit_sdk`) or a raw httpx client (`unit_http`).
"""

from __future__ import annotations

import asyncio
import asyncio.subprocess
import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Pool
from tests.support import validate_body, validating_hooks
from tests.unit.fake_runner import FakeRunner

BASE_URL = "http://127.0.0.1"
"""The app answers its admin API only on a loopback host."""


class TierViolation(AssertionError):
    """A unit test started what only the integration tier may start."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TierViolation(f"a unit test {what}: it belongs in the integration tier")

    return refuse


def _no_listen(self: socket.socket, *args: Any) -> None:
    self.close()  # the socket is of no use now: closed here, it leaks nowhere
    raise TierViolation("a unit test listened on a socket: it belongs in the integration tier")


def _no_network_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            self.close()
            raise TierViolation(f"a unit test connected to {address!r}: it belongs in the integration tier")
        return original(self, address)

    return connect


def _children() -> set[int] | None:
    """This process's child processes, read from /proc; None where there is no /proc."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    me, found = os.getpid(), set()
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # the field after the state is the ppid
                found.add(int(entry.name))
    return found


@pytest.fixture(scope="module", autouse=True)
def _no_worker_no_server() -> Iterator[None]:
    before = _children()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Pool, "__init__", _refuse("built a V8 worker pool"))
        patch.setattr(subprocess.Popen, "__init__", _refuse("started a process"))
        for module in (asyncio, asyncio.subprocess):
            patch.setattr(module, "create_subprocess_exec", _refuse("started a process"))
            patch.setattr(module, "create_subprocess_shell", _refuse("started a process"))
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse("started a process"))
        patch.setattr(os, "fork", _refuse("forked"))
        patch.setattr(os, "posix_spawn", _refuse("started a process"))
        patch.setattr(os, "posix_spawnp", _refuse("started a process"))
        patch.setattr(socket.socket, "listen", _no_listen)
        patch.setattr(socket.socket, "connect", _no_network_connect(socket.socket.connect))
        patch.setattr(socket.socket, "connect_ex", _no_network_connect(socket.socket.connect_ex))
        yield
    # A second check that no patch can miss: a process started some other way (a C extension,
    # an import) is still this process's child.
    after = _children()
    if before is not None and after is not None and after - before:
        raise TierViolation(f"the module started child processes {sorted(after - before)}")


# ---- the app in this process, on the fake runner --------------------------------------------------


@pytest.fixture(scope="module")
def fake_runner() -> FakeRunner:
    """The module's runner: a test defines the programs it runs (`fake_runner.define`)."""
    return FakeRunner()


@pytest.fixture(scope="module")
def unit_app(fake_runner: FakeRunner) -> FastAPI:
    """The whole app (routes, errors, middleware, bundled scenarios), programs on `fake_runner`."""
    return create_app(Settings(store="memory", secret="unit-tests"), runner=fake_runner)


@pytest.fixture(scope="module")
def _served(unit_app: FastAPI) -> Iterator[TestClient]:
    hook, _ = validating_hooks(validate_body)
    with TestClient(unit_app, base_url=BASE_URL, raise_server_exceptions=False) as served:  # runs the lifespan
        served.event_hooks = {"request": [], "response": [hook]}
        yield served


@pytest.fixture
def unit_http(_served: TestClient) -> TestClient:
    """A raw httpx client on the app (every JSON body validated like the SDK's strict models);
    paths are relative to the host: `/v1/responses`, `/_emulator/...`."""
    return _served


@pytest.fixture
def unit_sdk(_served: TestClient) -> openai.OpenAI:
    """The official `openai.OpenAI` on the app, with no retries."""
    return openai.OpenAI(base_url=f"{BASE_URL}/v1", api_key="sk-test", http_client=_served, max_retries=0)
