"""Suite-wide: pytester for the plugin tests, and the tiers.

Every test outside `tests/engine/` and `tests/storage/` is marked `integration`: it starts V8 workers, a server, a
process or a socket. `pytest -m "not integration"` (`make test-fast`) runs the fast tier: the
engine with a fake runner and the pure functions, in seconds. `make test` runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FAST = (Path(__file__).resolve().parent / "engine", Path(__file__).resolve().parent / "storage")


# The longest files, longest first (seconds each on two busy cores). `make test` hands whole files
# to its xdist workers in collection order: these go out first, and the many short files then even
# out the workers' ends, instead of one worker starting a long file while the others finish.
LONGEST = (
    "packaging/test_install.py",
    "hardening/test_hardening_fuzz.py",
    "hardening/test_hardening_restart.py",
    "hardening/test_hardening_hostile_load.py",
    "sandbox/test_sandbox_determinism_property.py",
    "plugin/test_plugin_fixture.py",
    "plugin/test_plugin_xdist.py",
    "api/test_restart.py",
    "inspector/test_inspector_browser.py",
    "recording/test_record_plugin.py",
    "agents/test_agents_restart.py",
    "hardening/test_hardening_bad_input.py",
    "recording/test_record_replay.py",
    "conversations/test_conversations_restart.py",
    "plugin/test_plugin_docs.py",
    "inspector/test_inspector_plugin.py",
)
ROOT = Path(__file__).resolve().parent


def _rank(item: pytest.Item) -> int:
    name = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
    return LONGEST.index(name) if name in LONGEST else len(LONGEST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.path.is_relative_to(fast) for fast in FAST):
            item.add_marker(pytest.mark.integration)
    items.sort(key=_rank)  # stable: a file's tests stay together and in order
