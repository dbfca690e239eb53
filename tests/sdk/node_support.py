"""Running the scripts of tests/node under Node, against the emulator, with a chosen npm `openai`.

tests/node/package.json installs every npm `openai` of the matrix side by side: `openai` is the
newest release, and older ones are npm aliases (`"openai-v6": "npm:openai@6.49.0"`), locked by
package-lock.json (`make test` runs `npm ci` there). The scripts import `"openai"` as a user's code
does; `node --import ./sdk.mjs` with `OPENAI_SDK=<package>` points that import at the package
chosen, and reports the version it loaded, which `run_node` checks against the package installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).parents[1] / "node"
MODULES = NODE_DIR / "node_modules"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


@dataclass(frozen=True)
class NpmOpenAI:
    """One npm `openai` of the matrix, and the surfaces it has beside the Responses API's HTTP ones
    (test_node.py checks them against the package that ran)."""

    package: str
    """Its name in package.json and node_modules: `openai` (the newest), or an npm alias."""
    lanes: bool
    """The WebSocket lane helper, `openai/lib/responses/responses-websocket-session`."""
    agents_api: bool
    """`client.beta.agents`, the Agents API."""

    def __str__(self) -> str:
        return self.package


NPM_OPENAI = (
    # What a plain `npm install openai` gives on Node 20 (7.x declares engines node >= 22).
    NpmOpenAI("openai-v6", lanes=False, agents_api=False),
    # The newest release; it runs on Node 20 when asked for explicitly.
    NpmOpenAI("openai", lanes=True, agents_api=True),
)


def dependencies() -> dict[str, str]:
    """tests/node/package.json's dependencies: name (or alias) -> version spec."""
    found: dict[str, str] = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]
    return found


def installed_version(package: str) -> str:
    """The version of a package in tests/node/node_modules, from its own package.json."""
    manifest = MODULES / package / "package.json"
    if not manifest.is_file():
        pytest.fail(f"tests/node/node_modules/{package} is missing: run `make test` (it runs `npm ci` in tests/node)")
    version: str = json.loads(manifest.read_text(encoding="utf-8"))["version"]
    return version


@dataclass(frozen=True)
class NodeRun:
    stdout: str
    version: str
    """The npm `openai` version the script imported (as it reported it)."""

    def json(self) -> Any:
        """The script's one line of JSON."""
        return json.loads(self.stdout)


def run_node(script: str, env: dict[str, str], *, sdk: str = "openai", timeout: float = 90) -> NodeRun:
    """Run `script` of tests/node with `env` (the emulator's `OPENAI_*` variables and the script's
    own) and the npm `openai` package `sdk`; it must succeed. Checks that the `openai` the script
    imported is that package, at the version installed."""
    installed = installed_version(sdk)
    with tempfile.TemporaryDirectory(prefix="ptc-node-") as tmp:
        report = Path(tmp) / "sdk.json"
        done = subprocess.run(
            ["node", "--import", str(NODE_DIR / "sdk.mjs"), script],
            cwd=NODE_DIR,
            env={**os.environ, **env, "OPENAI_SDK": sdk, "OPENAI_SDK_REPORT": str(report)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stderr
        loaded = json.loads(report.read_text(encoding="utf-8"))
    assert loaded == {"package": sdk, "version": installed}, loaded
    return NodeRun(done.stdout, installed)
