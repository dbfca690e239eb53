"""Never a 500: each input that once gave one is now a 4xx in OpenAI's envelope or an incomplete program.

One server on 127.0.0.1 for the module; every case goes over HTTP, and success bodies are
validated with the SDK's own models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import Response

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, assert_envelope, program_message

JSON = {"content-type": "application/json"}
DEEP_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "deep",
    "description": "takes anything",
    "parameters": {"type": "object"},
    "output_schema": {"type": "object"},
    "allowed_callers": ["programmatic"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("never-500")), pool_size=1, bundled_fixtures=False)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


@pytest.fixture
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def admin(server: EmulatorServer) -> httpx.Client:
    return httpx.Client(base_url=server.base_url[: -len("/v1")] + "/_emulator", timeout=60, headers=JSON)


def run(http: httpx.Client, code: str, tools: list[dict[str, Any]] | None = None) -> Response:
    body = {"model": "ptc-test", "input": program_message(code), "tools": tools or PTC_TOOLS}
    reply = http.post("/responses", content=json.dumps(body), headers=JSON)
    assert reply.status_code == 200, reply.text[:500]
    return Response.model_validate(reply.json())


def program_outputs(response: Response) -> list[Any]:
    return [item for item in response.output if item.type == "program_output"]


# ---- lone surrogates ----------------------------------------------------------------------------


def test_a_lone_surrogate_in_program_text_becomes_a_replacement_character(http: httpx.Client) -> None:
    response = run(http, "text('a\\ud800b');")
    assert "a\ufffdb" in response.output_text


def test_an_image_url_with_a_lone_surrogate_is_refused_inside_the_program(
    http: httpx.Client, server: EmulatorServer
) -> None:
    response = run(http, "try { image('https://example.com/\\ud800.png'); } catch (e) { text(e.name); }")
    assert "TypeError" in response.output_text
    with admin(server) as client:
        journal = client.get("/journal")
    assert journal.status_code == 200, journal.text[:300]
    json.dumps(journal.json(), ensure_ascii=False).encode("utf-8")  # every string is valid Unicode


def test_a_lone_surrogate_in_an_error_message_reaches_the_client_as_valid_unicode(http: httpx.Client) -> None:
    response = run(http, "throw new Error('bad \\udc00 thing');")
    assert "bad \ufffd thing" in json.dumps(response.model_dump(), ensure_ascii=False)


@pytest.mark.parametrize(
    "turn",
    [
        # each reads the request (`input[:0]`, nothing): one that reads no name a request gives
        # renders the same at every request, and is refused when added if that render fails
        {"message": "a {{ '\\ud800' }} b{{ input[:0] }}"},
        {"message": "{{ '%c'|format(56320) }}{{ input[:0] }}"},
        {"message": "{{ ['\\ud83d', 'x']|join }}{{ input[:0] }}"},
        {"program": "text('{{ '\\udfff' }}'); // {{ input[:0] }}"},
    ],
    ids=["string-escape", "format-c", "half-a-pair-joined", "program"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_template_that_renders_a_lone_surrogate_is_the_scenario_400(
    server: EmulatorServer, http: httpx.Client, turn: dict[str, str], stream: bool
) -> None:
    """A template can make a lone surrogate (a `\\ud800` escape in a string, `%c` of one, half of a
    pair joined), which no response can carry: it was a 500 and a stream cut without an event.
    It is the turn's scenario_error, naming the problem."""
    scenario = {"name": "lone-surrogate", "match": {"input": "^render a surrogate$"}, "turns": [turn]}
    with admin(server) as a:
        assert a.post("/scenarios", json=scenario).status_code == 201
    body = {"model": "m", "input": "render a surrogate", "tools": PTC_TOOLS, "stream": stream}
    reply = http.post("/responses", content=json.dumps(body), headers=JSON)
    if stream:
        assert reply.status_code == 200, reply.text[:500]
        events = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: ")]
        assert events[-1]["type"] == "error", events[-1]
        error = events[-1]
    else:
        error = assert_envelope(reply, 400, "lone surrogate", code="scenario_error")
    assert "lone surrogate" in error["message"], error
    assert "'\\u" in error["message"], error  # the character, escaped (the message itself is valid Unicode)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"code_interpreter": [{"code": "x", "logs": "\\ud800"}]}', "lone UTF-16 surrogate"),
        ('{"shell": [{"command": "ls", "stdout": "a \\udc00"}]}', "lone UTF-16 surrogate"),
        ('{"shell": [{"command": "ls", "exit_code": NaN}]}', "NaN"),
        ('{"shell": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
    ],
    ids=["surrogate-in-logs", "surrogate-in-stdout", "nan", "deep"],
)
def test_a_hosted_script_a_response_cannot_carry_is_refused_when_set(
    server: EmulatorServer, http: httpx.Client, text: str, said: str
) -> None:
    """`PUT /_emulator/hosted` took a lone surrogate that every program or turn using the result
    then answered with a 500 (a stream cut), and the journal holding it was a 500 until a reset; a
    deep body was a 500 too. Each is refused when set, as a scenario's body is."""
    with admin(server) as a:
        reply = a.put("/hosted", content=text)
        assert_envelope(reply, 400, said, code="invalid_scenario")
        assert "Invalid hosted script" in reply.json()["error"]["message"]
        try:
            ran = run(http, "const r = await tools.shell({commands: ['ls']}); text(JSON.stringify(r));", HOSTED_TOOLS)
            assert ran.status == "completed"
            assert a.get("/journal").status_code == 200
        finally:
            a.delete("/hosted")


