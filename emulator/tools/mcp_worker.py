"""An MCP client process: live listings and calls run here, not in the server (issue 38).

Started by `mcp_child.py` as `python -I -m ptc_emulator.emulator.tools.mcp_worker`, lazily, on the
first listing or call sent to it, and stopped with the app; there are up to `mcp_child.CHILDREN`,
a client's (scope's) sessions in one of them. The official `mcp`
package validates a whole answer in long C calls that hold the interpreter (a 7 MB listing: some
100-250 ms each for the transport's JSON check, the server-result check and the result's model);
in this process they hold only this process's interpreter, and the server's event loop answers
every other client meanwhile.

The protocol: one JSON request a line on stdin, `{"id", "op": "list" | "call", "url", "headers",
"policy", "own_ports", "name", "arguments"}`, or `{"cancel": id}`; many sessions run at once, each
a task. Each answer line on stdout starts with its session's id and a space; a session's answer is
one or more messages (`_pieces.framed`: a long string in frames of its own, each frame a line) and
then the line `ID end`. A listing answers a message per tool (`{"entry", "read_only"}`) and then
`{"listed": count}`, or `{"failed": reason}`; a call `{"output": text}` or `{"error": {...}}` (the
`mcp_call.error` object). A cancelled session answers nothing. Native code writing to stdout
cannot corrupt the protocol: fd 1 is pointed at stderr. The process ends when its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from ptc_emulator.emulator.tools import egress
from ptc_emulator.emulator.tools.egress import EgressRefused, McpPolicy, refusal_for_url
from ptc_emulator.emulator.tools.mcp import (
    _Deadline,
    _finite,
    _http_error,
    _protocol_message,
    _unwrap,
    name_problem,
)
from ptc_emulator.sandbox._pieces import framed

_LINE_LIMIT = 256 * 2**20
"""The longest request line (a call's arguments)."""

_MODULES = (
    "anyio",
    "mcp",
    "mcp.client.sse",
    "mcp.client.streamable_http",
    "mcp.shared.exceptions",
    "mcp_types",
    "ptc_emulator.emulator.tools.guarded",
)
"""Imported before the process says it is ready: the `mcp` package takes 0.5-1.5 s to import, which
no session's deadline should count."""


RESOLVERS = 64
"""Threads that resolve MCP servers' names, all this process's sessions together (the event
loop's default executor, which `anyio.getaddrinfo` and so the guarded client use; a name written as an address is
not resolved). asyncio's own default is min(32, cores + 4), six on two cores: six calls to names
whose resolution hangs (each thread stays until the system resolver gives up, whatever the
session's deadline) held every other client's resolution behind them until their own deadline
(issue 38). A program step issues 8 calls at a time, so 64 take eight requests' worth of hanging
names at once; past that a session waits for a thread, within its own deadline."""


def resolvers(loop: asyncio.AbstractEventLoop) -> None:
    """Give `loop` the `RESOLVERS` threads (the process's loop, as it starts)."""
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=RESOLVERS, thread_name_prefix="mcp-resolve")
    )


class _BadNames(Exception):
    """A listing naming a tool the program's namespace cannot hold, or one tool twice."""


class _NotJson(Exception):
    """A listed schema holds NaN or an infinity, which JSON has no word for (the client parses them)."""


class _CursorAgain(Exception):
    """A listing page named a next cursor the listing had already followed."""


def _policy(data: dict[str, Any]) -> McpPolicy:
    return McpPolicy(**{**data, "allow_hosts": tuple(data.get("allow_hosts") or ())})


async def _connected(
    url: str, headers: dict[str, str], policy: McpPolicy, work: Callable[[Any], Awaitable[Any]]
) -> Any:
    """Connect to the server at `url`, run `work(client)`, and close; within the policy's deadline."""
    import anyio
    from mcp import Client
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    from ptc_emulator.emulator.tools.guarded import guarded_client

    problem = refusal_for_url(url)
    if problem is not None:
        raise EgressRefused(problem)
    factory = functools.partial(guarded_client, policy)
    try:
        with anyio.fail_after(policy.timeout_s):
            if url.rstrip("/").endswith("/sse"):
                transport = sse_client(
                    url,
                    headers=headers,
                    timeout=policy.connect_timeout_s,
                    sse_read_timeout=policy.timeout_s,
                    httpx_client_factory=factory,
                )
                async with Client(transport) as client:
                    return await work(client)
            async with factory(headers=headers) as http:
                # One SSE event may be as large as the whole answer may (the client's own bound,
                # 1 MiB, failed answers within --mcp-max-answer-bytes); the byte budget bounds it.
                transport = streamable_http_client(url, http_client=http, max_sse_event_size=policy.max_answer_bytes)
                async with Client(transport) as client:
                    return await work(client)
    except TimeoutError as e:
        raise _Deadline() from e


