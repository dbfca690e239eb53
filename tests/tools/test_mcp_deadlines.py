"""An MCP call ends: a server that never answers, or keeps its SSE stream alive with comments, or
streams a huge result, ends the call with a clear error, and the program goes on (docs/limits.md,
"MCP"). The servers are real (`MCPServer`) and wait on events nothing sets; the emulator has a
short deadline (`mcp_timeout_s`) and a small answer limit (`mcp_max_answer_bytes`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import misbehaving_server
from tests.tools.tools_support import emulator_from

PTC = {"type": "programmatic_tool_calling"}
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PTCEmulator]:
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("deadlines"),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
        mcp_timeout_s=1.0,
        mcp_max_answer_bytes=LIMIT,
    )
    with emulator_from(settings) as found:
        yield found


def call(emulator: PTCEmulator, url: str, tool: str) -> tuple[str, dict[str, Any]]:
    """Run a program calling `tool` on the server at `url`; its text, and the hidden call's error."""
    mcp = {
        "type": "mcp",
        "server_label": "slow",
        "server_url": url,
        "allowed_callers": ["programmatic"],
        "require_approval": "never",
    }
    code = f"try {{ text(await tools.slow.{tool}({{}})); }} catch (e) {{ text('caught: ' + e.message); }}"
    with validating_client(emulator) as client:
        response = client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js(code))
    [entry] = [e for e in emulator.journal if e.get("hosted_calls")][-1:]
    return response.output_text, entry["hosted_calls"][0]["error"]


@pytest.mark.parametrize("mode", ["", "keepalive"])
def test_a_call_that_never_ends_ends_at_the_deadline(emulator: PTCEmulator, mode: str) -> None:
    with misbehaving_server(mode) as server:
        text, error = call(emulator, server.url, "wait" if mode == "" else "ping")
    assert text == "caught: the MCP server did not answer within 1 s (--mcp-timeout)"
    assert error == {"type": "http_error", "code": 504, "message": text.removeprefix("caught: ")}


def test_a_huge_answer_is_cut_at_the_limit(emulator: PTCEmulator) -> None:
    with misbehaving_server(huge_bytes=4 * LIMIT) as server:
        text, error = call(emulator, server.url, "huge")
    assert text == f"caught: the MCP server's answer exceeded {LIMIT} bytes (--mcp-max-answer-bytes)"
    assert error["code"] == 502