HOSTED_TOOLS: list[dict[str, Any]] = [
    *PTC_TOOLS,
    {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]},
    {"type": "shell", "environment": {"type": "container_auto"}, "allowed_callers": ["programmatic"]},
]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ("""{"x": {{ 'nan'|float }} }""", "NaN"),
        ("""{"x": {{ '-inf'|float }} }""", "Infinity"),
    ],
    ids=["nan", "infinity"],
)
def test_call_arguments_that_render_to_what_json_has_not_are_the_scenario_400(
    server: EmulatorServer, http: httpx.Client, arguments: str, said: str
) -> None:
    """A call's `arguments` given as a template is parsed as JSON: Python's parser takes NaN and
    Infinity, so the call went out with `{"x":NaN}`, which no client's JSON parser reads."""
    scenario = {
        "name": "arguments-not-json",
        "match": {"input": "^call with odd arguments$"},
        "turns": [{"call": {"name": "fetch", "arguments": arguments}}],
    }
    with admin(server) as a:
        assert a.post("/scenarios", json=scenario).status_code == 201
    tools = [{"type": "function", "name": "fetch", "parameters": {"type": "object"}}]
    reply = http.post("/responses", json={"model": "m", "input": "call with odd arguments", "tools": tools})
    error = assert_envelope(reply, 400, "call arguments did not render to JSON", code="scenario_error")
    assert said in error["message"], error


# ---- deep nesting -------------------------------------------------------------------------------


def test_deeply_nested_tool_arguments_fail_the_program_not_the_worker(
    http: httpx.Client, server: EmulatorServer
) -> None:
    code = (
        "let x = 1; for (let i = 0; i < 5000; i++) x = {a: x};\n"
        "try { await tools.deep(x); } catch (e) { text(e.message); }"
    )
    response = run(http, code, [*PTC_TOOLS, DEEP_TOOL])
    assert "arguments nest deeper than 64 levels" in response.output_text
    with admin(server) as client:
        health = client.get("/health").json()
    assert health["sandbox_crashes"] == 0, health


def test_deeply_nested_program_output_is_text_not_a_500(http: httpx.Client) -> None:
    response = run(http, "let x = 1; for (let i = 0; i < 3000; i++) x = [x];\ntext(JSON.stringify(x));")
    assert response.output_text.startswith("[[[")


def test_a_deeply_nested_tool_output_checked_against_its_schema_is_not_a_500(http: httpx.Client) -> None:
    tools = [*PTC_TOOLS, DEEP_TOOL]
    first = run(http, "const r = await tools.deep({});\ntext(typeof r);", tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1
    deep_output = "[" * 3000 + "]" * 3000
    body = {
        "model": "ptc-test",
        "previous_response_id": first.id,
        "tools": tools,
        "input": [
            {
                "type": "function_call_output",
                "call_id": calls[0].call_id,
                "output": deep_output,
                "caller": calls[0].caller.model_dump(mode="json", exclude_none=True) if calls[0].caller else None,
            }
        ],
    }
    reply = http.post("/responses", content=json.dumps(body), headers=JSON)
    assert reply.status_code in (200, 400), reply.text[:500]
    if reply.status_code == 200:
        assert "object" in Response.model_validate(reply.json()).output_text
    else:
        assert_envelope(reply, 400)


def test_deeply_nested_admin_json_and_yaml_are_400s(server: EmulatorServer) -> None:
    with admin(server) as client:
        deep_json = '{"name": "x", "turns": ' + "[" * 3000 + "]" * 3000 + "}"
        assert_envelope(client.post("/scenarios", content=deep_json), 400, "nested deeper than 64 levels")
        deep_yaml = {"yaml": "name: x\nturns: " + "[" * 3000 + "]" * 3000}
        assert_envelope(client.post("/scenarios", json=deep_yaml), 400, "nested deeper than 64 levels")


@pytest.mark.parametrize(
    ("scalar", "said"),
    [("9" * 5000, "an integer of more than 4300 digits"), ("2024-02-30", "day is out of range for month")],
    ids=["integer-of-5000-digits", "date-that-does-not-exist"],
)
def test_a_yaml_scalar_python_cannot_make_is_a_400(server: EmulatorServer, scalar: str, said: str) -> None:
    """YAML reads these, and Python's constructors refuse them with a ValueError (a 500 before)."""
    with admin(server) as client:
        added = client.post(
            "/scenarios", json={"yaml": f"name: x\nmatch: {{input: a}}\nturns: [{{message: {scalar}}}]"}
        )
    assert_envelope(added, 400, f"invalid YAML: {said}")


# ---- content types and headers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", None],
)
def test_a_non_json_body_is_a_400_worded_as_the_hosted_api_words_it(
    http: httpx.Client, content_type: str | None
) -> None:
    body = json.dumps({"model": "ptc-test", "input": "hi"}).encode()
    headers = {"content-type": content_type} if content_type is not None else {}
    request = http.build_request("POST", "/responses", content=body, headers=headers)
    if content_type is None and "content-type" in request.headers:
        del request.headers["content-type"]
    reply = http.send(request)
    shown = content_type or ""
    error = assert_envelope(reply, 400, f"Unsupported content type: '{shown}'.", code="unsupported_content_type")
    assert "This API method only accepts 'application/json' requests" in error["message"]


