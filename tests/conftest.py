"""Suite-wide: pytester for the plugin tests, and the tiers.

Every test outside `tests/engine/` is marked `integration`: it starts V8 workers, a server, a
process or a socket. `pytest -m "not integration"` (`make test-fast`) runs the fast tier: the
engine with a fake runner and the pure functions, in seconds. `make test` runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FAST = Path(__file__).resolve().parent / "engine"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(FAST):
            item.add_marker(pytest.mark.integration)
