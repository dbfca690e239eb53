"""MCP tools: the request's `{"type": "mcp", ...}` tool, and a real MCP client for it.

The emulator is an MCP client, as the hosted API is: it connects to `server_url` over streamable
HTTP (or SSE when the URL ends in `/sse`) with the official `mcp` package, sends the tool's
`headers` and `authorization` (as a bearer token), lists the server's tools and calls them.

Offline, a scenario (or the hosted script registered for a scope, see `hosted.py`) can declare a
server's tools and their results under its label instead; a declared server is used even when
the request gives a URL, so a test runs the request it will send in production.

Errors come back as the SDK's error objects on `mcp_call.error`:
`{type: "mcp_protocol_error", code, message}` (a JSON-RPC error), `{type:
"mcp_tool_execution_error", content}` (the tool said `isError`), `{type: "http_error", code,
message}` (the server could not be reached, or answered with an HTTP error).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import math
import re
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field, model_validator

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools.egress import (
    AnswerCompressed,
    AnswerTooLarge,
    EgressRefused,
    McpPolicy,
    refusal_for_url,
)
from ptc_emulator.emulator.wire.items import OpenJSON, WireModel
from ptc_emulator.emulator.wire.tools import McpTool

__all__ = [
    "CallResult",
    "Listing",
    "McpResultSpec",
    "McpServerSpec",
    "McpToolSpec",
    "McpPolicy",
    "call_tool",
    "list_tools",
]


class McpResultSpec(WireModel):
    arguments: dict[str, Any] | None = None
    """The call's arguments (as parsed JSON); omitted matches any."""
    output: str | None = None
    error: str | None = None
    """The tool reports an error (`isError`): the call fails with `mcp_tool_execution_error`."""


class McpToolSpec(WireModel):
    name: str
    description: str | None = None
    input_schema: OpenJSON = Field(default_factory=lambda: {"type": "object", "properties": {}})
    annotations: OpenJSON | None = None
    read_only: bool = False
    """Counts for `allowed_tools` and `require_approval` filters with `read_only`."""
    output: str | None = None
    """The result for any arguments (when no entry of `results` matches)."""
    error: str | None = None
    results: list[McpResultSpec] = Field(default_factory=list)


class McpServerSpec(WireModel):
    """An MCP server declared instead of reached: its tools and what they return."""

    tools: list[McpToolSpec] = Field(default_factory=list)
    error: str | None = None
    """Listing the server fails with this message."""

    @model_validator(mode="after")
    def _names(self) -> McpServerSpec:
        problem = name_problem(t.name for t in self.tools)
        if problem is not None:
            raise ValueError(problem)
        return self


TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
"""A listed MCP tool's name: what a function tool's may be (the model calls it by that name), and
one `tools.<label>.<tool>` key (a dot would open a namespace the next tool could overwrite)."""


def name_problem(names: Iterable[str]) -> str | None:
    """Why a listing's tool names cannot be served (one not a name, or one listed twice), or None.
    Before, `a.b` then `a` lost `a.b` from the program's namespace, and of two tools `a` the
    listing showed both while every call reached the first, silently."""
    seen: set[str] = set()
    for name in names:
        if not TOOL_NAME.fullmatch(name):
            return messages.mcp_tool_name_invalid(name)
        if name in seen:
            return messages.mcp_tool_name_twice(name)
        seen.add(name)
    return None


# ---- the client ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    tools: list[dict[str, Any]]
    """`mcp_list_tools.tools` entries, filtered by `allowed_tools`."""
    read_only: frozenset[str]
    error: str | None = None


@dataclass(frozen=True)
class CallResult:
    output: str | None = None
    error: dict[str, Any] | None = None
    scripted: bool = True
    """False when an offline server declares no result for these arguments."""

    def message(self) -> str:
        """The error as a program's rejected promise says it."""
        error = self.error or {}
        if error.get("type") == "mcp_tool_execution_error":
            parts = error.get("content") or []
            text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)).strip()
            return text or messages.mcp_tool_failed()
        return str(error.get("message") or messages.mcp_unknown_error())