def test_json_with_a_charset_is_accepted(http: httpx.Client) -> None:
    body = {"model": "ptc-test", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
    reply = http.post(
        "/responses", content=json.dumps(body), headers={"content-type": "application/json; charset=utf-8"}
    )
    assert reply.status_code == 200, reply.text[:300]


@pytest.mark.parametrize("value", ["abc", "-1", "²", "9" * 5000, "1.5", ""])
def test_an_odd_retry_count_header_is_not_a_500(http: httpx.Client, value: str) -> None:
    body = {"model": "ptc-test", "input": program_message("text('ok');"), "tools": PTC_TOOLS}
    reply = http.post(
        "/responses",
        content=json.dumps(body),
        headers=[("content-type", "application/json"), ("x-stainless-retry-count", value.encode("utf-8"))],
    )
    assert reply.status_code == 200, reply.text[:300]
    Response.model_validate(reply.json())


# ---- the output limit -----------------------------------------------------------------------------


def test_the_output_limit_counts_utf8_bytes(make_server: Any) -> None:
    from ptc_emulator.sandbox import Limits

    server = make_server(limits=Limits(max_output_bytes=3000))
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        # 1,500 CJK characters: 1,500 UTF-16 units but 4,500 UTF-8 bytes.
        response = run(client, "try { text('\u4e2d'.repeat(1500)); } catch (e) { }\ntext('after');")
        [program] = program_outputs(response)
        assert program.status == "incomplete", program
        assert "3000 bytes" in json.dumps(response.model_dump())
        # ASCII of the same length fits.
        response = run(client, "text('a'.repeat(1500));")
        assert program_outputs(response)[0].status == "completed"


# ---- a tool output the templates read -------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "shown"),
    [("9" * 5000, "9" * 5000), ('{"a": ' + "9" * 5000 + "}", '{"a": ' + "9" * 5000 + "}"), ('"\\ud800 x"', "\ufffd x")],
    ids=["integer-of-5000-digits", "in-an-object", "escaped-lone-surrogate"],
)
def test_a_tool_output_the_templates_read_is_never_a_500(
    server: EmulatorServer, http: httpx.Client, output: str, shown: str
) -> None:
    """A scenario's templates see each output parsed as JSON. Python's parser takes an integer of
    over 4300 digits for an error that is not a JSONDecodeError (a 500 before), and an escaped lone
    surrogate parses into a string no client can be sent (a 500 when the message was encoded)."""
    scenario = {
        "name": "echo-output",
        "match": {"input": "echo the output"},
        "turns": [{"call": {"name": "fetch", "arguments": {}}}, {"message": "got {{ output }}"}],
    }
    with admin(server) as a:
        assert a.post("/scenarios", json=scenario).status_code == 201
    tools = [{"type": "function", "name": "fetch", "parameters": {"type": "object", "properties": {}}}]
    first = http.post("/responses", json={"model": "m", "input": "echo the output", "tools": tools})
    assert first.status_code == 200, first.text[:500]
    call = first.json()["output"][-1]
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": output}
    body = {"model": "m", "previous_response_id": first.json()["id"], "input": [answer], "tools": tools}
    reply = http.post("/responses", json=body)
    assert reply.status_code == 200, reply.text[:500]
    assert reply.json()["output"][-1]["content"][0]["text"] == f"got {shown}"
