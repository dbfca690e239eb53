"""Fixtures of the any-model tests: a fake model upstream, and an emulator whose model upstream it is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import FakeUpstream, fake_upstream


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with fake_upstream() as fake:
        yield fake


@pytest.fixture
def any_server(make_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> Callable[..., EmulatorServer]:
    """An emulator (in a thread) whose model upstream is `upstream`; options go to its Settings.
    Its deadlines are far beyond what a test waits for on a busy machine: the upstream's answer,
    and a program's run (which includes the MCP calls it makes), whose default 5 s a loaded
    machine's MCP round trip exceeded."""

    def make(**options: Any) -> EmulatorServer:
        options.setdefault("model_upstream", upstream.url)
        options.setdefault("model_upstream_timeout_s", 30.0)
        options.setdefault("limits", Limits(timeout_s=30.0))
        options.setdefault("pool_size", 1)
        return make_server(**options)

    return make


@pytest.fixture
def sdk(any_server: Callable[..., EmulatorServer]) -> Iterator[openai.OpenAI]:
    """The official SDK on an emulator whose model upstream is the fake (Chat Completions)."""
    server = any_server()
    emulator = PTCEmulator(server.base_url)
    with emulator.client(max_retries=0) as client:
        yield client
    emulator.close()


@pytest.fixture(params=["chat", "responses"])
def either_sdk(any_server: Callable[..., EmulatorServer], request: pytest.FixtureRequest) -> Iterator[openai.OpenAI]:
    """The official SDK on an emulator whose model upstream speaks each protocol in turn."""
    server = any_server(model_upstream_api=request.param)
    emulator = PTCEmulator(server.base_url)
    with emulator.client(max_retries=0) as client:
        yield client
    emulator.close()
