"""A model step held by the test: a session's program calls `held.wait`, a read-only tool (no
approval) of a real MCP server that answers only when the test releases it; the step plays until
then, so a cancel is sent while it certainly runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from tests.agents.agents_support import js

HELD_PROGRAM = js("const r = await tools.held.wait({});\ntext(r)")
CANCEL = {"type": "agent.session.input.cancel"}


@dataclass
class Held:
    url: str = ""
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def tool(self) -> dict[str, Any]:
        return {"type": "mcp", "server_label": "held", "transport": {"type": "http", "server_url": self.url}}


@contextmanager
def held_server() -> Iterator[Held]:
    from tests.tools.mcp_servers_support import serve

    held = Held()
    server = MCPServer("held")

    @server.tool(description="Answers when the test says so", annotations=ToolAnnotations(readOnlyHint=True))
    def wait() -> str:
        held.entered.set()
        held.release.wait(120)  # a guard: the test releases it
        return "released"

    with serve(server.streamable_http_app(), "/mcp") as served:
        held.url = served.url
        try:
            yield held
        finally:
            held.release.set()
