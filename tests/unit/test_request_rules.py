"""The request rules, in-process: each bad body gets the status, OpenAI's error envelope, and the
message, param and code the hosted API gives (the same cases as tests/api/test_rejections.py and
tests/api/test_bad_input.py assert over a real server and V8; here no program ever runs)."""

from __future__ import annotations

import json
import re
from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.settings import Settings
from tests.api.api_support import PTC_TOOLS, assert_envelope, program_message

JSON = {"content-type": "application/json"}
PARSE_ERROR = "could not parse the JSON body"


def post(http: TestClient, body: Any, path: str = "/v1/responses") -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    return http.post(path, content=content, headers=JSON)


def js_request(code: str, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": program_message(code), "tools": PTC_TOOLS, **fields}


# ---- bodies that are not a JSON object --------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "input": ',
        b"",
        b'{"model": "m",}',
        b"{'model': 'm'}",
        b'{"model": "m"} trailing',
        b"\x00\x01\x02",
    ],
    ids=["truncated", "empty", "trailing-comma", "single-quotes", "trailing-data", "binary"],
)
def test_invalid_json_is_a_400_that_says_the_body_is_not_json(unit_http: TestClient, body: bytes) -> None:
    assert_envelope(post(unit_http, body), 400, PARSE_ERROR, param=None)


def test_a_json_body_that_is_not_an_object(unit_http: TestClient) -> None:
    assert_envelope(post(unit_http, [1, 2]), 400, "expected an object, but got an array", code="invalid_type")


def test_invalid_utf8_is_a_400_parse_error(unit_http: TestClient) -> None:
    error = assert_envelope(post(unit_http, b'{"model": "m", "input": "\xff\xfe hello \xc3"}'), 400, param=None)
    assert re.search(r"pars", error["message"], re.I), error


@pytest.mark.parametrize("where", ["metadata", "content", "tool-parameters"])
def test_100k_nested_arrays_are_a_parse_error(unit_http: TestClient, where: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    bodies = {
        "metadata": b'{"model": "m", "input": "hi", "metadata": ' + deep + b"}",
        "content": b'{"model": "m", "input": [{"role": "user", "content": ' + deep + b"}]}",
        "tool-parameters": b'{"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", '
        b'"parameters": {"a": ' + deep + b"}}]}",
    }
    error = assert_envelope(post(unit_http, bodies[where]), 400, param=None)
    assert re.search(r"pars", error["message"], re.I), error


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"],
)
def test_a_non_json_body_is_a_400_worded_as_the_hosted_api_words_it(unit_http: TestClient, content_type: str) -> None:
    body = json.dumps({"model": "m", "input": "hi"}).encode()
    reply = unit_http.post("/v1/responses", content=body, headers={"content-type": content_type})
    error = assert_envelope(reply, 400, f"Unsupported content type: '{content_type}'.", code="unsupported_content_type")
    assert "This API method only accepts 'application/json' requests" in error["message"]


@pytest.mark.parametrize("raw", [b'"temperature": NaN', b'"top_p": Infinity', b'"temperature": 1e400'])
def test_non_finite_numbers_are_a_400(unit_http: TestClient, raw: bytes) -> None:
    body = json.dumps(js_request("text('hi')"))[:-1].encode() + b", " + raw + b"}"
    assert_envelope(post(unit_http, body), 400)


def test_a_lone_surrogate_in_the_instructions_is_a_400(unit_http: TestClient) -> None:
    body = json.dumps(js_request("text('hi')", instructions="\udfff"))
    assert_envelope(post(unit_http, body.encode("ascii")), 400)


def test_a_body_over_the_limit_is_a_413(unit_http: TestClient) -> None:
    limit = Settings.max_body_bytes
    body = b'{"model": "m", "input": "' + b"a" * (limit + 1024) + b'"}'
    assert_envelope(post(unit_http, body), 413, f"the limit is {limit} bytes", param=None)


