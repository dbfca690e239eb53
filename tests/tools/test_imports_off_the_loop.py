"""The heavy modules a request may need are never imported on the event loop: importing `mcp`
took 0.5-1.5 s (the server imports it no more: the MCP client runs in a process of its own),
jsonschema and lark together 0.3 s, and every other client waited meanwhile.

Each test runs a fresh interpreter (the modules must not be imported yet) holding the server in
process, with an import hook that notes, for each module of interest, whether the thread importing
it was running an event loop. Nothing is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import asyncio, importlib.abc, json, sys, tempfile, threading
from pathlib import Path

WATCHED = {"mcp", "mcp.client.streamable_http", "jsonschema", "lark", "referencing", "httpcore2"}
seen = {}

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED and name not in seen:
            seen[name] = asyncio._get_running_loop() is not None
        return None

sys.meta_path.insert(0, Hook())
assert not (WATCHED & set(sys.modules)), sorted(WATCHED & set(sys.modules))

import httpx
from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer

server = EmulatorServer(Settings(data_dir=Path(tempfile.mkdtemp()), store="memory", pool_size=1)).start()
started = sorted({"httpcore2", "trio"} & set(sys.modules))
try:
    tools = [
        {"type": "programmatic_tool_calling"},
        {"type": "mcp", "server_label": "nowhere", "server_url": "http://127.0.0.1:9/mcp", "require_approval": "never"},
        {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}},
        {"type": "custom", "name": "g", "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"x\""}},
    ]
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        program = "Run this program.\n```js\ntext('done')\n```"
        answer = http.post("/responses", json={"model": "m", "input": program, "tools": tools})
finally:
    server.stop()
print(json.dumps({"status": answer.status_code, "text": answer.text[:400], "on_loop": seen, "started": started}))
"""


def test_no_heavy_module_is_imported_on_the_event_loop(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == 424, found  # the listing failed (the policy refuses a loopback address)
    assert "Error retrieving tool list from MCP server 'nowhere'" in found["text"], found
    # The checkers' modules are imported in a worker thread begun as the server starts (the
    # server is ready without waiting for it; the request waited for it at the edge).
    assert {"jsonschema", "lark"} <= found["on_loop"].keys(), found
    # The MCP client's connections (httpcore2, and trio with it) are not imported by the start:
    # only an MCP tool needs them.
    assert found["started"] == [], found
    assert {"jsonschema", "lark", "referencing"} <= found["on_loop"].keys(), found
    # The hosted MCP tool was listed: the server imports neither `mcp` nor its HTTP client (the
    # sessions run in the MCP client's process, `tests/tools/test_mcp_process.py`).
    assert not {"mcp", "mcp.client.streamable_http", "httpcore2"} & found["on_loop"].keys(), found
    assert not any(found["on_loop"].values()), found["on_loop"]
