"""Scenario input is untrusted, code-like data: whoever can add a scenario cannot freeze the server,
and every bad value is a 400 naming its field when the scenario is added, not a 500 later.

Over HTTP against one server; a request that used to take exponential time must come back within
the client's generous timeout (no timing is asserted beyond "it answers").
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import Response

from ptc_emulator.api.routes import admin as admin_routes
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.emulator.model.scripted.script import inline_code
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, assert_envelope, program_message

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("scenarios")), pool_size=1, bundled_fixtures=False)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


@pytest.fixture
def admin(server: EmulatorServer) -> Iterator[httpx.Client]:
    root = server.base_url[: -len("/v1")]
    with httpx.Client(base_url=root + "/_emulator", timeout=60, headers=JSON) as client:
        yield client


@pytest.fixture
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def add(admin: httpx.Client, scenario: dict[str, Any]) -> httpx.Response:
    return admin.post("/scenarios", json=scenario)


def ask(http: httpx.Client, text: str) -> httpx.Response:
    return http.post("/responses", content=json.dumps({"model": "ptc-test", "input": text}), headers=JSON)


def message_turn(text: str) -> list[dict[str, Any]]:
    return [{"message": text}]


# ---- regular expressions --------------------------------------------------------------------------


def test_a_catastrophic_regex_is_matched_in_linear_time(admin: httpx.Client, http: httpx.Client) -> None:
    assert add(admin, {"name": "redos", "match": {"input": "^(a+)+$"}, "turns": message_turn("m")}).status_code == 201
    # Backtracking takes 2**n steps on n "a"s and a "!": with n = 60, longer than any test runs (at
    # n = 30 a backtracking engine still finishes, in minutes). RE2 answers at once: no scenario matches.
    assert_envelope(ask(http, "a" * 60 + "!"), 400)
    assert admin.get("/health").json()["status"] == "ok"
    admin.delete("/scenarios/redos")


def test_a_pattern_re2_cannot_run_is_refused_when_added_naming_the_field(admin: httpx.Client) -> None:
    reply = add(admin, {"name": "backref", "match": {"input": r"(a)\1"}, "turns": message_turn("m")})
    assert_envelope(reply, 400, "match.input", code="invalid_scenario")


# ---- templates -------------------------------------------------------------------------------------


def test_nested_range_loops_in_a_template_are_bounded(admin: httpx.Client, http: httpx.Client) -> None:
    # The ranges depend on the input (a constant one is refused when added): 20,000 items each here.
    loops = "{% for i in range(input|length * 100) %}{% for j in range(input|length * 100) %}{% endfor %}{% endfor %}"
    assert add(admin, {"name": "loops", "match": {"input": "^lo+ps$"}, "turns": message_turn(loops)}).status_code == 201
    assert_envelope(ask(http, "l" + "o" * 196 + "ps"), 400, "range() of more than", code="scenario_error")


def test_nested_loops_over_a_long_input_are_bounded(admin: httpx.Client, http: httpx.Client) -> None:
    loops = "{% for a in input %}{% for b in input %}{% endfor %}{% endfor %}done"
    assert add(admin, {"name": "overinput", "match": {"input": "^zz"}, "turns": message_turn(loops)}).status_code == 201
    # Either bound ends it: the step count, or (on a machine too busy to reach it in time) the clock.
    bounded = re.compile(r"the template ran (more than \d+ steps|longer than)")
    assert_envelope(ask(http, "zz" + "a" * 50_000), 400, bounded, code="scenario_error")


def test_huge_repetition_in_a_template_is_bounded(admin: httpx.Client, http: httpx.Client) -> None:
    text = "{{ input * 1000000000 }}"
    assert (
        add(admin, {"name": "repeat", "match": {"input": "^repeat$"}, "turns": message_turn(text)}).status_code == 201
    )
    assert_envelope(ask(http, "repeat"), 400, "repetition", code="scenario_error")


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ 1/0 }}", "division by zero"),
        ("{{ 10 % 0 }}", "ZeroDivisionError"),
        ("{{ 10 // (2 - 2) }}", "ZeroDivisionError"),
        ("{{ input / 0 }}", "division by zero"),
        ("{{ -'a' }}", "TypeError"),
        ("{{ 'x' * 1000000000 }}", "repetition of more than"),
        ("{{ 2 ** 100000 }}", "exponent too large"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "range() of more"),
    ],
)
def test_a_template_that_always_fails_is_refused_when_added(admin: httpx.Client, template: str, why: str) -> None:
    reply = add(admin, {"name": "alwaysfails", "turns": [{"message": "ok"}, {"message": template}]})
    error = assert_envelope(reply, 400, why, code="invalid_scenario")
    assert "turns.1.message" in error["message"]


@pytest.mark.parametrize(
    ("turn", "field"),
    [
        ({"call": {"name": "echo", "input": "{{ 1/0 }}"}}, "turns.0.call.0.input"),
        ({"call": {"name": "echo", "arguments": '{"a": {{ 1/0 }}}'}}, "turns.0.call.0.arguments"),
        ({"search": {"query": "{% include 'x' %}"}}, "turns.0.search.query"),
        ({"search": {"query": "q", "arguments": {"query": "{{ 1/0 }}"}}}, "turns.0.search.arguments.query"),
        ({"mcp": {"server_label": "s", "name": "t", "arguments": {"a": "{{ 1/0 }}"}}}, "turns.0.mcp.arguments.a"),
        ({"code_interpreter": {"code": "{{ unclosed"}}, "turns.0.code_interpreter.code"),
        ({"program": "text({{ 1/0 }})"}, "turns.0.program"),
        ({"refusal": "{% import 'm' as m %}"}, "turns.0.refusal"),
    ],
)
def test_every_template_field_is_checked_when_added(admin: httpx.Client, turn: dict[str, Any], field: str) -> None:
    error = assert_envelope(add(admin, {"name": "fields", "turns": [turn]}), 400, code="invalid_scenario")
    assert field in error["message"]


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{% include 'other' %}", "'include' is not supported"),
        ("{% import 'm' as m %}", "not supported"),
        ("{% for %}", "invalid template"),
        ("{{ unclosed", "invalid template"),
    ],
)
def test_a_template_that_cannot_render_is_refused_when_added(admin: httpx.Client, template: str, why: str) -> None:
    reply = add(admin, {"name": "badtemplate", "turns": message_turn(template)})
    error = assert_envelope(reply, 400, why, code="invalid_scenario")
    assert "turns.0.message" in error["message"]


def test_a_template_failing_at_request_time_is_a_400_not_a_500(admin: httpx.Client, http: httpx.Client) -> None:
    # Fails only with this input (its length is 4): nothing to refuse when the scenario is added.
    template = "{{ 1 / (input|length - 4) }}"
    assert (
        add(admin, {"name": "div0", "match": {"input": "^div0?$"}, "turns": message_turn(template)}).status_code == 201
    )
    assert_envelope(ask(http, "div0"), 400, "ZeroDivisionError", code="scenario_error")
    reply = ask(http, "div")
    assert reply.status_code == 200, reply.text[:300]
    assert Response.model_validate(reply.json()).output_text == "-1.0"


# ---- values checked when added -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", -1, 10**9])
def test_a_retry_after_that_is_not_a_sane_number_is_refused_when_added(admin: httpx.Client, value: Any) -> None:
    raw = json.dumps(value) if not isinstance(value, str) else value
    body = '{"name": "retry", "turns": [{"message": "x", "fault": {"http_error": 429, "retry_after": ' + raw + "}}]}"
    reply = admin.post("/scenarios", content=body)
    assert_envelope(reply, 400, code="invalid_scenario")


@pytest.mark.parametrize("times", [0, -1, 10**30])
def test_a_fault_times_that_is_no_count_of_failures_is_refused_when_added(admin: httpx.Client, times: int) -> None:
    # Once added, `times: -1` (or 0) made the fault never fire: a test of the client's retries
    # passed with no failure injected.
    fault = {"http_error": 503, "times": times}
    reply = add(admin, {"name": "times", "turns": [{"message": "x", "fault": fault}]})
    error = assert_envelope(reply, 400, code="invalid_scenario")
    assert "turns.0.fault.times" in error["message"]


@pytest.mark.parametrize("field", [{"times": 3}, {"retry_after": 1}, {"should_retry": True}])
def test_a_fault_shaping_an_http_error_without_one_is_refused_when_added(
    admin: httpx.Client, field: dict[str, Any]
) -> None:
    # Dropped unsaid before: `times: 3` beside `latency_ms` alone injected no failure at all.
    reply = add(admin, {"name": "shaping", "turns": [{"message": "x", "fault": {"latency_ms": 1, **field}}]})
    name = next(iter(field))
    assert_envelope(reply, 400, f"{name} goes with http_error", code="invalid_scenario")


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"x-a": "b\r\nSet-Cookie: z"}, "line break"),
        ({"x-a": "b\nc"}, "line break"),
        ({"bad name": "v"}, "not a valid HTTP header name"),
        # Accepted before, and the error turn's response broke: its body no longer matched its
        # framing (the connection closed mid-body, or the client failed to decode it).
        ({"Content-Length": "5"}, "frames the HTTP message itself"),
        ({"transfer-encoding": "chunked"}, "frames the HTTP message itself"),
        ({"content-encoding": "gzip"}, "frames the HTTP message itself"),
        ({"connection": "close"}, "frames the HTTP message itself"),
    ],
)
def test_error_headers_with_line_breaks_or_bad_names_are_refused_when_added(
    admin: httpx.Client, headers: dict[str, str], why: str
) -> None:
    reply = add(admin, {"name": "hdr", "turns": [{"error": {"message": "x", "headers": headers}}]})
    error = assert_envelope(reply, 400, why, code="invalid_scenario")
    assert "turns.0.error.headers" in error["message"]


def test_a_lone_surrogate_in_a_scenario_is_refused_when_added(admin: httpx.Client) -> None:
    reply = admin.post("/scenarios", content='{"name": "sur", "turns": [{"message": "\\ud800"}]}')
    assert_envelope(reply, 400, "lone UTF-16 surrogate", code="invalid_scenario")


@pytest.mark.parametrize(
    ("yaml_text", "path"),
    [
        ("turns:\n  - call: {name: echo, arguments: {x: .nan}}\n", "turns.0.call.arguments.x"),
        (
            "turns:\n  - program: text(1)\nhosted:\n  mcp_servers:\n    docs:\n      tools:\n"
            "        - {name: a, input_schema: {type: object, maximum: .inf}}\n",
            "hosted.mcp_servers.docs.tools.0.input_schema.maximum",
        ),
        (
            "turns:\n  - code_interpreter: {code: x}\nhosted:\n  code_interpreter:\n"
            "    - outputs: [{type: logs, logs: a, n: -.inf}]\n",
            "hosted.code_interpreter.0.outputs.0.n",
        ),
    ],
    ids=["call-arguments", "mcp-schema", "code-interpreter-output"],
)
def test_nan_or_an_infinity_in_a_yaml_scenario_is_refused_when_added(
    admin: httpx.Client, yaml_text: str, path: str
) -> None:
    """YAML spells NaN and the infinities (`.nan`, `.inf`), JSON does not. Before, such a scenario
    was added: its call turn reached the client as `{"x":NaN}`, which no JSON reader takes, and a
    declared MCP schema or code interpreter output showed `null` in the number's place, silently."""
    reply = admin.post("/scenarios", json={"yaml": "match: {input: nan}\n" + yaml_text, "name": "nan"})
    assert_envelope(
        reply, 400, f"{path}: numbers must be finite (NaN and Infinity are not JSON)", code="invalid_scenario"
    )


