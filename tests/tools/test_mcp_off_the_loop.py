"""An MCP listing is read and checked off the event loop: the `mcp` package parses and validates
a listing of up to 8 MiB in full, and the emulator turns it into an `mcp_list_tools` item and
measures it; on the loop, every other client waited meanwhile.

The server runs in this process, so the test holds the work on an event it sets. Nothing is
timed: with the work on the event loop, health got no answer until the event was set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import collector
from ptc_emulator.emulator.model.runtime import hosted, programs
from ptc_emulator.emulator.tools import mcp
from ptc_emulator.testing.server import EmulatorServer
from tests.tools.tools_support import DocsServer, docs_server
from tests.usage.held import Held, others_answered_while_held


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    with docs_server() as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    data = Path(tmp_path_factory.mktemp("mcp-off-loop"))
    running = EmulatorServer(Settings(data_dir=data, store="memory", pool_size=1, mcp_allow_private=True)).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (mcp, "_filtered"),  # in the session, beside the `mcp` package's parsing of the listing
        (hosted, "visible_size"),  # the listing's item, measured for what the conversation carries
        (programs, "dumped_listing"),  # and dumped into the response's output (on the loop before)
    ],
)
def test_a_listing_is_read_off_the_loop(
    server: EmulatorServer, docs: DocsServer, monkeypatch: pytest.MonkeyPatch, module: Any, name: str
) -> None:
    held = Held()
    real: Callable[..., Any] = getattr(module, name)

    def holding(*args: Any, **kwargs: Any) -> Any:
        held.hold()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, holding)
    tool = {"type": "mcp", "server_label": "docs_server", "server_url": docs.url, "require_approval": "never"}
    body = {
        "model": "m",
        "input": "Run this program.\n```js\ntext('listed')\n```",
        "tools": [{"type": "programmatic_tool_calling"}, tool],
        "store": False,
    }
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, f"{server.base_url}/responses", json=body, timeout=300)
        others_answered_while_held(server, held.entered, held.release, pending)
        answer = pending.result(timeout=300)
    assert answer.status_code == 200, answer.text[:500]
    (listing,) = [item for item in answer.json()["output"] if item["type"] == "mcp_list_tools"]
    assert {t["name"] for t in listing["tools"]} >= {"lookup", "delete_page"}


def test_full_collections_are_held_off_while_a_listing_is_read(
    server: EmulatorServer, docs: DocsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing of up to 8 MiB makes as many objects as a large body, and a full collection it
    started walked them all with the interpreter held (90-150 ms for 7 MB): held off meanwhile, as
    for a large body. On the code before, a small body with an `mcp` tool held nothing off."""
    seen: list[bool] = []
    real = mcp._filtered

    def noting(*args: Any, **kwargs: Any) -> Any:
        seen.append(collector.held())
        return real(*args, **kwargs)

    monkeypatch.setattr(mcp, "_filtered", noting)
    tool = {"type": "mcp", "server_label": "docs_server", "server_url": docs.url, "require_approval": "never"}
    body = {"model": "m", "input": "Run this program.\n```js\ntext('listed')\n```", "tools": [tool], "store": False}
    answer = httpx.post(f"{server.base_url}/responses", json=body, timeout=300)
    assert answer.status_code == 200, answer.text[:500]
    assert seen == [True]
    assert not collector.held()