async def _every_page(client: Any) -> list[Any]:
    """The server's tools, every page of them (`nextCursor`), within the session's deadline and
    byte limit; a cursor named again would page forever and fails the listing as not MCP."""
    result = await client.list_tools()
    tools, seen = list(result.tools), set()
    while result.next_cursor is not None:
        if result.next_cursor in seen:
            raise _CursorAgain()
        seen.add(result.next_cursor)
        result = await client.list_tools(cursor=result.next_cursor)
        tools += result.tools
    return tools


async def listing(url: str, headers: dict[str, str], policy: McpPolicy) -> list[dict[str, Any]]:
    """A listing's messages: one per tool, then `{"listed": count}`; or `{"failed": reason}`."""

    async def work(client: Any) -> list[dict[str, Any]]:
        tools = await _every_page(client)
        problem = name_problem(t.name for t in tools)
        if problem is not None:
            raise _BadNames(problem)
        entries = []
        for t in tools:
            annotations = (
                t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if t.annotations else None
            )
            if not _finite(t.input_schema):
                raise _NotJson()
            entry: dict[str, Any] = {"name": t.name, "input_schema": t.input_schema}
            if t.description:
                entry["description"] = t.description
            if annotations:
                entry["annotations"] = annotations
            entries.append({"entry": entry, "read_only": bool(annotations and annotations.get("readOnlyHint"))})
        return entries

    try:
        entries: list[dict[str, Any]] = await _connected(url, headers, policy, work)
    except Exception as e:  # a listing that fails is reported, as the hosted API does
        leaf = _unwrap(e)
        if isinstance(leaf, _BadNames):
            return [{"failed": str(leaf)}]
        return [{"failed": _http_error(e, policy)["message"]}]
    return [*entries, {"listed": len(entries)}]


def _text(content: list[Any]) -> str:
    parts = []
    for part in content:
        if getattr(part, "type", None) == "text":
            parts.append(part.text)
        else:
            parts.append(json.dumps(part.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return "\n".join(parts)


async def call(url: str, headers: dict[str, str], policy: McpPolicy, name: str, arguments: Any) -> dict[str, Any]:
    """A call's message: `{"output": text}` or `{"error": the mcp_call's error}`."""
    from mcp.shared.exceptions import MCPError

    async def work(client: Any) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        if result.is_error:
            content = [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in result.content]
            return {"error": {"type": "mcp_tool_execution_error", "content": content}}
        return {"output": _text(result.content)}

    try:
        found: dict[str, Any] = await _connected(url, headers, policy, work)
        return found
    except Exception as e:
        leaf = _unwrap(e)
        if isinstance(leaf, MCPError):  # a JSON-RPC error: its code and message are MCP's own
            return {"error": {"type": "mcp_protocol_error", "code": leaf.code, "message": _protocol_message(leaf)}}
        return {"error": _http_error(e, policy)}


class Worker:
    def __init__(self, replies: BinaryIO) -> None:
        self.replies = replies
        self.sessions: dict[int, asyncio.Task[None]] = {}

    def send(self, session: int, messages: list[dict[str, Any]]) -> None:
        """A session's messages and its end, as one write (no other session's line comes between)."""
        prefix = f"{session} ".encode()
        lines = [prefix + line for message in messages for line in framed(message).splitlines()]
        lines.append(prefix + b"end")
        try:
            self.replies.write(b"\n".join(lines) + b"\n")
            self.replies.flush()
        except BrokenPipeError:  # the server is gone
            os._exit(0)

    async def answer(self, request: dict[str, Any]) -> None:
        session = request["id"]
        egress._OWN_PORTS.clear()  # the ports the server's apps serve on: never an MCP server's
        egress._OWN_PORTS.update(request.get("own_ports") or ())
        policy = _policy(request["policy"])
        headers = request.get("headers") or {}
        messages: list[dict[str, Any]]
        if request["op"] == "list":
            messages = await listing(request["url"], headers, policy)
        else:
            messages = [await call(request["url"], headers, policy, request["name"], request["arguments"])]
        self.send(session, messages)

    def handle(self, request: dict[str, Any]) -> None:
        if "cancel" in request:  # the server stopped waiting: it reads nothing more of this one
            task = self.sessions.get(request["cancel"])
            if task is not None:
                task.cancel()
            return
        session = request["id"]
        task = asyncio.ensure_future(self.answer(request))
        self.sessions[session] = task
        task.add_done_callback(lambda _: self.sessions.pop(session, None))


async def serve(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    resolvers(loop)
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    worker.replies.write(f"ready {os.getpid()}\n".encode())
    worker.replies.flush()
    while line := await reader.readline():
        worker.handle(json.loads(line))
    for task in list(worker.sessions.values()):  # the server closed our stdin: retire
        task.cancel()


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -I -m ptc_emulator.emulator.tools.mcp_worker").parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import importlib

    for name in _MODULES:
        importlib.import_module(name)
    from ptc_emulator.emulator.tools.guarded import trust

    trust()  # the CA bundle read once, before any session's deadline counts
    asyncio.run(serve(Worker(replies)))


if __name__ == "__main__":
    main()