def test_a_declared_mcp_server_under_a_label_no_request_can_name_is_refused_when_added(admin: httpx.Client) -> None:
    """A request's `server_label` is letters, digits, `_` and `-`. Before, a scenario (or a hosted
    script) declaring a server under `docs server` was added, a server no request could reach."""
    tools = {"tools": [{"name": "lookup", "output": "x"}]}
    scenario = {"name": "label", "turns": [{"message": "x"}], "hosted": {"mcp_servers": {"docs server": tools}}}
    reply = admin.post("/scenarios", json=scenario)
    assert_envelope(
        reply, 400, "hosted.mcp_servers.docs server.[key]: String should match pattern", code="invalid_scenario"
    )
    assert admin.put("/hosted", json={"mcp_servers": {"docs server": tools}}).status_code == 400


# ---- YAML ------------------------------------------------------------------------------------------------


def test_a_yaml_alias_chain_is_refused_before_it_expands(admin: httpx.Client) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k in range(8):
        prev, name = chr(97 + k), chr(98 + k)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    reply = add(admin, {"yaml": "\n".join(lines) + "\nturns: [{message: x}]\n"})
    assert_envelope(reply, 400, "aliases", code="invalid_scenario")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "turns: " + "[" * 900 + "]" * 900,
        "turns: " + "[" * 900,
        "a: " + "{a: " * 900 + "}" * 900,
    ],
)
def test_deeply_nested_yaml_is_refused_before_python_loads_it(
    admin: httpx.Client, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """A few kilobytes of `[[[[...` held the event loop 0.3 to 0.6 s while Python's YAML loader
    recursed a thousand levels to its RecursionError: the nesting is now counted by the C parser
    first, and Python's loader is never started on such a text (it was, on the old code)."""
    loaders: list[object] = []

    class Counted(scenario_module._NoAliasLoader):  # type: ignore[name-defined,misc]
        def __init__(self, stream: Any) -> None:
            loaders.append(stream)
            super().__init__(stream)

    monkeypatch.setattr(scenario_module, "_NoAliasLoader", Counted)
    assert_envelope(add(admin, {"yaml": text}), 400, "YAML nested deeper than 64 levels", code="invalid_scenario")
    assert loaders == []


@pytest.mark.parametrize(
    "body",
    [
        {"name": "long-json", "scope": "off-loop", "turns": [{"message": "x" * 100}] * 20_000},
        {"yaml": "name: long-yaml\nscope: off-loop\nturns:\n" + "- {message: a}\n" * 10_000},
    ],
)
def test_a_large_scenario_is_read_off_the_event_loop(
    admin: httpx.Client, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]
) -> None:
    """A scenario of 20,000 turns (2.4 MB of JSON) held every other client 0.3 s while it was
    parsed and checked on the event loop, 1 MiB of YAML seconds: a large body is read in a worker
    thread. Each load notes whether its thread ran the event loop (it did, before)."""
    on_loop: list[bool] = []

    def noted(*args: Any, **kwargs: Any) -> Any:
        on_loop.append(asyncio._get_running_loop() is not None)
        return scenario_module.load_scenario(*args, **kwargs)

    monkeypatch.setattr(admin_routes, "load_scenario", noted)
    reply = add(admin, body)
    assert reply.status_code == 201, reply.text[:300]
    assert on_loop == [False]
    admin.delete(f"/scenarios/{reply.json()['name']}", headers={"x-ptc-emulator-scope": "off-loop"})


