"""MCP tools through the official SDK against a real MCP server (`MCPServer`, streamable HTTP).

A program calls `tools.<server_label>.<tool>(args)`; the emulator calls the server itself and
the program goes on in the same response. Approvals pause the program on an
`mcp_approval_request` carrying the program's caller. No replay calls the server twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.tools_support import DocsServer, approve_all, docs_server, run_to_end


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(docs: DocsServer) -> None:
    docs.calls.clear()
    docs.authorizations.clear()


def mcp_tool(docs: DocsServer, **fields: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "docs_server", "server_url": docs.url, **fields}


PTC = {"type": "programmatic_tool_calling"}
ADD = {"type": "function", "name": "add", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}

APPROVED_THEN_MORE = """
let out = [];
try { out.push(await tools.docs_server.delete_page({page: 'old'})); }
catch (e) { out.push('caught: ' + e.message); }
out.push(String(await tools.add({a: 1, b: 2})));
out.push(await tools.docs_server.lookup({topic: 'ptc'}));
text(out.join(' | '));
"""


def add(name: str, args: dict[str, Any]) -> Any:
    assert name == "add"
    return args["a"] + args["b"]


def test_a_program_calls_an_mcp_tool_with_no_round_trip(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, mcp_tool(docs, require_approval="never", allowed_callers=["programmatic"], authorization="tok-1")]
    response = client.responses.create(
        model="gpt-test", tools=tools, input=js("text(await tools.docs_server.lookup({topic: 'ptc'}))")
    )
    # Programmatic only: the listing and the call stay inside the runtime (contract §12).
    assert [item.type for item in response.output] == ["program", "program_output", "message"]
    assert response.output_text == "The docs say ptc is fine."
    assert docs.calls == [("lookup", {"topic": "ptc"})]
    assert set(docs.authorizations) == {"Bearer tok-1"}
    [entry] = ptc_emulator.journal
    hosted = entry["hosted_calls"]
    assert [(c["kind"], c["route"], c["name"], c["status"]) for c in hosted] == [
        ("mcp", "program", "lookup", "completed")
    ]
    assert entry["figures"]["tool_calls"]["mcp"] == {"direct": 0, "program": 1}


def test_mcp_list_tools_once_per_conversation_filtered_by_allowed_tools(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    client = validating_client(ptc_emulator)
    tools = [
        PTC,
        mcp_tool(docs, require_approval="never", allowed_callers=["direct", "programmatic"], allowed_tools=["lookup"]),
    ]
    first = client.responses.create(model="gpt-test", tools=tools, input=js("text('one')"))
    assert [item.type for item in first.output] == ["mcp_list_tools", "program", "program_output", "message"]
    listed = first.output[0]
    assert listed.type == "mcp_list_tools" and listed.server_label == "docs_server"
    assert [t.name for t in listed.tools] == ["lookup"]
    assert listed.tools[0].input_schema["properties"]["topic"]["type"] == "string"
    second = client.responses.create(
        model="gpt-test", tools=tools, input=js("text('two')"), previous_response_id=first.id
    )
    assert "mcp_list_tools" not in [item.type for item in second.output]
    # allowed_tools hides delete_page from programs too.
    third = client.responses.create(
        model="gpt-test",
        tools=tools,
        input=js("text(typeof tools.docs_server.delete_page)"),
        previous_response_id=second.id,
    )
    assert third.output_text == "undefined"


@pytest.mark.parametrize("store", [None, False])
def test_require_approval_always_approved_once_and_denied_once(
    ptc_emulator: PTCEmulator, docs: DocsServer, store: bool | None
) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, ADD, mcp_tool(docs, require_approval="always", allowed_callers=["programmatic"])]
    final, outputs = run_to_end(
        client, tools, js(APPROVED_THEN_MORE), store=store, decide=approve_all(True), functions=add
    )
    assert final.output_text == "deleted old | 3 | The docs say ptc is fine."
    first = outputs[0]
    assert [item["type"] for item in first] == ["program", "mcp_approval_request"]
    program, request = first
    assert request["caller"] == {"type": "program", "caller_id": program["call_id"]}
    assert (request["server_label"], request["name"], json.loads(request["arguments"])) == (
        "docs_server",
        "delete_page",
        {"page": "old"},
    )
    # Each approved call ran exactly once, whatever the replays.
    assert docs.calls == [("delete_page", {"page": "old"}), ("lookup", {"topic": "ptc"})]

    docs.calls.clear()
    final, _ = run_to_end(
        client,
        tools,
        js(APPROVED_THEN_MORE),
        store=store,
        decide=lambda r: approve_all(r["name"] != "delete_page", "not today")(r),
        functions=add,
    )
    assert final.output_text == (
        "caught: The call to docs_server.delete_page was not approved: not today | 3 | The docs say ptc is fine."
    )
    assert docs.calls == [("lookup", {"topic": "ptc"})]  # a denied call never runs


def test_approval_filters_by_tool_name(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    client = validating_client(ptc_emulator)
    policy = {"never": {"tool_names": ["lookup"]}}
    tools = [PTC, ADD, mcp_tool(docs, require_approval=policy, allowed_callers=["programmatic"])]
    final, outputs = run_to_end(client, tools, js(APPROVED_THEN_MORE), decide=approve_all(True), functions=add)
    requests = [i["name"] for output in outputs for i in output if i["type"] == "mcp_approval_request"]
    assert requests == ["delete_page"]
    assert final.output_text == "deleted old | 3 | The docs say ptc is fine."


def test_a_replay_with_a_modified_runtime_record_is_refused(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, ADD, mcp_tool(docs, require_approval="never", allowed_callers=["programmatic"])]
    code = (
        "const d = await tools.docs_server.lookup({topic: 'a'}); const s = await tools.add({a: 1, b: 1}); text(d + s);"
    )
    items: list[dict[str, Any]] = [{"role": "user", "content": js(code)}]
    first = client.responses.create(model="gpt-test", tools=tools, input=items, store=False)
    output = [i.model_dump(mode="json", exclude_none=True) for i in first.output]
    assert [i["type"] for i in output] == ["program", "reasoning", "function_call"]
    call = output[2]
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "2", "caller": call["caller"]}
    forged = [dict(i) for i in output]
    forged[1]["encrypted_content"] = forged[1]["encrypted_content"][:-4] + "AAAA"
    with pytest.raises(openai.BadRequestError, match="could not be verified"):
        client.responses.create(model="gpt-test", tools=tools, input=[*items, *forged, answer], store=False)
    final = client.responses.create(model="gpt-test", tools=tools, input=[*items, *output, answer], store=False)
    assert final.output_text == "The docs say a is fine.2"
    again = client.responses.create(model="gpt-test", tools=tools, input=[*items, *output, answer], store=False)
    assert again.output_text == final.output_text
    assert docs.calls == [("lookup", {"topic": "a"})]


def test_approval_responses_are_checked(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, mcp_tool(docs, allowed_callers=["programmatic"])]
    items: list[dict[str, Any]] = [
        {"role": "user", "content": js("text(await tools.docs_server.lookup({topic: 'a'}))")}
    ]
    first = client.responses.create(model="gpt-test", tools=tools, input=items, store=False)
    output = [i.model_dump(mode="json", exclude_none=True) for i in first.output]
    request = output[1]
    stale = {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}
    with pytest.raises(openai.BadRequestError, match="No approval request found"):
        client.responses.create(model="gpt-test", tools=tools, input=[*items, *output, stale], store=False)
    answer = approve_all(True)(request)
    with pytest.raises(openai.BadRequestError, match="answered more than once"):
        client.responses.create(model="gpt-test", tools=tools, input=[*items, *output, answer, answer], store=False)
    with pytest.raises(openai.BadRequestError, match="No mcp_approval_response found"):
        client.responses.create(model="gpt-test", tools=tools, input=[*items, *output], store=False)
    assert docs.calls == []


def test_tool_errors_reject_the_programs_promise(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, mcp_tool(docs, require_approval="never", allowed_callers=["programmatic"])]
    code = "try { await tools.docs_server.broken({reason: 'x'}); } catch (e) { text('caught ' + e.message); }"
    response = client.responses.create(model="gpt-test", tools=tools, input=js(code))
    assert response.output_text.startswith("caught ")
    [entry] = ptc_emulator.journal
    assert entry["hosted_calls"][0]["error"]["type"] == "mcp_tool_execution_error"


def test_an_unreachable_server_is_a_424(ptc_emulator: PTCEmulator) -> None:
    client = validating_client(ptc_emulator)
    tools = [
        PTC,
        {
            "type": "mcp",
            "server_label": "gone",
            "server_url": "http://127.0.0.1:9/mcp",
            "allowed_callers": ["programmatic"],
        },
    ]
    with pytest.raises(openai.APIStatusError, match="Error retrieving tool list from MCP server 'gone'") as caught:
        client.responses.create(model="gpt-test", tools=tools, input=js("text('x')"))
    assert caught.value.status_code == 424


def test_an_offline_server_declared_by_a_scenario(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "offline docs"},
            "hosted": {
                "mcp_servers": {
                    "docs_server": {
                        "tools": [
                            {
                                "name": "lookup",
                                "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
                                "results": [{"arguments": {"topic": "a"}, "output": '{"pages": 3}'}],
                            }
                        ]
                    }
                }
            },
            "turns": [
                {"program": "const r = await tools.docs_server.lookup({topic: 'a'}); text(String(r.pages));"},
                {"message": "pages: {{ result }}"},
            ],
        }
    )
    client = validating_client(ptc_emulator)
    # The declared server answers even though the request names a URL nobody listens on.
    tools = [
        PTC,
        {
            "type": "mcp",
            "server_label": "docs_server",
            "server_url": "http://127.0.0.1:9/mcp",
            "require_approval": "never",
            "allowed_callers": ["programmatic"],
        },
    ]
    response = client.responses.create(model="gpt-test", tools=tools, input="offline docs please")
    assert response.output_text == "pages: 3"


@pytest.mark.parametrize("order", ["client first", "server first"])
def test_server_and_client_calls_in_parallel(ptc_emulator: PTCEmulator, docs: DocsServer, order: str) -> None:
    client = validating_client(ptc_emulator)
    tools = [PTC, ADD, mcp_tool(docs, require_approval="never", allowed_callers=["programmatic"])]
    calls = ["tools.add({a: 2, b: 3})", "tools.docs_server.lookup({topic: 'p'})"]
    if order == "server first":
        calls.reverse()
    code = f"const rs = await Promise.all([{', '.join(calls)}]); text(rs.map(String).join(' + '));"
    final, outputs = run_to_end(client, tools, js(code), store=False, functions=add)
    assert [i["type"] for i in outputs[0]] == ["program", "reasoning", "function_call"]
    expected = ["5", "The docs say p is fine."]
    assert final.output_text == " + ".join(expected if order == "client first" else expected[::-1])
    assert docs.calls == [("lookup", {"topic": "p"})]


def test_a_server_that_speaks_sse(ptc_emulator: PTCEmulator) -> None:
    with docs_server("sse") as sse:
        client = validating_client(ptc_emulator)
        tools = [PTC, mcp_tool(sse, require_approval="never", allowed_callers=["programmatic"], headers={"x-k": "v"})]
        response = client.responses.create(
            model="gpt-test", tools=tools, input=js("text(await tools.docs_server.lookup({topic: 'sse'}))")
        )
        assert response.output_text == "The docs say sse is fine."
        assert sse.calls == [("lookup", {"topic": "sse"})]