def _listed(spec: McpToolSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": spec.name, "input_schema": spec.input_schema}
    if spec.description is not None:
        entry["description"] = spec.description
    if spec.annotations is not None:
        entry["annotations"] = spec.annotations
    return entry


def _filtered(tool: McpTool, entries: list[tuple[dict[str, Any], bool]], error: str | None = None) -> Listing:
    kept = [(entry, ro) for entry, ro in entries if tool.allows(entry["name"], ro)]
    return Listing([e for e, _ in kept], frozenset(e["name"] for e, ro in kept if ro), error)


def _headers(tool: McpTool) -> dict[str, str]:
    headers = dict(tool.headers or {})
    if tool.authorization:
        headers["Authorization"] = f"Bearer {tool.authorization}"
    return headers


def _unwrap(error: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap transport failures)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class _Deadline(Exception):
    """The listing or call did not end within its deadline."""


def _http_error(error: BaseException, policy: McpPolicy) -> dict[str, Any]:
    """The error of a listing or call that failed below MCP. Nothing of the server's answer goes
    into it but its HTTP status: a non-MCP body may hold anything."""
    import httpx2

    leaf = _unwrap(error)
    if isinstance(leaf, httpx2.HTTPStatusError):
        status = leaf.response.status_code
        return {"type": "http_error", "code": status, "message": messages.mcp_http_status(status)}
    if isinstance(leaf, EgressRefused):
        return {"type": "http_error", "code": 403, "message": str(leaf)}
    if isinstance(leaf, AnswerTooLarge | AnswerCompressed):
        return {"type": "http_error", "code": 502, "message": str(leaf)}
    if isinstance(leaf, _Deadline | TimeoutError | httpx2.TimeoutException):
        message = messages.mcp_no_answer(_seconds(policy.timeout_s), policy.timeout_flag)
        if isinstance(leaf, httpx2.ConnectTimeout):
            message = messages.mcp_no_connection(_seconds(policy.connect_timeout_s))
        return {"type": "http_error", "code": 504, "message": message}
    from mcp.shared.exceptions import MCPError

    if isinstance(leaf, MCPError):
        return {"type": "http_error", "code": 502, "message": _protocol_message(leaf)}
    if isinstance(leaf, httpx2.TransportError | OSError):
        return {"type": "http_error", "code": 502, "message": messages.mcp_unreachable()}
    return {"type": "http_error", "code": 502, "message": messages.mcp_not_mcp()}


MAX_PROTOCOL_MESSAGE = 500
"""Characters of a JSON-RPC error's message kept (the field is MCP's; its text is the server's)."""


def _protocol_message(error: Any) -> str:
    """A JSON-RPC error's message, unless the client made it up from the server's answer (a
    parse failure quotes the body; an unexpected content type quotes the header)."""
    from mcp_types import PARSE_ERROR

    message = str(getattr(error, "message", None) or error)
    if error.code == PARSE_ERROR or message.startswith(("Failed to parse", "Unexpected content type")):
        return messages.mcp_not_mcp()
    return message[:MAX_PROTOCOL_MESSAGE]


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _bounded(policy: McpPolicy, timeout_s: float | None) -> McpPolicy:
    """The policy with its deadline within `timeout_s` (a program's own timeout)."""
    if timeout_s is None or not math.isfinite(timeout_s) or timeout_s >= policy.timeout_s:
        return policy
    return replace(
        policy,
        timeout_s=timeout_s,
        connect_timeout_s=min(policy.connect_timeout_s, timeout_s),
        timeout_flag="the program's --timeout",
    )


_MODULES = (
    "anyio",
    "mcp",
    "mcp.client.sse",
    "mcp.client.streamable_http",
    "mcp.shared.exceptions",
    "mcp_types",
    "ptc_emulator.emulator.tools.guarded",
)
"""What a listing or call imports: the `mcp` package takes 0.5-1.5 s to import; the guarded
client's module (`guarded.py`) imports httpcore2."""
_imported = False


def _import_modules() -> None:
    global _imported
    for name in _MODULES:
        importlib.import_module(name)
    _imported = True


async def _modules() -> None:
    """The `mcp` package imported in a worker thread the first time it is needed, not on the event
    loop (where every other client waited for it). A second caller meanwhile waits in its own
    thread on the import's lock, not on the loop."""
    if not _imported:
        await asyncio.to_thread(_import_modules)


async def _session(tool: McpTool, policy: McpPolicy, work: Any) -> Any:
    """Connect to the tool's server, run `work(client)`, and close; within the policy's deadline.
    The session runs on an event loop of its own in a thread of its own (`_apart`): the `mcp`
    package reads and validates every answer in full (a listing of up to 8 MiB, a call's result),
    and on the server's loop every other client waited meanwhile."""
    await _modules()
    return await _apart(lambda: _connected(tool, policy, work))


async def _apart(start: Callable[[], Awaitable[Any]]) -> Any:
    """`await start()` on a new event loop in a new thread (not the default executor's: a session
    lasts up to its deadline, and those threads are few and shared with the request bodies' work).
    Cancelled here, it is cancelled there and this waits no more."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    there: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    lock = threading.Lock()
    cancelled = False

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    async def main() -> Any:
        task = asyncio.current_task()
        assert task is not None
        with lock:
            if cancelled:
                task.cancel()
            there.append((asyncio.get_running_loop(), task))
        return await start()

    def run() -> None:
        try:
            result, error = asyncio.run(main()), None
        except BaseException as e:  # handed to the waiting task, which raises it
            result, error = None, e
        with contextlib.suppress(RuntimeError):  # the server's loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="ptc-emulator-mcp", daemon=True).start()
    try:
        return await done
    except asyncio.CancelledError:
        with lock:
            cancelled = True
            for other, task in there:
                with contextlib.suppress(RuntimeError):  # that loop ended meanwhile
                    other.call_soon_threadsafe(task.cancel)
        raise


async def _connected(tool: McpTool, policy: McpPolicy, work: Any) -> Any:
    import anyio
    from mcp import Client
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    from ptc_emulator.emulator.tools.guarded import guarded_client

    assert tool.server_url is not None
    problem = refusal_for_url(tool.server_url)
    if problem is not None:
        raise EgressRefused(problem)
    headers = _headers(tool)
    factory = functools.partial(guarded_client, policy)
    try:
        with anyio.fail_after(policy.timeout_s):
            if tool.server_url.rstrip("/").endswith("/sse"):
                transport = sse_client(
                    tool.server_url,
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
                transport = streamable_http_client(
                    tool.server_url, http_client=http, max_sse_event_size=policy.max_answer_bytes
                )
                async with Client(transport) as client:
                    return await work(client)
    except TimeoutError as e:
        raise _Deadline() from e


async def list_tools(
    tool: McpTool, declared: McpServerSpec | None, policy: McpPolicy, timeout_s: float | None = None
) -> Listing:
    if declared is not None:
        if declared.error is not None:
            return Listing([], frozenset(), declared.error)
        return _filtered(tool, [(_listed(spec), spec.read_only) for spec in declared.tools])
    if tool.server_url is None:
        return Listing([], frozenset(), messages.no_server(tool.server_label, tool.connector_id))

    async def work(client: Any) -> Listing:
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
            entries.append((entry, bool(annotations and annotations.get("readOnlyHint"))))
        return _filtered(tool, entries)

    try:
        listing: Listing = await _session(tool, _bounded(policy, timeout_s), work)
        return listing
    except Exception as e:  # a listing that fails is reported, as the hosted API does
        leaf = _unwrap(e)
        if isinstance(leaf, _BadNames):
            return Listing([], frozenset(), messages.listing_failed(tool.server_label, str(leaf)))
        error = _http_error(e, _bounded(policy, timeout_s))
        return Listing([], frozenset(), messages.listing_failed(tool.server_label, error["message"]))


class _BadNames(Exception):
    """A listing naming a tool the program's namespace cannot hold, or one tool twice."""


class _NotJson(Exception):
    """A listed schema holds NaN or an infinity, which JSON has no word for (the client parses them)."""


def _finite(value: Any) -> bool:
    """Whether `value` (parsed JSON) holds no NaN or infinity, however deep."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return False
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


class _CursorAgain(Exception):
    """A listing page named a next cursor the listing had already followed."""


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


def _declared_call(spec: McpServerSpec, name: str, arguments: dict[str, Any]) -> CallResult:
    tool = next((t for t in spec.tools if t.name == name), None)
    if tool is None:
        unknown = messages.mcp_unknown_tool(name)
        return CallResult(error={"type": "mcp_protocol_error", "code": -32602, "message": unknown})
    for result in tool.results:
        if result.arguments is None or result.arguments == arguments:
            return _scripted(result.output, result.error)
    if tool.output is None and tool.error is None:
        return CallResult(scripted=False)
    return _scripted(tool.output, tool.error)


def _scripted(output: str | None, error: str | None) -> CallResult:
    if error is not None:
        return CallResult(error={"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": error}]})
    return CallResult(output=output or "")


def _text(content: list[Any]) -> str:
    parts = []
    for part in content:
        if getattr(part, "type", None) == "text":
            parts.append(part.text)
        else:
            parts.append(json.dumps(part.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return "\n".join(parts)


async def call_tool(
    tool: McpTool,
    declared: McpServerSpec | None,
    name: str,
    arguments: dict[str, Any],
    policy: McpPolicy,
    timeout_s: float | None = None,
) -> CallResult:
    if declared is not None:
        return _declared_call(declared, name, arguments)
    if tool.server_url is None:
        unreached = messages.no_server(tool.server_label, tool.connector_id)
        return CallResult(error={"type": "http_error", "code": 424, "message": unreached})
    await _modules()
    from mcp.shared.exceptions import MCPError

    async def work(client: Any) -> CallResult:
        result = await client.call_tool(name, arguments)
        if result.is_error:
            content = [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in result.content]
            return CallResult(error={"type": "mcp_tool_execution_error", "content": content})
        return CallResult(output=_text(result.content))

    try:
        found: CallResult = await _session(tool, _bounded(policy, timeout_s), work)
        return found
    except Exception as e:
        leaf = _unwrap(e)
        if isinstance(leaf, MCPError):  # a JSON-RPC error: its code and message are MCP's own
            return CallResult(
                error={"type": "mcp_protocol_error", "code": leaf.code, "message": _protocol_message(leaf)}
            )
        return CallResult(error=_http_error(e, _bounded(policy, timeout_s)))