def test_an_oversized_yaml_scenario_is_refused(admin: httpx.Client) -> None:
    text = "turns:\n  - message: '" + "x" * (2 * 2**20) + "'\n"
    assert_envelope(add(admin, {"yaml": text}), 400, "larger than", code="invalid_scenario")


def test_scenarios_still_work_after_all_that(admin: httpx.Client, http: httpx.Client) -> None:
    scenario = {"name": "fine", "match": {"input": "(?i)^hello (?P<who>\\w+)$"}, "turns": message_turn("hi {{ who }}")}
    assert add(admin, scenario).status_code == 201
    reply = http.post(
        "/responses", content=json.dumps({"model": "m", "input": "Hello Ada", "tools": PTC_TOOLS}), headers=JSON
    )
    assert reply.status_code == 200, reply.text[:300]
    assert Response.model_validate(reply.json()).output_text == "hi Ada"


# ---- inline fences ---------------------------------------------------------------------------------------


def test_a_js_fence_ends_only_on_a_line_of_its_own() -> None:
    text = "Run this.\n```js\nconst s = 'a ``` inside';\ntext(s);\n```\nthanks"
    assert inline_code(text) == "const s = 'a ``` inside';\ntext(s);"
    assert inline_code("```js\ntext(1)```") is None
    assert inline_code("```js\r\ntext(1);\r\n```\r\n") == "text(1);"


