"""Fixtures for the streaming tests.

Most tests use the plugin's session server (`ptc_emulator`). Keep-alive and disconnect tests use
`slow`, a second server of their own: keep-alive comments every 0.1 s, two sandbox workers, and
a 10 s program deadline, so a spinning program is still running when the test disconnects.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.streaming.streaming_support import SLOW_KEEPALIVE_S, SLOW_TIMEOUT_S, SLOW_WORKERS


@pytest.fixture(scope="session")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("slow-emulator"),
        store="memory",
        bundled_fixtures=False,
        pool_size=SLOW_WORKERS,
        keepalive_s=SLOW_KEEPALIVE_S,
        limits=Limits(timeout_s=SLOW_TIMEOUT_S),
    )
    server = EmulatorServer(settings).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def slow(slow_server: EmulatorServer) -> Iterator[PTCEmulator]:
    """The slow server, scoped to this test like `ptc_emulator`."""
    emulator = PTCEmulator(slow_server.base_url)
    try:
        yield emulator
    finally:
        emulator.reset()
        emulator.close()
