"""The unit tier: no V8 worker, no server, no process, no socket, and checked.

`_no_worker_no_server` is active around every module here: building a sandbox `Pool`, starting a
process (`subprocess.Popen`, `asyncio.create_subprocess_exec`, `multiprocessing`, `os.fork`),
listening on a socket or connecting one over the network raises `TierViolation`, so a test that
needs any of them fails here and belongs in the integration tier; and, when this tier runs alone,
a module that leaves a new child process behind (however it was started) errors at its end.
Threads that were running before a module began (an integration fixture's, in a `make test`
worker) are left alone. `test_tier_guard.py` proves
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
import threading
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


class _Guard:
    """Refuses on the threads the module runs its tests on: the main thread and every thread
    started while the module runs (the app's portal thread). Threads that were running before it
    (an integration fixture's server or pool, when `make test` runs both tiers in one worker)
    go on as they were."""

    def __init__(self) -> None:
        main = threading.main_thread()
        self.exempt = {t.ident for t in threading.enumerate() if t is not main}

    def watching(self) -> bool:
        return threading.get_ident() not in self.exempt

    def refuse(self, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            if self.watching():
                raise TierViolation(f"a unit test {what}: it belongs in the integration tier")
            return original(*args, **kwargs)

        return refuse

    def listen(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def listen(sock: socket.socket, *args: Any) -> Any:
            if self.watching():
                sock.close()  # of no use now: closed here, it leaks nowhere
                raise TierViolation("a unit test listened on a socket: it belongs in the integration tier")
            return original(sock, *args)

        return listen

    def connect(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def connect(sock: socket.socket, address: Any) -> Any:
            if self.watching() and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.close()
                raise TierViolation(f"a unit test connected to {address!r}: it belongs in the integration tier")
            return original(sock, address)

        return connect


def _children() -> set[int] | None:
    """This process's child processes, read from /proc; None where there is no /proc.

    Where the kernel lists each thread's children (`/proc/self/task/<tid>/children`), those
    lists are read (a file per thread); elsewhere every process's stat is read for its parent
    (a file per process on the machine, a few milliseconds on a busy one, twice per module)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    me, found = os.getpid(), set()
    if (proc / "self" / "task" / str(me) / "children").exists():
        for task in (proc / "self" / "task").iterdir():
            try:
                found.update(int(pid) for pid in (task / "children").read_text().split())
            except FileNotFoundError:
                continue  # the thread ended meanwhile
        return found
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
def _no_worker_no_server(request: pytest.FixtureRequest) -> Iterator[None]:
    guard = _Guard()
    # Only a run of this tier alone can say no child is new: in `make test`, an integration
    # fixture's pool may replace a worker while a module here runs.
    alone = all(item.get_closest_marker("unit") for item in request.session.items)
    before = _children() if alone else None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Pool, "__init__", guard.refuse("built a V8 worker pool", Pool.__init__))
        patch.setattr(subprocess.Popen, "__init__", guard.refuse("started a process", subprocess.Popen.__init__))
        for module in (asyncio, asyncio.subprocess):
            for name in ("create_subprocess_exec", "create_subprocess_shell"):
                patch.setattr(module, name, guard.refuse("started a process", getattr(module, name)))
        start = multiprocessing.process.BaseProcess.start
        patch.setattr(multiprocessing.process.BaseProcess, "start", guard.refuse("started a process", start))
        patch.setattr(os, "fork", guard.refuse("forked", os.fork))
        patch.setattr(os, "posix_spawn", guard.refuse("started a process", os.posix_spawn))
        patch.setattr(os, "posix_spawnp", guard.refuse("started a process", os.posix_spawnp))
        patch.setattr(socket.socket, "listen", guard.listen(socket.socket.listen))
        patch.setattr(socket.socket, "connect", guard.connect(socket.socket.connect))
        patch.setattr(socket.socket, "connect_ex", guard.connect(socket.socket.connect_ex))
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
