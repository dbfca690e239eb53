"""Direct hosted calls from a scenario: `mcp_call` (with and without approval) and
`code_interpreter_call`, made by the emulator in the same response, and their stream events."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from ptc_emulator.testing.server import PTCEmulator
from tests.support import validating_client
from tests.tools.tools_support import approve_all, run_to_end

_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)

DOCS = {
    "mcp_servers": {
        "docs": {
            "tools": [
                {"name": "lookup", "read_only": True, "results": [{"output": '{"answer": 42}'}]},
                {"name": "wipe", "output": "wiped"},
            ]
        }
    },
    "code_interpreter": [{"code": "print\\(6 \\* 7\\)", "logs": "42\n"}],
}


def scenario(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"match": {"input": "^direct hosted"}, "hosted": DOCS, "turns": turns}


MCP = {"type": "mcp", "server_label": "docs", "server_url": "http://127.0.0.1:9/mcp"}


def test_a_direct_mcp_call_runs_in_the_same_response(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        scenario(
            [
                {"mcp": {"server_label": "docs", "name": "lookup", "arguments": {"q": "{{ input }}"}}},
                {"message": "The answer is {{ outputs.lookup.answer }}."},
            ]
        )
    )
    client = validating_client(ptc_emulator)
    tools = [{**MCP, "require_approval": {"never": {"read_only": True}}}]
    response = client.responses.create(model="gpt-test", tools=tools, input="direct hosted lookup")
    assert [i.type for i in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    call = response.output[1]
    assert call.type == "mcp_call" and call.output == '{"answer": 42}' and call.status == "completed"
    assert json.loads(call.arguments) == {"q": "direct hosted lookup"}
    assert response.output_text == "The answer is 42."
    [entry] = ptc_emulator.journal
    assert entry["figures"]["tool_calls"]["mcp"] == {"direct": 1, "program": 0}


@pytest.mark.parametrize("approve", [True, False])
@pytest.mark.parametrize("store", [None, False])
def test_a_direct_mcp_call_waits_for_approval(ptc_emulator: PTCEmulator, approve: bool, store: bool | None) -> None:
    ptc_emulator.add_scenario(
        scenario(
            [
                {"mcp": {"server_label": "docs", "name": "wipe"}},
                {"message": "done: {{ outputs.wipe | default('not run') }}"},
            ]
        )
    )
    client = validating_client(ptc_emulator)
    final, outputs = run_to_end(client, [MCP], "direct hosted wipe", store=store, decide=approve_all(approve))
    assert [i["type"] for i in outputs[0]] == ["mcp_list_tools", "mcp_approval_request"]
    assert "caller" not in outputs[0][1]
    if approve:
        assert [i["type"] for i in outputs[1]] == ["mcp_call", "message"]
        assert outputs[1][0]["approval_request_id"] == outputs[0][1]["id"]
        assert final.output_text == "done: wiped"
    else:
        assert [i["type"] for i in outputs[1]] == ["message"]
        assert final.output_text == "done: not run"


def test_a_direct_code_interpreter_call(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario([{"code_interpreter": {"code": "print(6 * 7)"}}, {"message": "It printed 42."}]))
    client = validating_client(ptc_emulator)
    tools = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    response = client.responses.create(
        model="gpt-test", tools=tools, input="direct hosted code", include=["code_interpreter_call.outputs"]
    )
    assert [i.type for i in response.output] == ["code_interpreter_call", "message"]
    call = response.output[0]
    assert call.type == "code_interpreter_call" and call.code == "print(6 * 7)"
    assert call.outputs is not None and call.outputs[0].type == "logs" and call.outputs[0].logs == "42\n"


def test_hosted_items_stream_with_the_sdk_event_types(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        scenario(
            [
                {"mcp": {"server_label": "docs", "name": "lookup", "arguments": {"q": "x"}}},
                {"code_interpreter": {"code": "print(6 * 7)"}},
                {"message": "ok"},
            ]
        )
    )
    client = validating_client(ptc_emulator)
    tools = [
        {**MCP, "require_approval": "never"},
        {"type": "code_interpreter", "container": "cntr_1"},
    ]
    # The SDK's stream helper accepts the events (it checks their order and identities)...
    with client.responses.stream(model="gpt-test", tools=tools, input="direct hosted stream") as stream:
        helper_final = stream.get_final_response()
    assert [i.type for i in helper_final.output] == ["mcp_list_tools", "mcp_call", "code_interpreter_call", "message"]
    # ...and every raw event validates with the SDK's event models.
    events = list(client.responses.create(model="gpt-test", tools=tools, input="direct hosted stream", stream=True))
    for event in events:
        _EVENT.validate_python(event.model_dump(mode="json", exclude_none=True))
    final = events[-1].response
    kinds = [e.type for e in events]
    for expected in (
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
    ):
        assert expected in kinds
    assert [i.type for i in final.output] == ["mcp_list_tools", "mcp_call", "code_interpreter_call", "message"]
    done = [e.item.model_dump(mode="json", exclude_none=True) for e in events if e.type == "response.output_item.done"]
    assert done == [i.model_dump(mode="json", exclude_none=True) for i in final.output]


def test_input_items_lists_hosted_items(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario([{"mcp": {"server_label": "docs", "name": "wipe"}}, {"message": "done"}]))
    client = validating_client(ptc_emulator)
    first = client.responses.create(model="gpt-test", tools=[MCP], input="direct hosted wipe")
    request = first.output[1].model_dump(mode="json", exclude_none=True)
    second = client.responses.create(
        model="gpt-test",
        tools=[MCP],
        input=[
            {"role": "user", "content": "direct hosted wipe"},
            *[i.model_dump(mode="json", exclude_none=True) for i in first.output],
            approve_all(True)(request),
        ],
        store=True,
    )
    listed = client.responses.input_items.list(second.id, order="asc")
    types = [i.type for i in listed.data]
    assert types == ["message", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"]
    assert all(i.id for i in listed.data)


@pytest.mark.ptc_strict(False)  # its scenario must not match, so its request goes unmatched
def test_tool_choice_none_does_not_match_a_direct_hosted_call(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario([{"mcp": {"server_label": "docs", "name": "wipe"}}, {"message": "done"}]))
    client = validating_client(ptc_emulator)
    with pytest.raises(openai.BadRequestError, match="makes a direct mcp call"):
        client.responses.create(model="gpt-test", tools=[MCP], input="direct hosted wipe", tool_choice="none")
