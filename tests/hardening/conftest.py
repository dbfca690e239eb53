"""Fixtures of the hardening suite; the helpers they use are in `hardening_support.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import EmulatorServer


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
