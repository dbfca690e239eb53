"""`POST /v1/responses/input_tokens` validates its body as a create does: the hosted endpoint takes
the create's shape (`InputTokenCountParams`) and refuses what a create refuses, with the same 400.
A bad tool list counted without an error would pass a client's offline test that fails hosted.

`POST /v1/responses/compact` takes no tools (`ResponseCompactParams`): a tool field there is an
unknown parameter, and its own fields are checked as a create checks them."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

from tests.api.api_support import assert_envelope

JSON = {"content-type": "application/json"}


def post(http: TestClient, body: dict[str, Any], path: str) -> Any:
    return http.post(path, content=json.dumps(body).encode("utf-8"), headers=JSON)


def function(name: str, **fields: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}, **fields}


PTC = {"type": "programmatic_tool_calling"}
SEARCH = {"type": "tool_search"}


def namespace(name: str, *members: dict[str, Any]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": "d", "tools": list(members)}


# Each body is refused by a create; every field in it is one the token count takes too.
BAD_BODIES: dict[str, dict[str, Any]] = {
    "duplicate function names": {"tools": [function("add"), function("add")]},
    "duplicate custom names": {"tools": [{"type": "custom", "name": "c"}, {"type": "custom", "name": "c"}]},
    "function and custom share a name": {"tools": [function("x"), {"type": "custom", "name": "x"}]},
    "two programmatic_tool_calling tools": {"tools": [PTC, function("add"), PTC]},
    "parameters schema invalid": {
        "tools": [function("add", parameters={"type": "object", "properties": {}, "required": 5})]
    },
    "output_schema invalid": {"tools": [function("add", output_schema={"type": 12})]},
    "namespace member schema invalid": {
        "tools": [namespace("ns", function("add", parameters={"type": "object", "required": 5}))]
    },
    "custom grammar does not compile": {
        "tools": [{"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "regex", "definition": "("}}]
    },
    "tool_choice names an absent function": {
        "tools": [function("add")],
        "tool_choice": {"type": "function", "name": "sub"},
    },
    "tool_choice names an absent custom tool": {
        "tools": [function("add")],
        "tool_choice": {"type": "custom", "name": "c"},
    },
    "tool_choice names an absent tool kind": {"tools": [function("add")], "tool_choice": {"type": "shell"}},
    "tool_choice programmatic_tool_calling without the tool": {
        "tools": [function("add")],
        "tool_choice": {"type": "programmatic_tool_calling"},
    },
    "two namespaces of one name": {"tools": [namespace("ns", function("a")), namespace("ns", function("b"))]},
    "two tool_search tools": {"tools": [SEARCH, SEARCH]},
    "a deferred tool without tool_search": {"tools": [function("add", defer_loading=True)]},
    "a function named as a namespace": {"tools": [function("ns"), namespace("ns", function("a"))]},
    "unknown parameter": {"input": "hi", "colour": "blue"},
    "truncation outside its enum": {"input": "hi", "truncation": "sometimes"},
    "reasoning effort outside its enum": {"input": "hi", "reasoning": {"effort": "extreme"}},
    "unknown tool field": {"tools": [function("add", colour="blue")]},
    "input role outside its enum": {"input": [{"role": "narrator", "content": "hi"}]},
    "conversation with previous_response_id": {"conversation": "conv_1", "previous_response_id": "resp_1"},
    "a compaction_trigger that is not last": {
        "input": [{"type": "compaction_trigger"}, {"role": "user", "content": "hi"}]
    },
    "a function_call_output with no call": {
        "input": [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "c1", "output": "4"}]
    },
    "a custom_tool_call_output answering a function call": {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "4"},
        ]
    },
    "a function call answered twice": {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "4"},
            {"type": "function_call_output", "call_id": "c1", "output": "5"},
        ]
    },
    "a function call named twice": {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "4"},
        ]
    },
    "a tool_search_output with no call": {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "tool_search_output", "call_id": "s1", "execution": "client", "tools": []},
        ]
    },
    "a compaction item that does not verify": {
        "input": [{"role": "user", "content": "hi"}, {"type": "compaction", "encrypted_content": "forged"}]
    },
}


def refusal(http: TestClient, body: dict[str, Any], path: str) -> dict[str, Any]:
    response = post(http, body, path)
    assert_envelope(response, 400)
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("body", list(BAD_BODIES.values()), ids=list(BAD_BODIES))
def test_input_tokens_refuses_what_create_refuses_with_the_same_envelope(
    unit_http: TestClient, body: dict[str, Any]
) -> None:
    body = {"model": "m", "input": "hi", **body}
    created = refusal(unit_http, body, "/v1/responses")
    counted = refusal(unit_http, body, "/v1/responses/input_tokens")
    assert counted == created


def test_the_sdk_count_of_duplicate_tool_names_is_the_create_s_400(unit_sdk: openai.OpenAI) -> None:
    tools: Any = [function("add"), function("add")]
    with pytest.raises(openai.BadRequestError) as created:
        unit_sdk.responses.create(model="m", input="hi", tools=tools)
    with pytest.raises(openai.BadRequestError) as counted:
        unit_sdk.responses.input_tokens.count(model="m", input="hi", tools=tools)
    assert counted.value.body == created.value.body
    assert counted.value.message == "Error code: 400 - Duplicate tool name: 'add'."
    assert counted.value.param == "tools"  # type: ignore[attr-defined]


def test_the_sdk_count_of_two_programmatic_tool_calling_tools_is_refused(unit_sdk: openai.OpenAI) -> None:
    tools: Any = [PTC, function("add", allowed_callers=["programmatic"]), PTC]
    with pytest.raises(openai.BadRequestError) as counted:
        unit_sdk.responses.input_tokens.count(model="m", input="hi", tools=tools)
    assert counted.value.message == "Error code: 400 - Only one programmatic_tool_calling tool may be declared."
    assert counted.value.param == "tools[2]"  # type: ignore[attr-defined]


def test_the_sdk_count_of_an_invalid_parameters_schema_is_refused(unit_sdk: openai.OpenAI) -> None:
    tools: Any = [function("add", parameters={"type": "object", "properties": {}, "required": 5})]
    with pytest.raises(openai.BadRequestError) as created:
        unit_sdk.responses.create(model="m", input="hi", tools=tools)
    with pytest.raises(openai.BadRequestError) as counted:
        unit_sdk.responses.input_tokens.count(model="m", input="hi", tools=tools)
    assert counted.value.body == created.value.body
    assert counted.value.param == "tools[0].parameters"  # type: ignore[attr-defined]


def test_a_sound_tool_list_is_still_counted(unit_sdk: openai.OpenAI) -> None:
    """The checks refuse only what a create refuses: a namespace, a deferred tool with its
    tool_search, PTC and a tool_choice naming a declared tool are counted."""
    tools: Any = [
        PTC,
        function("add", allowed_callers=["programmatic"]),
        function("later", defer_loading=True),
        SEARCH,
        namespace("ns", function("a")),
        {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "regex", "definition": "[a-z]+"}},
    ]
    counted = unit_sdk.responses.input_tokens.count(
        model="m", input="hi", tools=tools, tool_choice={"type": "function", "name": "add"}
    )
    assert counted.input_tokens > 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("tools", [function("add")]), ("tool_choice", "auto"), ("store", False), ("colour", "blue")],
)
def test_compact_refuses_fields_it_does_not_take(unit_http: TestClient, field: str, value: Any) -> None:
    body = {"model": "m", "input": "hi", field: value}
    assert_envelope(post(unit_http, body, "/v1/responses/compact"), 400, param=field, code="unknown_parameter")


@pytest.mark.parametrize(
    "body",
    [
        {"input": [{"role": "narrator", "content": "hi"}]},
        {"input": "hi", "service_tier": "whenever"},
        {"input": "hi", "prompt_cache_retention": "forever"},
        {"input": "hi", "safety_identifier": "x" * 129},
        {"input": [{"type": "compaction_trigger"}, {"role": "user", "content": "hi"}]},
        {"input": [{"role": "user", "content": "hi"}, {"type": "compaction", "encrypted_content": "forged"}]},
    ],
    ids=[
        "input role",
        "service_tier",
        "prompt_cache_retention",
        "safety_identifier",
        "compaction_trigger not last",
        "compaction item that does not verify",
    ],
)
def test_compact_checks_the_fields_it_shares_with_create(unit_http: TestClient, body: dict[str, Any]) -> None:
    """The same refusal (type, param, code); the message of `service_tier` lists compact's own
    values, which are not a create's (`ResponseCompactParams` has no `scale` or `ultrafast`)."""
    body = {"model": "m", **body}
    created = refusal(unit_http, body, "/v1/responses")["error"]
    compacted = refusal(unit_http, body, "/v1/responses/compact")["error"]
    assert [compacted[k] for k in ("type", "param", "code")] == [created[k] for k in ("type", "param", "code")]
    if "service_tier" not in body:
        assert compacted["message"] == created["message"]


def test_a_call_that_awaits_its_output_is_still_counted(unit_sdk: openai.OpenAI) -> None:
    """Outputs are held to their calls; a call whose output is still to come is counted (a client
    counts what it is about to send with the output it is writing)."""
    counted = unit_sdk.responses.input_tokens.count(
        model="m",
        input=[
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
        ],
    )
    assert counted.input_tokens > 0
