"""The npm `openai` package's `responses.stream()` helper runs the three-pause loop under Node
(tests/node/stream_loop.mjs; `make test` runs `npm ci` in tests/node first)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ptc_emulator.testing.server import PTCEmulator

NODE_DIR = Path(__file__).parents[1] / "node"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_npm_stream_helper_runs_the_loop(ptc_emulator: PTCEmulator) -> None:
    if not (NODE_DIR / "node_modules" / "openai").is_dir():
        pytest.fail("tests/node/node_modules is missing: run `make test` (it runs `npm ci` in tests/node)")
    env = {**os.environ, "OPENAI_API_KEY": ptc_emulator.api_key}
    done = subprocess.run(
        ["node", "stream_loop.mjs", ptc_emulator.base_url, ptc_emulator.scope],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "total: 113"  # 1 + 2, + 10, + 100: the script's three additions
    assert result["responses"] == 4
    journal = ptc_emulator.journal
    assert len(journal) == 4 and all(e["status"] == 200 for e in journal), "the requests ran in this test's scope"
    assert result["events"] > 4 * 5