# ---- wrong types, unknown values, unknown and missing fields ----------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"model": 5, "input": "hi"}, "model", "expected a string, but got an integer"),
        ({"model": "m", "input": 5}, "input", "expected one of a string or an array, but got an integer"),
        ({"model": "m", "input": "hi", "store": "yes"}, "store", "expected a boolean, but got a string"),
        ({"model": "m", "input": "hi", "tools": {"type": "function"}}, "tools", "expected an array"),
        ({"model": "m", "input": "hi", "metadata": {"k": 1}}, "metadata.k", "expected a string"),
        ({"model": "m", "input": "hi", "temperature": "hot"}, "temperature", "expected a number"),
        ({"model": "m", "input": "hi", "max_output_tokens": 1.5}, "max_output_tokens", "expected an integer"),
        ({"model": "m", "input": [{"role": "user", "content": 5}]}, "input[0].content", "Invalid type"),
        (
            {"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": "x", "caller": 5}]},
            "input[0].caller",
            "Invalid type",
        ),
        ({"model": 5, "input": "hi", "stream": True}, "model", "Invalid type"),
    ],
    ids=[
        "model",
        "input",
        "store",
        "tools",
        "metadata-value",
        "temperature",
        "max_output_tokens",
        "content",
        "caller",
        "stream-fails-before-streaming",
    ],
)
def test_wrong_types_name_the_parameter(unit_http: TestClient, body: dict[str, Any], param: str, message: str) -> None:
    error = assert_envelope(post(unit_http, body), 400, message, param=param, code="invalid_type")
    assert f"'{param}'" in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "value"),
    [
        ({"model": "m", "input": [{"type": "banana"}]}, "input[0].type", "banana"),
        ({"model": "m", "input": [{"type": "computer_call"}]}, "input[0].type", "computer_call"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_video", "url": "x"}]}]},
            "input[0].content[0].type",
            "input_video",
        ),
        (
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call_output", "call_id": "c", "output": "x", "caller": {"type": "robot"}},
                ],
            },
            "input[1].caller.type",
            "robot",
        ),
        ({"model": "m", "input": "x", "include": ["everything"]}, "include[0]", "everything"),
        ({"model": "m", "input": "hi", "tools": [{"type": "teleport"}]}, "tools[0].type", "teleport"),
    ],
    ids=["item-type", "computer_call", "content-type", "caller-type", "include", "tool-type"],
)
def test_unknown_values_are_refused_with_the_supported_values(
    unit_http: TestClient, body: dict[str, Any], param: str, value: str
) -> None:
    error = assert_envelope(post(unit_http, body), 400, f"Invalid value: '{value}'.", param=param, code="invalid_value")
    assert "Supported values are:" in error["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": "hi", "temprature": 1}, "temprature"),
        ({"model": "m", "input": "x", "colour": "blue"}, "colour"),
        ({"model": "m", "input": [{"type": "function_call_output", "output": "1", "call": "x"}]}, "input[0].call"),
    ],
)
def test_unknown_parameters_are_refused(unit_http: TestClient, body: dict[str, Any], param: str) -> None:
    assert_envelope(post(unit_http, body), 400, f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "m", "input": [{"type": "message", "content": "hi"}]}, "input[0].role"),
        ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}, "input[0].name"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"model": "m", "input": [{"type": "program", "id": "p", "code": "", "fingerprint": ""}]}, "input[0].call_id"),
    ],
)
def test_missing_required_fields_are_named(unit_http: TestClient, body: dict[str, Any], param: str) -> None:
    assert_envelope(
        post(unit_http, body),
        400,
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def test_the_sdk_sees_the_hosted_message_for_a_missing_model(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(input="hi")  # type: ignore[call-overload]
    assert caught.value.message == "Error code: 400 - Missing required parameter: 'model'."


# ---- tool_choice ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "tools", "message"),
    [
        (
            {"type": "function", "name": "nope"},
            [],
            "Tool choice 'function' with name 'nope' not found in 'tools' parameter.",
        ),
        (
            {"type": "programmatic_tool_calling"},
            [],
            "Tool choice 'programmatic_tool_calling' not found in 'tools' parameter.",
        ),
        (
            {"type": "custom", "name": "nope"},
            [{"type": "custom", "name": "shout"}],
            "Tool choice 'custom' with name 'nope' not found in 'tools' parameter.",
        ),
        (
            {"type": "apply_patch"},
            [{"type": "custom", "name": "shout"}],
            "Tool choice 'apply_patch' not found in 'tools' parameter.",
        ),
    ],
    ids=["function", "programmatic", "custom", "apply_patch"],
)
def test_tool_choice_must_name_a_declared_tool(
    unit_sdk: openai.OpenAI, choice: dict[str, Any], tools: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="x", tools=tools, tool_choice=choice)  # type: ignore[arg-type]
    assert caught.value.message == f"Error code: 400 - {message}"
    assert caught.value.code is None


# ---- query and path parameters, routes, methods ---------------------------------------------------


@pytest.mark.parametrize(
    ("params", "param"),
    [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"order": "sideways"}, "order")],
    ids=["limit-0", "limit-101", "order"],
)
def test_bad_query_parameters_name_the_parameter(unit_http: TestClient, params: dict[str, Any], param: str) -> None:
    assert_envelope(unit_http.get("/v1/responses/resp_x/input_items", params=params), 400, param=param)


