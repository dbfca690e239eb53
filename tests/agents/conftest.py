"""Fixtures for the Agents API tests (helpers live in agents_support.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
