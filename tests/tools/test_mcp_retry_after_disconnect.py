"""An approved MCP call whose client gives up while the call is held, then sends the same request
again (an SDK retrying on its timeout), is made once: the call that reached the server runs on
after its last waiter left, and the retry joins it or takes its kept result (docs/tools-hosted.md,
"No call runs twice"). The code before ended the call with its last waiter, and the retry made it
a second time. Driven by events: the test's MCP server holds the call until the test releases it;
the client's disconnect is seen in the journal (a 499) before the retry is sent."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from mcp.server.mcpserver import MCPServer

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js
from tests.tools.mcp_servers_support import serve

WAIT_S = 60.0  # bounds a test that fails; no assertion is about time


@dataclass
class Slow:
    url: str = ""
    calls: list[int] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(scope="module")
def slow() -> Iterator[Slow]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    record = Slow()
    server = MCPServer("h")

    @server.tool(description="Slow")
    async def slow(s: int) -> str:
        record.calls.append(s)
        record.arrived.set()
        await asyncio.to_thread(record.release.wait, WAIT_S)
        return f"slept {s}"

    with serve(server.streamable_http_app()) as served:
        record.url = served.url
        yield record


@pytest.fixture(autouse=True)
def fresh(slow: Slow) -> None:
    slow.calls.clear()
    slow.arrived.clear()
    slow.release.clear()


def post(emulator: PTCEmulator, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(f"{emulator.base_url}/responses", json=body, timeout=WAIT_S)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def closed_requests(emulator: PTCEmulator) -> int:
    return sum(1 for entry in emulator.journal if entry.get("status") == 499)


def give_up(emulator: PTCEmulator, slow: Slow, body: dict[str, Any]) -> None:
    """Send `body`, and close the connection once the MCP server holds the call; return once the
    emulator has seen the client go (its journal records the 499)."""
    url = urlsplit(f"{emulator.base_url}/responses")
    before = closed_requests(emulator)
    payload = json.dumps(body).encode()
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer sk-test\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(head.encode() + payload)
        assert slow.arrived.wait(WAIT_S), "the call did not reach the MCP server"
    deadline = time.monotonic() + WAIT_S
    while closed_requests(emulator) == before:
        assert time.monotonic() < deadline, "the emulator did not see the client go"
        time.sleep(0.05)


def retried(emulator: PTCEmulator, slow: Slow, body: dict[str, Any]) -> dict[str, Any]:
    """Send `body` again, and release the held call while the retry waits."""
    answer: list[dict[str, Any]] = []
    thread = threading.Thread(target=lambda: answer.append(post(emulator, body)))
    thread.start()
    thread.join(0.5)  # give the retry a moment to reach the emulator (either way it must not call again)
    slow.release.set()
    thread.join(WAIT_S)
    assert answer, "the retry got no answer"
    return answer[0]


def test_a_programs_approved_call_retried_after_the_client_left_runs_once(
    ptc_emulator: PTCEmulator, slow: Slow
) -> None:
    mcp = {
        "type": "mcp",
        "server_label": "h",
        "server_url": slow.url,
        "require_approval": "always",
        "allowed_callers": ["programmatic"],
    }
    tools = [{"type": "programmatic_tool_calling"}, mcp]
    user = {"role": "user", "content": js("const r = await tools.h.slow({s: 2}); text(JSON.stringify(r))")}
    first = post(ptc_emulator, {"model": "m", "tools": tools, "input": [user], "store": False})
    [request] = [i for i in first["output"] if i["type"] == "mcp_approval_request"]
    approval = {
        "type": "mcp_approval_response",
        "approval_request_id": request["id"],
        "approve": True,
        "caller": request["caller"],
    }
    body = {"model": "m", "tools": tools, "input": [user, *first["output"], approval], "store": False}
    give_up(ptc_emulator, slow, body)
    answer = retried(ptc_emulator, slow, body)
    texts = [
        part["text"]
        for item in answer["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    ]
    assert texts == ['"slept 2"']
    assert slow.calls == [2]


def test_a_direct_approved_call_retried_after_the_client_left_runs_once(ptc_emulator: PTCEmulator, slow: Slow) -> None:
    turns = [{"mcp": {"server_label": "h", "name": "slow", "arguments": {"s": 3}}}, {"message": "done"}]
    ptc_emulator.add_scenario({"match": {"input": "^slow direct$"}, "turns": turns})
    tools = [{"type": "mcp", "server_label": "h", "server_url": slow.url, "require_approval": "always"}]
    first = post(ptc_emulator, {"model": "m", "tools": tools, "input": "slow direct", "store": True})
    [request] = [i for i in first["output"] if i["type"] == "mcp_approval_request"]
    approval = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
    body = {"model": "m", "tools": tools, "input": [approval], "previous_response_id": first["id"]}
    give_up(ptc_emulator, slow, body)
    answer = retried(ptc_emulator, slow, body)
    [call] = [i for i in answer["output"] if i["type"] == "mcp_call"]
    assert call["output"] == "slept 3" and call["approval_request_id"] == request["id"]
    assert slow.calls == [3]