def test_unknown_responses_routes_and_methods(unit_http: TestClient) -> None:
    assert_envelope(unit_http.get("/v1/responses/resp_missing"), 404, "'resp_missing' not found")
    assert_envelope(unit_http.get("/v1/no-such-endpoint"), 404, "Invalid URL (GET /v1/no-such-endpoint)")
    assert_envelope(unit_http.put("/v1/responses"), 405, "Invalid method for URL (PUT /v1/responses)")


# ---- previous_response_id and the scripted model --------------------------------------------------


def test_an_unknown_previous_response_id(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", previous_response_id="resp_unknown", input="hi")
    error = caught.value
    assert error.message == "Error code: 400 - Previous response with id 'resp_unknown' not found."
    assert error.code == "previous_response_not_found"
    assert error.param == "previous_response_id"


def test_no_scenario_and_no_code(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="What is the weather like?")
    assert caught.value.code == "no_scenario_matched"
    assert "no ```js code block" in caught.value.message


def test_tool_choice_none_refuses_an_inline_program(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input=program_message("text(1);"), tools=PTC_TOOLS, tool_choice="none")  # type: ignore[arg-type]
    assert caught.value.code == "no_scenario_matched"
    assert "has a ```js code block, but the ```js block cannot run: tool_choice is 'none'" in caught.value.message


# ---- parameters that do not fit together --------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message", "param"),
    [
        ({"background": True, "store": False}, "Background mode requires store=true.", "background"),
        (
            {"previous_response_id": "resp_x", "conversation": "conv_x"},
            "Parameters 'previous_response_id' and 'conversation' cannot be used together.",
            "conversation",
        ),
        (
            {"tools": [{"type": "function", "name": "a"}, {"type": "custom", "name": "a"}]},
            "Duplicate tool name: 'a'.",
            "tools",
        ),
        (
            {"tools": [{"type": "function", "name": "a"}], "tool_choice": {"type": "function", "name": "b"}},
            "Tool choice 'function' with name 'b' not found in 'tools' parameter.",
            "tool_choice",
        ),
    ],
    ids=["background-without-store", "previous-and-conversation", "duplicate-tool-name", "tool-choice-param"],
)
def test_parameters_that_do_not_fit_together(
    unit_sdk: openai.OpenAI, params: dict[str, Any], message: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", input="x", **params)
    assert caught.value.message == f"Error code: 400 - {message}"
    assert caught.value.param == param


def test_a_deleted_response_is_gone_and_cannot_be_continued(unit_sdk: openai.OpenAI) -> None:
    created = unit_sdk.responses.create(model="m", input="```js\ntext('hi')\n```")
    assert unit_sdk.responses.delete(created.id) is None
    with pytest.raises(openai.NotFoundError):
        unit_sdk.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        unit_sdk.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(model="m", previous_response_id=created.id, input="more")
    assert caught.value.code == "previous_response_not_found"


def test_cancel_needs_a_background_response(unit_sdk: openai.OpenAI) -> None:
    created = unit_sdk.responses.create(model="m", input="```js\ntext('hi')\n```")
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.cancel(created.id)
    assert caught.value.message.endswith("Only responses created with background=true can be cancelled.")


# ---- enums, bounds and empty strings the hosted API checks (each taken unchecked before) -------------


@pytest.mark.parametrize(
    ("fields", "param", "value", "supported"),
    [
        (
            {"service_tier": "turbo"},
            "service_tier",
            "turbo",
            "'auto', 'default', 'flex', 'scale', 'priority', 'fast', and 'ultrafast'",
        ),
        ({"prompt_cache_retention": "forever"}, "prompt_cache_retention", "forever", "'in_memory' and '24h'"),
        ({"prompt_cache_retention": "in-memory"}, "prompt_cache_retention", "in-memory", "'in_memory' and '24h'"),
        (
            {"reasoning": {"effort": "huge"}},
            "reasoning.effort",
            "huge",
            "'none', 'minimal', 'low', 'medium', 'high', 'xhigh', and 'max'",
        ),
        ({"reasoning": {"summary": "long"}}, "reasoning.summary", "long", "'auto', 'concise', and 'detailed'"),
        (
            {"reasoning": {"effort": "low", "context": "everything"}},
            "reasoning.context",
            "everything",
            "'auto', 'current_turn', and 'all_turns'",
        ),
        ({"truncation": "sometimes"}, "truncation", "sometimes", "'auto' and 'disabled'"),
    ],
    ids=["service_tier", "prompt_cache_retention", "retention-hyphen", "effort", "summary", "context", "two-values"],
)
def test_values_outside_a_hosted_enum_are_refused_with_the_supported_values(
    unit_http: TestClient, fields: dict[str, Any], param: str, value: str, supported: str
) -> None:
    message = f"Invalid value: '{value}'. Supported values are: {supported}."
    assert_envelope(
        post(unit_http, js_request("text('hi')", **fields)), 400, message, param=param, code="invalid_value"
    )


def test_an_unknown_reasoning_key_is_refused(unit_http: TestClient) -> None:
    response = post(unit_http, js_request("text('hi')", reasoning={"effort": "low", "depth": 3}))
    assert_envelope(
        response, 400, "Unknown parameter: 'reasoning.depth'.", param="reasoning.depth", code="unknown_parameter"
    )


def test_every_sdk_enum_value_is_taken_and_the_reasoning_echoed_as_sent(unit_sdk: openai.OpenAI) -> None:
    """What the SDK's types allow (the same in the oldest SDK the project locks) is taken."""
    base = js_request("text('hi')")
    for tier in ("auto", "default", "flex", "scale", "priority", "fast", "ultrafast"):
        assert unit_sdk.responses.create(**base, service_tier=tier).status == "completed"
    for retention in ("in_memory", "24h"):
        assert unit_sdk.responses.create(**base, prompt_cache_retention=retention).status == "completed"
    reasoning = {
        "effort": "max",
        "summary": "concise",
        "generate_summary": "auto",
        "context": "all_turns",
        "mode": "pro",
    }
    response = unit_sdk.responses.create(**base, reasoning=reasoning)
    assert response.reasoning is not None
    assert response.reasoning.model_dump(exclude_none=True) == reasoning


def test_the_sdk_sends_an_unknown_service_tier_and_is_refused(unit_sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.create(**js_request("text('hi')"), service_tier="turbo")
    assert caught.value.body["param"] == "service_tier"  # type: ignore[index]
    assert caught.value.body["code"] == "invalid_value"  # type: ignore[index]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"])
def test_an_empty_model_is_refused(unit_http: TestClient, path: str) -> None:
    message = "Invalid 'model': empty string. Expected a string with minimum length 1, but got an empty string instead."
    assert_envelope(
        post(unit_http, {"model": "", "input": "hi"}, path), 400, message, param="model", code="empty_string"
    )


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"])
@pytest.mark.parametrize("model", ["gpt-5\u0000", "\u0000", "gpt\n5", "gpt-5\u007f"])
def test_a_model_holding_a_control_character_is_refused(unit_http: TestClient, path: str, model: str) -> None:
    # A NUL in `model` was taken, and echoed back in the response's `model`.
    message = (
        "Invalid 'model': string does not match pattern. Expected a string that matches the pattern "
        "'^[^\\x00-\\x1f\\x7f]*$'."
    )
    response = post(unit_http, {"model": model, "input": "hi"}, path)
    assert_envelope(response, 400, message, param="model", code="invalid_value")
    assert "\u0000" not in response.text and "\\u0000" not in response.text


@pytest.mark.parametrize("value", [2**31, 2**63, 10**30])
def test_an_absurd_max_output_tokens_is_refused(unit_http: TestClient, value: int) -> None:
    # 10**30 was taken (and echoed back as an integer no client's JSON reads as sent).
    message = (
        "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 2147483647, "
        f"but got {value} instead."
    )
    response = post(unit_http, js_request("text('hi')", max_output_tokens=value))
    assert_envelope(response, 400, message, param="max_output_tokens", code="integer_above_max_value")
    assert post(unit_http, js_request("text('hi')", max_output_tokens=2**31 - 1)).status_code == 200
    below = post(unit_http, js_request("text('hi')", max_output_tokens=15))  # the lower bound as it was
    assert_envelope(below, 400, None, param="max_output_tokens", code="integer_below_min_value")


@pytest.mark.parametrize("value", [0, -1])
def test_max_tool_calls_below_one_is_refused(unit_http: TestClient, value: int) -> None:
    message = f"Invalid 'max_tool_calls': integer below minimum value. Expected a value >= 1, but got {value} instead."
    response = post(unit_http, js_request("text('hi')", max_tool_calls=value))
    assert_envelope(response, 400, message, param="max_tool_calls", code="integer_below_min_value")


def test_max_tool_calls_of_one_is_taken(unit_http: TestClient) -> None:
    response = post(unit_http, js_request("text('hi')", max_tool_calls=1))
    assert response.status_code == 200, response.text[:300]
    assert response.json()["max_tool_calls"] == 1


def test_a_second_programmatic_tool_calling_tool_is_refused(unit_http: TestClient) -> None:
    tools = [*PTC_TOOLS, {"type": "programmatic_tool_calling"}]
    second = len(tools) - 1
    response = post(unit_http, js_request("text('hi')", tools=tools))
    assert_envelope(
        response, 400, "Only one programmatic_tool_calling tool may be declared.", param=f"tools[{second}]", code=None
    )


def test_an_unknown_stream_options_key_is_refused(unit_http: TestClient) -> None:
    response = post(unit_http, js_request("text('hi')", stream=True, stream_options={"a": None}))
    assert_envelope(
        response, 400, "Unknown parameter: 'stream_options.a'.", param="stream_options.a", code="unknown_parameter"
    )
    wrong = post(unit_http, js_request("text('hi')", stream=True, stream_options={"include_obfuscation": "yes"}))
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "stream_options.include_obfuscation"
    taken = post(unit_http, js_request("text('hi')", stream=True, stream_options={"include_obfuscation": False}))
    assert taken.status_code == 200, taken.text[:300]


@pytest.mark.parametrize(
    "query", ["include[]=bogus", "include=bogus", "include[]=reasoning.encrypted_content&include[]=x"]
)
def test_a_read_refuses_an_include_value_a_create_refuses(unit_http: TestClient, query: str) -> None:
    created = post(unit_http, js_request("text('hi')", include=["bogus"]))
    assert_envelope(created, 400, code="invalid_value")
    message, param = created.json()["error"]["message"], created.json()["error"]["param"]
    stored = post(unit_http, js_request("text('hi')")).json()["id"]
    bad = query.rsplit("=", 1)[1]
    index = query.count("&")
    conversation = unit_http.post("/v1/conversations", json={}).json()["id"]
    for path in (
        f"/v1/responses/{stored}",
        f"/v1/responses/{stored}/input_items",
        f"/v1/conversations/{conversation}/items",
    ):
        reply = unit_http.get(f"{path}?{query}")
        assert_envelope(
            reply, 400, message.replace("'bogus'", f"'{bad}'"), param=f"include[{index}]", code="invalid_value"
        )
    assert param == "include[0]"
    for query in ("include[]=reasoning.encrypted_content", "include=message.output_text.logprobs"):
        assert unit_http.get(f"/v1/responses/{stored}?{query}").status_code == 200


@pytest.mark.parametrize("reference", [["x"], 7, {"id": "x"}])
def test_a_steer_names_a_previous_response_id_of_the_wrong_type_as_a_create_does(
    unit_http: TestClient, reference: object
) -> None:
    created = post(unit_http, {"model": "m", "input": "hi", "previous_response_id": reference})
    assert_envelope(created, 400, code="invalid_type", param="previous_response_id")
    expected = created.json()["error"]["message"]
    with unit_http.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
        ws.send_text(
            json.dumps({"type": "response.create", "model": "m", "input": "hi", "previous_response_id": reference})
        )
        assert ws.receive_json()["error"]["message"] == expected
        ws.send_text(json.dumps({"type": "response.steer", "input": "hi", "previous_response_id": reference}))
        failed = ws.receive_json()
    assert failed["type"] == "response.steer.failed" and failed["error"]["code"] == "invalid_input"
    assert failed["error"]["message"] == expected
