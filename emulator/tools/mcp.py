"""MCP tools: the request's `{"type": "mcp", ...}` tool, and a real MCP client for it.

The emulator is an MCP client, as the hosted API is: it connects to `server_url` over streamable
HTTP (or SSE when the URL ends in `/sse`) with the official `mcp` package, sends the tool's
`headers` and `authorization` (as a bearer token), lists the server's tools and calls them. The
sessions run in a process of their own (`mcp_worker.py`, reached through `mcp_child.py`): the
package validates a whole answer with the interpreter held, which the server's clients never wait
for. The server itself imports neither `mcp` nor its HTTP client.

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
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools import mcp_child
from ptc_emulator.emulator.tools.egress import (
    AnswerCompressed,
    AnswerTooLarge,
    EgressRefused,
    McpPolicy,
    _address,
    _Check,
    own_ports,
    refusal_for_url,
)
from ptc_emulator.emulator.tools.mcp_child import ChildGone
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
    leaf = _unwrap(error)
    if isinstance(leaf, ChildGone):
        return {"type": "http_error", "code": 502, "message": messages.mcp_client_gone()}
    if isinstance(leaf, EgressRefused):
        return {"type": "http_error", "code": 403, "message": str(leaf)}
    if isinstance(leaf, AnswerTooLarge | AnswerCompressed):
        return {"type": "http_error", "code": 502, "message": str(leaf)}
    if isinstance(leaf, _Deadline | TimeoutError):
        return {
            "type": "http_error",
            "code": 504,
            "message": messages.mcp_no_answer(_seconds(policy.timeout_s), policy.timeout_flag),
        }
    import httpx2  # (in the MCP client's process: the server imports neither it nor `mcp`)

    if isinstance(leaf, httpx2.HTTPStatusError):
        status = leaf.response.status_code
        return {"type": "http_error", "code": status, "message": messages.mcp_http_status(status)}
    if isinstance(leaf, httpx2.TimeoutException):
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


GRACE_S = 5.0
"""Beyond a session's deadline (which the MCP client's process keeps), how long the server waits
for its answer before it gives up on it there."""


def _refused_here(url: str, policy: McpPolicy) -> str | None:
    """What the egress policy refuses before any connection, known without the MCP client's
    process: the URL's scheme or host, an address written in the URL. The process checks again,
    and checks the addresses a name resolves to."""
    problem = refusal_for_url(url)
    if problem is not None:
        return problem
    parts = urlsplit(url)
    ip = _address(parts.hostname or "")
    if ip is None:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # not a port: the process's client says what it says of it
        return None
    return _Check(policy).refusal(parts.hostname or "", port, ip)


async def _session(tool: McpTool, policy: McpPolicy, client: str, **request: Any) -> list[dict[str, Any]]:
    """A session with the tool's server in `client`'s MCP client process (`mcp_worker.py`): connect,
    list or call, and close, within the policy's deadline; its messages, decoded in a worker
    thread. The `mcp` package reads and validates every answer in full (a listing of up to 8 MiB,
    a call's result) with the interpreter held: in this process every other client waited."""
    assert tool.server_url is not None
    problem = _refused_here(tool.server_url, policy)
    if problem is not None:
        raise EgressRefused(problem)
    request = {
        **request,
        "url": tool.server_url,
        "headers": _headers(tool),
        "policy": asdict(policy),
        "own_ports": own_ports(),
    }
    try:
        lines = await mcp_child.ask(request, policy.timeout_s + GRACE_S, client)
    except TimeoutError as e:  # the process kept no deadline: it is told to stop the session
        raise _Deadline() from e
    return await asyncio.to_thread(mcp_child.decoded, lines)


async def list_tools(
    tool: McpTool,
    declared: McpServerSpec | None,
    policy: McpPolicy,
    timeout_s: float | None = None,
    client: str = "",
) -> Listing:
    """The tool's listing (`client`: the request's scope, whose sessions share one MCP client
    process, `mcp_child.py`)."""
    if declared is not None:
        if declared.error is not None:
            return Listing([], frozenset(), declared.error)
        return _filtered(tool, [(_listed(spec), spec.read_only) for spec in declared.tools])
    if tool.server_url is None:
        return Listing([], frozenset(), messages.no_server(tool.server_label, tool.connector_id))
    bounded = _bounded(policy, timeout_s)
    try:
        found = await _session(tool, bounded, client, op="list")
    except Exception as e:  # a listing that fails is reported, as the hosted API does
        error = _http_error(e, bounded)
        return Listing([], frozenset(), messages.listing_failed(tool.server_label, error["message"]))
    if "failed" in found[-1]:
        return Listing([], frozenset(), messages.listing_failed(tool.server_label, found[-1]["failed"]))
    entries = [(m["entry"], bool(m["read_only"])) for m in found[:-1]]
    return await asyncio.to_thread(_filtered, tool, entries)


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


async def call_tool(
    tool: McpTool,
    declared: McpServerSpec | None,
    name: str,
    arguments: dict[str, Any],
    policy: McpPolicy,
    timeout_s: float | None = None,
    client: str = "",
) -> CallResult:
    if declared is not None:
        return _declared_call(declared, name, arguments)
    if tool.server_url is None:
        unreached = messages.no_server(tool.server_label, tool.connector_id)
        return CallResult(error={"type": "http_error", "code": 424, "message": unreached})
    bounded = _bounded(policy, timeout_s)
    try:
        (found,) = await _session(tool, bounded, client, op="call", name=name, arguments=arguments)
    except Exception as e:
        return CallResult(error=_http_error(e, bounded))
    if "error" in found:
        return CallResult(error=found["error"])
    return CallResult(output=found["output"])
