"""Fixtures for the tool-kind tests (the client-owned kinds' helpers live in client_kinds_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import validating_client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    """An `openai.OpenAI` on the plugin's real port, in this test's scope, validating every body."""
    with validating_client(ptc_emulator, max_retries=0) as c:
        yield c
