"""An MCP server in a process of its own whose listing waits for a word: `python -m
tests.tools.mcp_held_server COUNT` lists COUNT tools of 4.8 KB of description each (1,550 make the
7 MB listing of `bench/loop_lag.py`'s `mcp` case). It prints its URL, then `held` when a
`tools/list` request arrives, and answers it once a line is written to its stdin.

In a process of its own because the server under test must not have the `mcp` package imported
(the MCP client runs in a process of its own; `test_mcp_process.py` checks the server never
imports it), and this server is the `mcp` package's own.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from mcp.server.mcpserver import MCPServer

from tests.tools.mcp_servers_support import _body, _method, _replay, serve


def _server(count: int) -> MCPServer:
    server = MCPServer("big")
    for i in range(count):

        def tool(a: str = "", b: int = 0) -> str:
            return "ok"

        server.tool(name=f"tool_{i}", description=f"d{i} " * 800)(tool)
    return server


def main() -> None:
    count = int(sys.argv[1])
    inner = _server(count).streamable_http_app()
    released = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), released.set()), daemon=True).start()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await inner(scope, receive, send)
            return
        body = await _body(receive)
        if _method(body) == "tools/list":
            print("held", flush=True)
            await asyncio.to_thread(released.wait)
        await inner(scope, _replay(body), send)

    with serve(app) as served:
        print(served.url, flush=True)
        released.wait()
        threading.Event().wait()  # serve until killed


if __name__ == "__main__":
    main()
