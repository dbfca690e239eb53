"""Bad input, by hand: each case gets the status, OpenAI's error envelope and a message that says what is wrong.

All requests go over HTTP to one server on 127.0.0.1 with the default limits (16 MiB bodies,
256 KiB programs), as a user gets from `ptc-emulator serve`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets.exceptions
import websockets.sync.client

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import (
    PTC_TOOLS,
    ProgramRun,
    assert_envelope,
    drive,
    pausing_program,
    program_message,
)

LIMIT = Settings.max_body_bytes
JSON = {"content-type": "application/json"}
PARSE_ERROR = "could not parse the JSON body"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=Path(tmp_path_factory.mktemp("bad-input")), pool_size=2)).start()
    yield server
    server.stop()


@pytest.fixture
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    # A client per test: a connection the server dropped after one case cannot fail the next.
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


@pytest.fixture
def sdk(server: EmulatorServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        yield client


def post(http: httpx.Client, body: Any, path: str = "/responses") -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    return http.post(path, content=content, headers=JSON)


def js_request(code: str, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": program_message(code), "tools": PTC_TOOLS, **fields}


# ---- malformed bodies --------------------------------------------------------------------------------


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
def test_invalid_json_is_a_400_that_says_the_body_is_not_json(http: httpx.Client, body: bytes) -> None:
    assert_envelope(post(http, body), 400, PARSE_ERROR, param=None)


def test_a_json_body_that_is_not_an_object(http: httpx.Client) -> None:
    assert_envelope(post(http, [1, 2]), 400, "expected an object, but got an array", code="invalid_type")


def test_invalid_utf8_is_a_400_parse_error(http: httpx.Client) -> None:
    error = assert_envelope(post(http, b'{"model": "m", "input": "\xff\xfe hello \xc3"}'), 400, param=None)
    assert re.search(r"pars", error["message"], re.I), error


@pytest.mark.parametrize("where", ["metadata", "content", "tool-parameters"])
def test_100k_nested_arrays_are_refused_quickly(http: httpx.Client, where: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    bodies = {
        "metadata": b'{"model": "m", "input": "hi", "metadata": ' + deep + b"}",
        "content": b'{"model": "m", "input": [{"role": "user", "content": ' + deep + b"}]}",
        "tool-parameters": b'{"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", '
        b'"parameters": {"a": ' + deep + b"}}]}",
    }
    started = time.monotonic()
    error = assert_envelope(post(http, bodies[where]), 400, param=None)
    assert re.search(r"pars", error["message"], re.I), error
    assert time.monotonic() - started < 60
    assert http.get("/responses/resp_missing").status_code == 404  # still serving


@pytest.mark.parametrize("where", ["content-part", "tool-parameters", "text"])
def test_moderately_deep_json_in_open_fields_is_not_a_500(http: httpx.Client, where: str) -> None:
    n = 300
    nested_arrays = b"[" * n + b"]" * n
    nested_objects = b'{"a": ' * n + b"1" + b"}" * n
    bodies = {
        "content-part": b'{"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", '
        b'"text": "hi", "x": ' + nested_arrays + b"}]}]}",
        "tool-parameters": b'{"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", '
        b'"parameters": ' + nested_objects + b"}]}",
        "text": b'{"model": "m", "input": "hi", "text": ' + nested_objects + b"}",
    }
    response = post(http, bodies[where])
    assert response.status_code < 500, response.text
    assert_envelope(response, 400)


# ---- the body size limit ----------------------------------------------------------------------------


def _too_big() -> bytes:
    return b'{"model": "m", "input": "' + b"a" * (LIMIT + 1024) + b'"}'


def test_a_body_over_the_limit_with_content_length_is_a_413(http: httpx.Client) -> None:
    body = _too_big()
    response = http.post("/responses", content=body, headers={**JSON, "content-length": str(len(body))})
    assert_envelope(response, 413, f"the limit is {LIMIT} bytes", param=None)


def test_a_chunked_body_over_the_limit_is_a_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "input": "'
        for _ in range(LIMIT // 2**20 + 1):
            yield b"a" * 2**20
        yield b'"}'

    response = http.post("/responses", content=chunks(), headers=JSON)
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_envelope(response, 413, f"the limit is {LIMIT} bytes", param=None)


def test_the_sdk_sees_a_413_as_an_api_status_error(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="a" * (LIMIT + 1024))
    assert raised.value.status_code == 413
    assert "Request body too large" in raised.value.message


# ---- wrong types, unknown types, missing fields ------------------------------------------------------


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
            {
                "model": "m",
                "input": [{"type": "function_call_output", "call_id": "c", "output": "x", "caller": 5}],
            },
            "input[0].caller",
            "Invalid type",
        ),
    ],
)
def test_wrong_types_name_the_parameter(http: httpx.Client, body: dict[str, Any], param: str, message: str) -> None:
    error = assert_envelope(post(http, body), 400, message, param=param)
    assert f"'{param}'" in error["message"]


@pytest.mark.parametrize(
    ("field", "value", "message", "code"),
    [
        ("temperature", 5, "decimal above maximum value. Expected a value <= 2, but got 5", "decimal_above_max_value"),
        (
            "temperature",
            -0.5,
            "decimal below minimum value. Expected a value >= 0, but got -0.5",
            "decimal_below_min_value",
        ),
        ("top_p", 1.5, "decimal above maximum value. Expected a value <= 1, but got 1.5", "decimal_above_max_value"),
        (
            "top_logprobs",
            21,
            "integer above maximum value. Expected a value <= 20, but got 21",
            "integer_above_max_value",
        ),
        (
            "top_logprobs",
            -1,
            "integer below minimum value. Expected a value >= 0, but got -1",
            "integer_below_min_value",
        ),
        (
            "max_output_tokens",
            10,
            "integer below minimum value. Expected a value >= 16, but got 10",
            "integer_below_min_value",
        ),
    ],
)
def test_numbers_out_of_their_hosted_range_are_refused(
    http: httpx.Client, field: str, value: object, message: str, code: str
) -> None:
    """A sampling or length setting the hosted API refuses is not taken, echoed and ignored."""
    response = post(http, js_request("text('hi')", **{field: value}))
    assert_envelope(response, 400, f"Invalid '{field}': {message} instead.", param=field, code=code)


@pytest.mark.parametrize("fields", [{"temperature": 2, "top_p": 0, "top_logprobs": 20, "max_output_tokens": 16}])
def test_numbers_at_their_hosted_bounds_are_taken(http: httpx.Client, fields: dict[str, Any]) -> None:
    response = post(http, js_request("text('hi')", **fields))
    assert response.status_code == 200, response.text[:300]
    assert {k: response.json()[k] for k in fields} == fields


@pytest.mark.parametrize(
    ("body", "param", "value"),
    [
        ({"model": "m", "input": [{"type": "banana"}]}, "input[0].type", "banana"),
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
    ],
)
def test_unknown_item_types_are_refused_with_the_supported_values(
    http: httpx.Client, body: dict[str, Any], param: str, value: str
) -> None:
    assert_envelope(post(http, body), 400, f"Invalid value: '{value}'", param=param, code="invalid_value")


def test_unknown_parameters_are_refused(http: httpx.Client) -> None:
    assert_envelope(
        post(http, {"model": "m", "input": "hi", "temprature": 1}),
        400,
        "Unknown parameter: 'temprature'",
        param="temprature",
        code="unknown_parameter",
    )


def test_a_long_unknown_name_is_shown_cut(http: httpx.Client) -> None:
    """A 1 MB unknown key was echoed whole in the message and again in `param` (a 15.5 MB key made
    a 31 MB reply). Its first 256 characters are shown, ending in `…`, in both."""
    name = "k" + "\n" * 1_000_000
    reply = post(http, {"model": "m", "input": "hi", name: 1})
    shown = name[:256] + "…"
    assert_envelope(reply, 400, f"Unknown parameter: '{shown}'.", param=shown, code="unknown_parameter")
    assert len(reply.content) < 2_000


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": "hi", "truncation": "v" * 1_000_000}, "truncation"),
        ({"model": "m", "input": [{"type": "v" * 1_000_000}]}, "input[0].type"),
        ({"model": "m", "input": "hi", "include": ["v" * 1_000_000]}, "include[0]"),
    ],
)
def test_a_long_invalid_value_is_shown_cut(http: httpx.Client, body: dict[str, Any], param: str) -> None:
    """A 1 MB value outside a parameter's set was echoed whole in the 400's message (a 1 MB reply).
    Its first 256 characters are shown, ending in `…`."""
    reply = post(http, body)
    assert_envelope(reply, 400, f"Invalid value: '{'v' * 256}…'", param=param, code="invalid_value")
    assert len(reply.content) < 2_000


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "m", "input": [{"type": "message", "content": "hi"}]}, "input[0].role"),
        ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}, "input[0].name"),
        ({"model": "m", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
    ],
)
def test_missing_required_fields_are_named(http: httpx.Client, body: dict[str, Any], param: str) -> None:
    assert_envelope(
        post(http, body),
        400,
        f"Missing required parameter: '{param}'",
        param=param,
        code="missing_required_parameter",
    )


def test_streaming_requests_with_bad_bodies_fail_before_the_stream_starts(http: httpx.Client) -> None:
    assert_envelope(post(http, {"model": 5, "input": "hi", "stream": True}), 400, param="model")


def test_bad_query_and_path_parameters(http: httpx.Client) -> None:
    assert_envelope(http.get("/responses/resp_x/input_items", params={"limit": 0}), 400, param="limit")
    assert_envelope(http.get("/responses/resp_x/input_items", params={"limit": 101}), 400, param="limit")
    assert_envelope(http.get("/responses/resp_x/input_items", params={"order": "sideways"}), 400, param="order")
    assert_envelope(http.get("/responses/resp_missing"), 404, "'resp_missing' not found")
    assert_envelope(http.get("/no-such-endpoint"), 404, "Invalid URL (GET /v1/no-such-endpoint)")
    assert_envelope(http.put("/responses"), 405, "Invalid method for URL (PUT /v1/responses)")


def test_bad_admin_input(server: EmulatorServer) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}/_emulator", timeout=30) as admin:
        assert_envelope(admin.post("/scenarios", content=b"{not json", headers=JSON), 400, "must be a scenario")
        assert_envelope(admin.post("/scenarios", json={"yaml": "turns: ["}), 400, "Invalid scenario")
        assert_envelope(admin.post("/scenarios", json={"turns": []}), 400, "Invalid scenario")
        assert_envelope(admin.delete("/scenarios/nope"), 404, "No scenario named 'nope'")


# ---- values JSON can carry but Python/JSON output cannot -----------------------------------------------


@pytest.mark.parametrize("raw", [b'"temperature": NaN', b'"top_p": Infinity', b'"temperature": 1e400'])
def test_non_finite_numbers_are_a_400(http: httpx.Client, raw: bytes) -> None:
    body = json.dumps(js_request("text('hi')"))[:-1].encode() + b", " + raw + b"}"
    response = post(http, body)
    assert response.status_code < 500, response.text
    assert_envelope(response, 400)


@pytest.mark.parametrize("where", ["code", "instructions"])
def test_lone_surrogates_are_a_400(http: httpx.Client, where: str) -> None:
    if where == "code":
        body = json.dumps(js_request("text('\ud800')"))
    else:
        body = json.dumps(js_request("text('hi')", instructions="\udfff"))
    response = post(http, body.encode("ascii"))  # json.dumps escapes the surrogate: the bytes are ASCII
    assert response.status_code < 500, response.text
    assert_envelope(response, 400)


# ---- conversation rules: a client replaying items it tampered with -------------------------------------


def _first_pause(sdk: openai.OpenAI) -> tuple[ProgramRun, dict[str, Any]]:
    run = ProgramRun(pausing_program(start=10, pauses=2), store=False)
    request = run.next(sdk.responses.create(**run.first()))
    assert request is not None
    return run, request


def test_a_modified_program_is_refused(http: httpx.Client, sdk: openai.OpenAI) -> None:
    _, request = _first_pause(sdk)
    program = next(item for item in request["input"] if item["type"] == "program")
    program["code"] = program["code"].replace("total = x.value + y.value", "total = 0")
    assert_envelope(post(http, request), 400, re.compile("fingerprint|modified", re.I))


def test_modified_call_arguments_are_a_divergence(http: httpx.Client, sdk: openai.OpenAI) -> None:
    _, request = _first_pause(sdk)
    call = next(item for item in request["input"] if item["type"] == "function_call")
    call["arguments"] = json.dumps({"a": 1000, "b": 1})
    assert_envelope(post(http, request), 400, "do not match what the program does", code="program_divergence")


def test_a_missing_tool_output_is_refused(http: httpx.Client, sdk: openai.OpenAI) -> None:
    _, request = _first_pause(sdk)
    request["input"] = [item for item in request["input"] if item["type"] != "function_call_output"]
    assert_envelope(post(http, request), 400, "No tool output found for function call", param="input")


def test_an_output_for_an_unknown_call_is_refused(http: httpx.Client) -> None:
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "call_nope", "output": "1"},
        ],
    }
    assert_envelope(post(http, body), 400, "No tool call found for function call output with call_id call_nope")


# ---- big things that must work --------------------------------------------------------------------------

HUGE = """
const [a, b] = await Promise.all([tools.echo({size: 3000000}), tools.echo({size: 3000000})]);
text(String(a.text.length + b.text.length));
"""


@pytest.mark.parametrize("store", [False, True], ids=["replay", "stored"])
def test_several_megabytes_of_tool_output_within_the_limit_work(sdk: openai.OpenAI, store: bool) -> None:
    run = drive(sdk, ProgramRun(HUGE, store=store))
    assert run.program_output.status == "completed", run.program_output.result[:300]
    assert run.text == "6000000"
    if store:
        assert sdk.responses.retrieve(run.response_ids[-1]).output_text == "6000000"


def test_a_program_over_the_code_size_limit_ends_incomplete_and_says_why(sdk: openai.OpenAI) -> None:
    code = "// " + "x" * (300 * 1024) + "\ntext('never')"
    run = drive(sdk, ProgramRun(code, store=False))
    output = run.program_output
    assert output.status == "incomplete"
    assert "program code exceeds the limit of 262144 bytes" in output.result
    assert run.text.startswith("The program did not complete")
    assert "262144 bytes" in run.text


def test_a_long_conversation_of_small_items_is_answered_in_reasonable_time(http: httpx.Client) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": f"message {i}"} for i in range(20_000)]
    items.append({"role": "user", "content": program_message("text('last')")})
    started = time.monotonic()
    response = post(http, {"model": "m", "input": items, "tools": PTC_TOOLS, "store": False})
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text[:500]
    assert response.json()["output"][-1]["content"][0]["text"] == "last"
    assert elapsed < 30, elapsed


# ---- the same over the WebSocket mode and SSE --------------------------------------------------------


def _ws(server: EmulatorServer) -> Any:
    return websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10)


def _ws_create(code: str) -> str:
    return json.dumps({"type": "response.create", **js_request(code)})


def _until_done(ws: Any) -> dict[str, Any]:
    while True:
        event = json.loads(ws.recv(timeout=30))
        if event["type"] in ("error", "response.completed"):
            return event  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ("{nope", "not valid JSON"),
        (b"\x00\x01\x02", "not valid JSON"),
        ('{"type": "response.banana"}', "Invalid value: 'response.banana'"),
        ('{"type": "response.create", "model": 5}', "Invalid type for 'model'"),
        ('{"type": "response.create", "model": "m", "max_output_tokens": ' + "9" * 5000 + "}", "not valid JSON"),
    ],
    ids=["invalid-json", "binary", "unknown-type", "wrong-type", "integer-of-5000-digits"],
)
def test_bad_websocket_frames_get_an_error_event_and_the_socket_stays_open(
    server: EmulatorServer, frame: str | bytes, message: str
) -> None:
    with _ws(server) as ws:
        ws.send(frame)
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error" and event["status"] == 400, event
        assert message in event["error"]["message"], event
        assert set(event["error"]) == {"message", "type", "param", "code"}, event
        ws.send(_ws_create("text('still open')"))
        done = _until_done(ws)
        assert done["type"] == "response.completed", done
        assert done["response"]["output"][-1]["content"][0]["text"] == "still open"


def test_a_websocket_frame_over_the_size_limit_closes_with_1009(server: EmulatorServer) -> None:
    with _ws(server) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "a" * (LIMIT + 1024)}))
        with pytest.raises(websockets.exceptions.ConnectionClosedError) as raised:
            ws.recv(timeout=30)
    assert raised.value.rcvd is not None and raised.value.rcvd.code == 1009


def test_a_deeply_nested_websocket_frame_gets_an_error_event(server: EmulatorServer) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with _ws(server) as ws:
        ws.send('{"type": "response.create", "model": "m", "input": "hi", "metadata": ' + deep + "}")
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error" and event["status"] == 400, event


def test_streamed_events_are_strict_json(http: httpx.Client) -> None:
    body = json.dumps(js_request("text('hi')", stream=True))[:-1].encode() + b', "temperature": NaN}'
    response = post(http, body)
    assert response.status_code in (200, 400), response.text[:300]
    for line in response.text.splitlines():
        if line.startswith("data: "):
            json.loads(line[len("data: ") :], parse_constant=_no_constants)


def _no_constants(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def test_text_writes_what_json_cannot_as_string_writes_it(sdk: openai.OpenAI) -> None:
    """`text()` writes strings as they are and anything else as JSON; a symbol (for which JSON has
    nothing, and which `'' + x` refuses) came out as "undefined": now as String() writes it."""
    code = "text(Symbol(), Symbol('s'), undefined, 'a', 1, {b: [2]}, null);\ntext(() => 1);"
    run = drive(sdk, ProgramRun(code, store=False))
    assert run.program_output.status == "completed", run.program_output.result
    assert run.program_output.result == 'Symbol() Symbol(s) undefined a 1 {"b":[2]} null\n() => 1'
