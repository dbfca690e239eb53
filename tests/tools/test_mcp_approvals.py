"""An MCP approval covers the call it was asked for: the server label, the tool and its arguments,
not only the call's position in the program. Through the official SDK with `store: false` (the
client sends every item back, and may have changed any) against a real MCP server."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.tools_support import DocsServer, docs_server

PTC = {"type": "programmatic_tool_calling"}
PICK = {"type": "function", "name": "pick", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(docs: DocsServer) -> None:
    docs.calls.clear()


def tools(docs: DocsServer) -> list[dict[str, Any]]:
    mcp = {
        "type": "mcp",
        "server_label": "docs_server",
        "server_url": docs.url,
        "require_approval": "always",
        "allowed_callers": ["programmatic"],
    }
    return [PTC, PICK, mcp]


def dumped(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


def approve(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "mcp_approval_response",
        "approval_request_id": request["id"],
        "approve": True,
        "caller": request["caller"],
    }


def picked(call: dict[str, Any], page: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call["call_id"], "output": page, "caller": call["caller"]}


def test_an_approval_does_not_cover_the_call_once_an_earlier_output_changes(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """The user approved `delete_page({page: 'old'})`; the client then sends back a different
    output for the `pick` the program consumed before: the call is now `delete_page({page:
    'important'})`, which nobody approved. It waits on a new approval request."""
    code = "const page = await tools.pick({}); text(await tools.docs_server.delete_page({page}));"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [call] = [i for i in first if i["type"] == "function_call"]
        second_input = [user, *first, picked(call, "old")]
        second = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=second_input, store=False))
        [request] = [i for i in second if i["type"] == "mcp_approval_request"]
        assert json.loads(request["arguments"]) == {"page": "old"}
        rewritten = [user, *first, picked(call, "important"), *second, approve(request)]
        third = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=rewritten, store=False))
    assert docs.calls == []
    [asked] = [i for i in third if i["type"] == "mcp_approval_request"]
    assert json.loads(asked["arguments"]) == {"page": "important"}
    assert asked["id"] != request["id"]


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"name": "lookup", "arguments": '{"page": "something harmless"}'}, "name 'lookup'"),
        ({"arguments": '{"page": "something harmless"}'}, "arguments"),
    ],
)
def test_an_approval_request_sent_back_changed_is_refused(
    ptc_emulator: PTCEmulator, docs: DocsServer, changed: dict[str, str], named: str
) -> None:
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = {**first[index], **changed}
        sent = [user, *first[:index], request, *first[index + 1 :], approve(request)]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == f"input[{1 + index}]"
    assert error["code"] == "invalid_approval_request"
    assert "does not match the call it approves" in error["message"] and named in error["message"]
    assert docs.calls == []


def test_an_unchanged_approval_still_runs_the_call(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        sent = [user, *first, approve(request)]
        final = client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    assert final.output_text == "deleted old"
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_direct_calls_approval_request_sent_back_changed_is_refused(ptc_emulator: PTCEmulator) -> None:
    """A scenario's direct call (`mcp_call`, no program) checks the replayed request item too."""
    hosted = {"mcp_servers": {"docs": {"tools": [{"name": "wipe", "output": "wiped"}, {"name": "lookup"}]}}}
    turns = [{"mcp": {"server_label": "docs", "name": "wipe"}}, {"message": "done: {{ outputs.wipe }}"}]
    ptc_emulator.add_scenario({"match": {"input": "^direct wipe"}, "hosted": hosted, "turns": turns})
    mcp = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/mcp"}
    user = {"role": "user", "content": "direct wipe"}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=[mcp], input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = {**first[index], "name": "lookup"}
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        sent = [user, *first[:index], request, *first[index + 1 :], answer]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=[mcp], input=sent, store=False)
        error = caught.value.body
        assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]"
        assert "name 'lookup'" in error["message"]
        sent = [user, *first, answer]
        final = client.responses.create(model="gpt-test", tools=[mcp], input=sent, store=False)
    assert final.output_text == "done: wiped"
