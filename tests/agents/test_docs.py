"""docs/agents.md must not rot: its example tests run against the emulator as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def example() -> dict[str, Any]:
    [block] = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), flags=re.S | re.M)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(GUIDE), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", ["test_the_function_tool_flow", "test_the_stream_helper"])
def test_the_guide_example_runs(ptc_emulator: PTCEmulator, name: str) -> None:
    example()[name](ptc_emulator)
