"""Suite-wide: the tiers, the order of the long files, and the fixtures more than one folder uses.

The tier is decided by what a test uses. `tests/unit/` holds the tests that need neither V8 nor
a server: they are marked `unit`, and `tests/unit/conftest.py` makes every test there fail that
builds a sandbox pool, starts a process or opens a listening socket. Every other test is marked
`integration`: it starts V8 workers, a server, a process or a socket. `make test-fast` runs the
unit tier, in seconds; `make test` runs everything.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.conversations.conversations_support import conversations_client
from tests.support import validating_client

pytest_plugins = ["pytester"]

# Hypothesis runs its "hypothesis" entry points when first imported; the one installed is trio's
# (deterministic trio scheduling, no use here: no test runs trio), and it garbage-collects and
# scans the whole heap for referrers, a few tenths of a second in a session that has loaded the
# app. Set before any test module imports Hypothesis.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

ROOT = Path(__file__).resolve().parent
UNIT = ROOT / "unit"


# The longest files, longest first (seconds each on two busy cores). `make test` hands whole files
# to its xdist workers in collection order: these go out first, and the many short files then even
# out the workers' ends, instead of one worker starting a long file while the others finish.
LONGEST = (
    "packaging/test_dist.py",
    "packaging/test_install.py",
    "api/test_fuzz.py",
    "api/test_restart_under_load.py",
    "api/test_hostile_load.py",
    "sandbox/test_determinism_property.py",
    "sdk/test_node.py",
    "sdk/test_java.py",
    "sdk/test_go.py",
    "plugin/test_fixture.py",
    "plugin/test_xdist.py",
    "api/test_restart.py",
    "inspector/test_browser.py",
    "recording/test_record_plugin.py",
    "agents/test_restart.py",
    "api/test_bad_input.py",
    "recording/test_record_replay.py",
    "conversations/test_restart.py",
    "anymodel/test_restart.py",
    "plugin/test_docs.py",
    "inspector/test_plugin.py",
)


def _rank(item: pytest.Item) -> int:
    name = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
    return LONGEST.index(name) if name in LONGEST else len(LONGEST)


# ---- the SDK matrix: which official clients ran, printed at the end of the run ---------------------

_CLIENTS_RUN: set[str] = set()


@pytest.fixture
def client_version(record_property: Callable[[str, object], None]) -> Callable[[str, str], None]:
    """Say which official client a test ran and at which version (`client_version("openai-go",
    "v3.102.0")`): the run's summary lists every one, read from the client itself, not from a lock.
    Through the report's user properties, so pytest-xdist's workers hand them to the controller."""

    def note(client: str, version: str) -> None:
        record_property("client_version", f"{client} {version}")

    return note


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:
        _CLIENTS_RUN.update(str(v) for k, v in report.user_properties if k == "client_version")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _CLIENTS_RUN:
        terminalreporter.section("official clients run (passed)")
        for line in sorted(_CLIENTS_RUN):
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Any:
    """Collecting imports the test modules and what they import (the app, the SDK's types,
    Hypothesis): a few hundred thousand objects that live as long as the session. The collector
    is held off while they are made, and they are then frozen (`gc.freeze()`, as the plugin's
    server fixture does for its server), so the tests' full collections walk only what the
    tests make: before, full passes over those objects were some 6 s of the unit tier's 26 s on
    a busy machine. Unfrozen when the session ends (`pytest_sessionfinish`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


def pytest_sessionfinish(session: pytest.Session) -> None:
    gc.unfreeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.unit if item.path.is_relative_to(UNIT) else pytest.mark.integration)
    items.sort(key=_rank)  # stable: a file's tests stay together and in order


# ---- shared fixtures ---------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the app, the Agents SDK and the sandbox pool run on asyncio


@pytest.fixture(scope="session")
def ptc_emulator_settings(ptc_emulator_settings: Any) -> Any:
    """The plugin's settings, with the MCP tests' servers allowed: they listen on loopback, which
    the emulator's MCP client refuses unless told (127.0.0.1, any port but the emulator's own).
    Here, not in tests/tools/: the session's server is made once, for whichever folder asks first.
    The demo scenarios too, which the plugin loads only when asked."""
    # The suite's tests written against the bundled demos ask for them here, once.
    return dataclasses.replace(ptc_emulator_settings, mcp_allow_hosts=("127.0.0.1",), bundled_fixtures=True)


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    """An `openai.OpenAI` on the plugin's real port, in this test's scope, validating every body."""
    with validating_client(ptc_emulator, max_retries=0) as c:
        yield c


@pytest.fixture
def plain_client(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    """An `openai.OpenAI` on the plugin's real port, in this test's scope, validating nothing."""
    with ptc_emulator.client(max_retries=0) as c:
        yield c


@pytest.fixture
def conversations_sdk(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    """An `openai.OpenAI` on the plugin's real port that validates every body with the
    Conversations API's models too (`conversations_support.conversations_client`)."""
    with conversations_client(ptc_emulator) as c:
        yield c


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., EmulatorServer]]:
    """Start the app under uvicorn in a thread with these settings; stopped when the test ends."""
    servers: list[EmulatorServer] = []

    def make(**options: Any) -> EmulatorServer:
        options.setdefault("data_dir", tmp_path / f"data-{len(servers)}")
        options.setdefault("pool_size", 2)
        options.setdefault("bundled_fixtures", False)
        servers.append(EmulatorServer(Settings(**options)).start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Make `ServerProcess`es (not started); every one is stopped when the test ends."""
    made: list[ServerProcess] = []

    def make(data_dir: Path | None = None, **options: Any) -> ServerProcess:
        server = ServerProcess(data_dir or tmp_path / "data", **options)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()
