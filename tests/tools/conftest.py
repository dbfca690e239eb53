"""The MCP tests' servers listen on loopback, which the emulator's MCP client refuses unless
allowed: the session's emulator here allows 127.0.0.1 (any port but its own)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ptc_emulator_settings(ptc_emulator_settings: Any) -> Any:
    return dataclasses.replace(ptc_emulator_settings, mcp_allow_hosts=("127.0.0.1",))
