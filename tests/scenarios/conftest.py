"""Fixtures for the scenario tests: the plugin's `ptc_emulator` (one session server, a scope per
test) comes from the installed package; `own_server` starts a dedicated server for the tests that
need other settings or act on every scope at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator


def _servers(directory: Path) -> Iterator[Callable[..., PTCEmulator]]:
    servers: list[EmulatorServer] = []
    views: list[PTCEmulator] = []

    def start(**settings: Any) -> PTCEmulator:
        settings.setdefault("data_dir", directory / f"server-{len(servers)}")
        settings.setdefault("store", "memory")
        settings.setdefault("pool_size", 1)
        server = EmulatorServer(Settings(**settings)).start()
        servers.append(server)
        views.append(PTCEmulator(server.base_url))
        return views[-1]

    yield start
    for view in views:
        view.close()
    for server in servers:
        server.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Callable[..., PTCEmulator]]:
    """`own_server(**settings)`: a fresh server with these settings, seen through a scoped view."""
    yield from _servers(tmp_path)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., PTCEmulator]]:
    """Like `own_server`, for one module's tests."""
    yield from _servers(tmp_path_factory.mktemp("servers"))


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The render's clock held still (the plugin's server runs in this process): a test about the
    bounds on a template's work must not have a busy machine pre-empt them with the 0.5 s time
    bound (the time bound's own tests move the clock themselves)."""
    monkeypatch.setattr(templating, "_clock", lambda: 0.0)
