"""Shared by the plugin tests: how the inner pytest runs."""

from __future__ import annotations

import httpcore  # noqa: F401  (see below)
import pytest
import uvicorn  # noqa: F401  (see below)

import ptc_emulator.api.app  # noqa: F401
import ptc_emulator.api.routes.streaming  # noqa: F401

# `pytester` restores `sys.modules` when a test ends, dropping what the test imported first. A
# server started in a test (EmulatorServer imports the app and uvicorn lazily) would leave the
# next one a half-reimported FastAPI whose routes no longer match: the imports above keep
# them loaded from the start. httpx imports httpcore when its first client is made, and maps
# httpcore's errors to its own with the classes it saw then: a test that made the first client
# would leave the next one errors of a reimported httpcore that httpx no longer recognises.

# A user's suite often turns warnings into errors; a socket the plugin left open would then fail
# it. The last two switch off plugins of this development environment that a user's suite would
# not load, and that only slow each run down.
OPTIONS = ("-p", "no:cacheprovider", "-W", "error", "-p", "no:schemathesis", "-p", "no:hypothesispytest")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess, on the files written into `pytester.path`."""
    return pytester.runpytest_subprocess(*OPTIONS, *args, timeout=100)