def test_an_invalid_hosted_script_is_said_in_one_line_naming_the_field(admin: httpx.Client) -> None:
    """`PUT /_emulator/hosted` answered pydantic's whole report: several lines, the input echoed,
    and a link to pydantic's site. It names the field in one line now, as a scenario's 400 does."""
    script = {"mcp_servers": {"docs": {"tools": [{"name": "t", "input_schema": {}, "results": [{"output": 5}]}]}}}
    try:
        reply = admin.put("/hosted", json=script)
        error = assert_envelope(reply, 400, "Invalid hosted script", code="invalid_scenario")
        assert error["message"] == (
            "Invalid hosted script: mcp_servers.docs.tools.0.results.0.output: Input should be a valid string"
        )
    finally:
        admin.delete("/hosted")


@pytest.mark.parametrize("scripted", [False, True], ids=["inline", "scenario"])
def test_a_program_result_past_a_renders_output_bound_is_still_its_message(
    admin: httpx.Client, http: httpx.Client, scripted: bool
) -> None:
    """A result of more than 1,000,000 characters, within --max-output-bytes (1 MiB), was a 400
    `scenario_error` naming `Scenario 'inline', turn 2` (a template the client never wrote): the
    final message `{{ result }}` went through a render's output bound. The program's result is
    bounded by its own limit; the message quotes it whole."""
    code = "for (let i = 0; i < 4; i++) text('y'.repeat(262100));"
    if scripted:
        turns = [{"program": code}, {"message": "{{ result }}"}]
        scenario = {"name": "long-result", "match": {"input": "^long result$"}, "turns": turns}
        assert add(admin, scenario).status_code == 201
        text = "long result"
    else:
        text = program_message(code)
    body = {"model": "ptc-test", "input": text, "tools": PTC_TOOLS}
    try:
        reply = http.post("/responses", content=json.dumps(body), headers=JSON)
        assert reply.status_code == 200, reply.text[:300]
        expected = "\n".join(["y" * 262100] * 4)
        kinds = {item["type"]: item for item in reply.json()["output"]}
        assert kinds["program_output"]["result"] == expected
        assert kinds["message"]["content"][0]["text"] == expected
    finally:
        admin.delete("/scenarios/long-result")