def test_an_answer_within_the_limit_arrives(emulator: PTCEmulator) -> None:
    with misbehaving_server(huge_bytes=LIMIT // 4) as server:
        text, _ = call(emulator, server.url, "huge")
    assert text == "x" * (LIMIT // 4)


def test_a_call_ends_within_the_programs_timeout(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With the default MCP deadline (30 s), a program's call ends within the program's own timeout."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("program-timeout"),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
        limits=Limits(timeout_s=1.0),
    )
    server = EmulatorServer(settings).start()
    emulator = PTCEmulator(server.base_url)
    try:
        with misbehaving_server() as mcp:
            text, _ = call(emulator, mcp.url, "wait")
        assert text == "caught: the MCP server did not answer within 1 s (the program's --timeout)"
    finally:
        emulator.close()
        server.stop()


def test_a_listing_that_never_ends_is_a_424_at_the_deadline(emulator: PTCEmulator) -> None:
    """The listing's answer is an SSE stream of comments only (`keepalive` for every request)."""
    with misbehaving_server("keepalive_all") as server:
        mcp = {"type": "mcp", "server_label": "slow", "server_url": server.url, "allowed_callers": ["programmatic"]}
        with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js("text('x')"))
    assert caught.value.status_code == 424
    assert "did not answer within 1 s" in caught.value.response.json()["error"]["message"]


def test_an_sse_answer_past_a_mebibyte_within_the_limit_arrives(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The limit on an answer is `--mcp-max-answer-bytes` (docs/limits.md), whether the server
    answers with JSON or with an SSE event. Before, the MCP client's
    own bound on one SSE event (1 MiB) applied under it: a 2 MiB result within an 8 MiB limit failed
    with `SSE stream failed: Server-sent event exceeded the 1048576 byte limit.`"""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("sse-event"),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
    )  # the default answer limit, 8 MiB
    server = EmulatorServer(settings).start()
    emulator = PTCEmulator(server.base_url)
    mcp = {
        "type": "mcp",
        "server_label": "big",
        "allowed_callers": ["programmatic"],
        "require_approval": "never",
    }
    code = "try { const r = await tools.big.huge({}); text(r.length); } catch (e) { text('caught: ' + e.message); }"
    try:
        with misbehaving_server("sse_result", huge_bytes=2 * 2**20) as served, validating_client(emulator) as client:
            response = client.responses.create(
                model="gpt-test", tools=[PTC, {**mcp, "server_url": served.url}], input=js(code)
            )
        assert response.output_text == str(2 * 2**20)
    finally:
        emulator.close()
        server.stop()


def test_a_listing_in_pages_lists_every_page(emulator: PTCEmulator) -> None:
    """A server that lists its tools a page at a time (`nextCursor`) is listed to the end, within
    the listing's deadline and byte limit. Before, only the first page was read: the tools of the
    others were silently missing from `tools.<label>` and the `mcp_list_tools` item."""
    with misbehaving_server("paged") as server:
        mcp = {"type": "mcp", "server_label": "paged", "server_url": server.url, "allowed_callers": ["programmatic"]}
        with validating_client(emulator) as client:
            code = "text(Object.keys(tools.paged).sort().join(','))"
            response = client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js(code))
    assert response.output_text == "first,second"


def test_a_listing_whose_cursor_comes_back_is_a_424(emulator: PTCEmulator) -> None:
    """A server whose every page names the same next cursor would be listed until the deadline:
    the cursor seen again fails the listing at once, as an answer that is not MCP."""
    with misbehaving_server("paged_loop") as server:
        mcp = {"type": "mcp", "server_label": "loop", "server_url": server.url, "allowed_callers": ["programmatic"]}
        with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js("text('x')"))
    assert caught.value.status_code == 424
    message = caught.value.response.json()["error"]["message"]
    assert (
        message
        == "Error retrieving tool list from MCP server 'loop': the MCP server's answer is not a valid MCP message"
    )


def test_a_listing_holding_nan_is_a_424(emulator: PTCEmulator) -> None:
    """`NaN` is no JSON value: a listing whose schema holds one is not MCP. Before, the client took
    it and the `mcp_list_tools` item showed the schema with `null` in its place, silently."""
    with misbehaving_server("nan_listing") as server:
        mcp = {"type": "mcp", "server_label": "nan", "server_url": server.url, "allowed_callers": ["programmatic"]}
        with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js("text('x')"))
    assert caught.value.status_code == 424
    message = caught.value.response.json()["error"]["message"]
    assert (
        message
        == "Error retrieving tool list from MCP server 'nan': the MCP server's answer is not a valid MCP message"
    )


@pytest.mark.parametrize(
    ("names", "reason"),
    [
        (("a", "a"), "the MCP server lists more than one tool named 'a'"),
        (("a.b", "a"), "the MCP server lists a tool named 'a.b', which is not 1 to 128 letters, digits, '_' or '-'"),
        (("",), "the MCP server lists a tool named '', which is not 1 to 128 letters, digits, '_' or '-'"),
    ],
    ids=["twice", "dot", "empty"],
)
def test_a_listing_whose_tool_names_cannot_be_served_is_a_424(
    emulator: PTCEmulator, names: tuple[str, ...], reason: str
) -> None:
    """Tool names are `tools.<label>.<tool>` keys and what a call names. Before, the listing was
    taken as it was: of two tools `a` the `mcp_list_tools` item showed both and every call reached
    the first; `a.b` then `a` left `tools.odd.a` the tool, `a.b` gone; `''` was a tool. Silently."""
    with misbehaving_server("named_listing", names=names) as server:
        mcp = {"type": "mcp", "server_label": "odd", "server_url": server.url, "allowed_callers": ["programmatic"]}
        with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="gpt-test", tools=[PTC, mcp], input=js("text('x')"))
    assert caught.value.status_code == 424
    error = caught.value.response.json()["error"]
    assert error == {
        "message": f"Error retrieving tool list from MCP server 'odd': {reason}",
        "type": "external_connector_error",
        "param": "tools",
        "code": "http_error",
    }
