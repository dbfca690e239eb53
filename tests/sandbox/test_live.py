"""Live resume (`_v8.Execution.start()` then `.resume(results)`) decides exactly like replay.

The engine-level runs happen in a subprocess (`engine_driver.py`): V8 is never created in the
pytest process. That subprocess is also a third process for the determinism check: its replays
must equal the pool's, byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import CATALOGUE

HERE = Path(__file__).resolve().parent

EXPECTED_STATUS = {
    "fanout9": ("completed", None),
    "seq50": ("completed", None),
    "race": ("completed", None),
    "caught_error": ("completed", None),
    "throw_after_await": ("failed", "runtime"),
    "syntax_error": ("failed", "syntax"),
    "random_and_clock": ("completed", None),
    "loop_after_await": ("failed", "timeout"),
    "heap_after_await": ("failed", "memory"),
    "images": ("completed", None),
    "tool_call_limit": ("failed", "limit"),
    "output_limit": ("failed", "limit"),
}


@pytest.fixture(scope="module")
def engine() -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.sandbox.engine_driver", *sorted(CATALOGUE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parents[1],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_the_catalogue_covers_what_it_claims(engine: dict[str, Any]) -> None:
    assert set(EXPECTED_STATUS) == set(CATALOGUE) == set(engine)
    for name, (status, kind) in EXPECTED_STATUS.items():
        outcome = engine[name]["replay"]["outcome"]
        assert (outcome["status"], outcome.get("kind")) == (status, kind), (name, outcome)
    # The live path really resumed: it went through suspensions, not one straight run.
    assert len(engine["seq50"]["live"]["suspensions"]) == 50
    assert len(engine["fanout9"]["live"]["suspensions"]) == 1


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_live_resume_equals_replay(engine: dict[str, Any], name: str) -> None:
    assert engine[name]["live"] == engine[name]["replay"]


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_replay_in_another_process_equals_the_pool(engine: dict[str, Any], pool: SyncPool, name: str) -> None:
    assert pool.drive(CATALOGUE[name]).as_json() == engine[name]["replay"]
