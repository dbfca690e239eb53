"""Misbehaving MCP servers on 127.0.0.1, in a thread: one that never answers a call, one that
keeps a call's SSE stream alive forever, one whose result is huge, one that answers JSON that is
not MCP. Each is the official SDK's `MCPServer` (so listing works) behind a small ASGI wrapper."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

__all__ = ["Served", "misbehaving_server", "serve"]


@dataclass
class Served:
    url: str = ""
    requests: list[str] = field(default_factory=list)
    """The path of every HTTP request the server got."""
    encodings_asked: list[str] = field(default_factory=list)
    """`Accept-Encoding` of each request a `gzip_listing` server got."""


@contextmanager
def serve(app: Any, path: str = "/mcp") -> Iterator[Served]:
    """Any ASGI app on a free 127.0.0.1 port; the server stops without waiting for what hangs."""
    record = Served()

    async def capture(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            record.requests.append(scope["path"])
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(capture, log_level="critical", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.01)
    record.url = f"http://127.0.0.1:{port}{path}"
    try:
        yield record
    finally:
        server.should_exit = True
        server.force_exit = True  # a handler waiting on its never-set event is not waited for
        thread.join(30)
        sock.close()


def _mcp_server(huge_bytes: int) -> MCPServer:
    server = MCPServer("misbehaving")
    never = asyncio.Event()

    @server.tool(description="Never answers")
    async def wait() -> str:
        await never.wait()  # nothing sets it
        return "never"

    @server.tool(description="Answers more than anyone wants")
    def huge() -> str:
        return "x" * huge_bytes

    @server.tool(description="Answers at once")
    def ping() -> str:
        return "pong"

    return server


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes) -> Any:
    """A `receive` that hands the already-read body to the wrapped app."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


@contextmanager
def misbehaving_server(mode: str = "", huge_bytes: int = 0, names: tuple[str, ...] = ()) -> Iterator[Served]:
    """A server whose `tools/call` misbehaves as `mode` says:

    - `keepalive`: a 200 event stream that sends only SSE comments, forever (`keepalive_all`: for
      every request, the listing's included);
    - `not_mcp`: a JSON answer that is not JSON-RPC (`{"internal": "db password hunter2"}`);
    - `not_mcp_listing`: the same for every request, the listing's included;
    - `gzip_listing`: for every request, a gzip bomb (`huge_bytes` of zeros, a few KiB packed)
      sent with `Content-Encoding: gzip` whatever `Accept-Encoding` asked (the server notes it in
      `encodings_asked`);
    - `sse_result`: a call answered with its result (`huge_bytes` of text) as one SSE event, as a
      server that streams its answers sends it;
    - `paged`: a listing in two pages (`first`, then `second` after the cursor `2`); `paged_loop`:
      every page names the same next cursor;
    - `nan_listing`: a listing whose tool schema holds `NaN` (which JSON has no word for);
    - `named_listing`: a listing of one tool for each of `names`, as they are (repeats, dots);
    - anything else: the MCP server's own answer (its `wait` tool never answers, `huge` is big).
    """
    inner = _mcp_server(huge_bytes).streamable_http_app()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await inner(scope, receive, send)
            return
        body = await _body(receive)
        method = _method(body)
        if mode == "gzip_listing":
            asked = dict(scope["headers"]).get(b"accept-encoding", b"").decode()
            encodings_asked.append(asked)
            packed = gzip.compress(b"\0" * huge_bytes)
            headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": packed})
            return
        if mode == "not_mcp_listing" or (mode == "not_mcp" and method == "tools/call"):
            payload = json.dumps({"internal": "db password hunter2", "detail": "x" * 200}).encode()
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": payload})
            return
        if mode == "sse_result" and method == "tools/call":
            text = {"type": "text", "text": "x" * huge_bytes}
            result = {"content": [text], "structuredContent": {"result": "x"}, "resultType": "complete"}
            answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": result}
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            event = b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": event})
            return
        if mode == "nan_listing" and method == "tools/list":
            schema = {"type": "object", "properties": {"x": {"type": "number", "maximum": float("nan")}}}
            result = {"tools": [{"name": "n", "inputSchema": schema}], "resultType": "complete", "ttlMs": 0}
            request_id = json.loads(body)["id"]
            answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {**result, "cacheScope": "private"}})
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer.encode()})
            return
        if mode == "named_listing" and method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in names]
            result = {"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
            answer = json.dumps({"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": result}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        if mode in ("paged", "paged_loop") and method == "tools/list":
            request = json.loads(body)
            cursor = (request.get("params") or {}).get("cursor")
            name = "second" if cursor == "2" and mode == "paged" else "first"
            tools = [{"name": name, "inputSchema": {"type": "object"}}]
            result: dict[str, Any] = {"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
            if mode == "paged_loop" or cursor is None:
                result["nextCursor"] = "2"
            answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        if mode == "keepalive_all" or (mode == "keepalive" and method == "tools/call"):
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            while True:  # until the client goes away
                await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                await asyncio.sleep(0.05)
        await inner(scope, _replay(body), send)

    encodings_asked: list[str] = []
    with serve(app) as served:
        served.encodings_asked = encodings_asked
        yield served


def _method(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value.get("method") if isinstance(value, dict) else None
