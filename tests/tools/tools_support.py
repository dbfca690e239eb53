"""A real MCP server (the official SDK's `MCPServer`) over streamable HTTP on 127.0.0.1, in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator


@dataclass
class DocsServer:
    """`lookup(topic)` and `delete_page(page)`; records every call and the headers it got."""

    url: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)


def _server(record: DocsServer) -> MCPServer:
    server = MCPServer("docs")

    @server.tool(description="Look up a topic in the docs")
    def lookup(topic: str) -> str:
        record.calls.append(("lookup", {"topic": topic}))
        return f"The docs say {topic} is fine."

    @server.tool(description="Delete a docs page")
    def delete_page(page: str) -> str:
        record.calls.append(("delete_page", {"page": page}))
        return f"deleted {page}"

    @server.tool(description="Always fails")
    def broken(reason: str) -> str:
        record.calls.append(("broken", {"reason": reason}))
        raise ValueError(reason)

    return server


@contextmanager
def emulator_from(settings: Settings) -> Iterator[PTCEmulator]:
    """An emulator started in this process with `settings`, its client view; stopped after."""
    server = EmulatorServer(settings).start()
    emulator = PTCEmulator(server.base_url)
    try:
        yield emulator
    finally:
        emulator.close()
        server.stop()


@contextmanager
def docs_server(transport: str = "streamable-http") -> Iterator[DocsServer]:
    """The server on a free port: streamable HTTP at `/mcp`, or SSE at `/sse`."""
    record = DocsServer()
    server_app = _server(record)
    app = server_app.sse_app() if transport == "sse" else server_app.streamable_http_app()

    async def capture(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization")
            record.authorizations.append(auth.decode() if auth else None)
        await app(scope, receive, send)

    from tests.tools.mcp_servers_support import serve

    with serve(capture, "/sse" if transport == "sse" else "/mcp") as served:
        record.url = served.url
        yield record


def approve_all(approve: bool, reason: str | None = None) -> Any:
    def decide(request: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "type": "mcp_approval_response",
            "approval_request_id": request["id"],
            "approve": approve,
        }
        if reason is not None:
            answer["reason"] = reason
        if request.get("caller"):
            answer["caller"] = request["caller"]
        return answer

    return decide


def run_to_end(
    client: Any,
    tools: list[dict[str, Any]],
    text: str,
    *,
    store: bool | None = None,
    decide: Any = None,
    functions: Any = None,
    limit: int = 8,
) -> tuple[Any, list[list[dict[str, Any]]]]:
    """Play a conversation to its final message, answering approvals with `decide(request)` and
    function calls with `functions(name, args)`. With `store: false` every turn replays all items;
    otherwise each turn continues with previous_response_id. Returns the last response and every
    response's output."""
    import json

    items: list[dict[str, Any]] = [{"role": "user", "content": text}]
    extra: dict[str, Any] = {} if store is None else {"store": store}
    response = client.responses.create(model="gpt-test", tools=tools, input=items, **extra)
    outputs = []
    for _ in range(limit):
        output = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        outputs.append(output)
        answers: list[dict[str, Any]] = []
        for item in output:
            if item["type"] == "mcp_approval_request":
                answers.append(decide(item))
            elif item["type"] == "function_call":
                result = functions(item["name"], json.loads(item["arguments"]))
                answers.append(
                    {
                        "type": "function_call_output",
                        "call_id": item["call_id"],
                        "output": json.dumps(result),
                        "caller": item.get("caller"),
                    }
                )
        if not answers:
            return response, outputs
        if store is False:
            items = [*items, *output, *answers]
            response = client.responses.create(model="gpt-test", tools=tools, input=items, **extra)
        else:
            response = client.responses.create(
                model="gpt-test", tools=tools, input=answers, previous_response_id=response.id, **extra
            )
    raise AssertionError("the conversation did not end")
