"""The scenario loader (`load_scenario`) and its refusals: every bad value is a `ScenarioError`
naming its field when the scenario is loaded, never a failure later; and the admin API turns
them into 400s (the cases of tests/scenarios/test_untrusted_scenarios.py, over a real server)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.emulator.model.scripted.scenario import (
    MAX_SCENARIO_BYTES,
    MAX_YAML_NODES,
    NearMiss,
    Request,
    ScenarioError,
    ScenarioRegistry,
    load_scenario,
)
from tests.api.api_support import assert_envelope


def message_turn(template: str) -> list[dict[str, Any]]:
    return [{"message": template}]


def refusal(data: Any) -> str:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(data)
    return str(caught.value)


def test_a_dict_a_yaml_text_and_a_file_load_the_same(tmp_path: Path) -> None:
    spec = {"name": "hello", "match": {"input": "^hi$"}, "turns": [{"message": "hello"}]}
    path = tmp_path / "hello.yaml"
    path.write_text("match: {input: '^hi$'}\nturns:\n  - message: hello\n", encoding="utf-8")
    from_dict, from_yaml, from_file = load_scenario(spec), load_scenario(json.dumps(spec)), load_scenario(path)
    assert from_dict == from_yaml == from_file  # the file's name comes from its stem
    assert from_file.name == "hello" and from_file.turns[0].kind == "message"


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    assert refusal(missing).startswith(f"{missing}: ")


# ---- the shape --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("- just\n- a list\n", "a scenario is a mapping with `match` and `turns`"),
        ({"name": "empty", "turns": []}, "turns: List should have at least 1 item"),
        (
            {"name": "two", "turns": [{"message": "a", "refusal": "b"}]},
            "turns.0: Value error, a turn needs exactly one of",
        ),
        ({"name": "none", "turns": [{"reasoning": "r"}]}, "a turn needs exactly one of program, call, search"),
        ({"name": "bad name!", "turns": [{"message": "x"}]}, "name: String should match pattern"),
        ({"name": "x", "turns": [{"message": "x"}], "colour": "red"}, "colour: Extra inputs are not permitted"),
        (
            {"name": "x", "turns": [{"search": {"query": "q", "load": ["a"]}}]},
            "a search needs exactly one of query, load",
        ),
        ({"name": "x", "turns": [{"error": {"status": 200, "message": "x"}}]}, "turns.0.error.status"),
        ({"name": "x", "turns": [{"message": "x", "fault": {"http_error": 418}}]}, "turns.0.fault.http_error"),
        ({"name": "x", "match": {"input": "(unclosed"}, "turns": [{"message": "x"}]}, "invalid regular expression"),
        (
            {"name": "x", "match": {"instructions": "(unclosed"}, "turns": [{"message": "x"}]},
            "match.instructions: Value error, invalid regular expression '(unclosed'",
        ),
        (
            {"name": "x", "match": {"history": [{"text": "(a)\\1"}]}, "turns": [{"message": "x"}]},
            "match.history.0.text: Value error, invalid regular expression '(a)",
        ),
        (
            {"name": "x", "match": {"history": [{"role": "system", "text": "a"}]}, "turns": [{"message": "x"}]},
            "match.history.0.role: Input should be 'user' or 'assistant'",
        ),
        (
            {"name": "x", "match": {"outputs": [{"tool": "t", "output": "a{2,1}"}]}, "turns": [{"message": "x"}]},
            "match.outputs.0.output: Value error, invalid regular expression 'a{2,1}'",
        ),
        (
            {"name": "x", "match": {"outputs": [{}]}, "turns": [{"message": "x"}]},
            "match.outputs.0: Value error, an output matcher needs at least one of tool, output, json",
        ),
        (
            {"name": "x", "match": {"tool_choice": "always"}, "turns": [{"message": "x"}]},
            "match.tool_choice: Value error, tool_choice is one of auto, none, required, or an object",
        ),
        (
            {"name": "x", "match": {"tool_choice": {"name": "t"}}, "turns": [{"message": "x"}]},
            "match.tool_choice: Value error, an object tool_choice needs its type",
        ),
    ],
    ids=[
        "not-a-mapping",
        "no-turns",
        "two-kinds",
        "no-kind",
        "name",
        "unknown-field",
        "search",
        "error-status",
        "http-error",
        "regex",
        "instructions-regex",
        "history-regex",
        "history-role",
        "outputs-regex",
        "outputs-empty",
        "tool-choice-mode",
        "tool-choice-object",
    ],
)
def test_a_malformed_scenario_is_refused_naming_the_field(data: Any, why: str) -> None:
    assert why in refusal(data)


@pytest.mark.parametrize(
    ("names", "why"),
    [
        (["a", "a"], "hosted.mcp_servers.docs: Value error, the MCP server lists more than one tool named 'a'"),
        (["a.b", "a"], "the MCP server lists a tool named 'a.b', which is not 1 to 128 letters"),
        ([""], "the MCP server lists a tool named '', which is not 1 to 128 letters"),
        (["x" * 129], "the MCP server lists a tool named 'xxxxxxxxxx"),
    ],
    ids=["twice", "dot", "empty", "long"],
)
def test_a_declared_mcp_server_whose_tool_names_cannot_be_served_is_refused(names: list[str], why: str) -> None:
    """A declared server's tools are `tools.<label>.<tool>` keys and names a call reaches. Before,
    such a scenario loaded: of two tools `a` every call reached the first, and `a.b` then `a` lost
    `a.b` from the program's namespace, silently (and `ptc-emulator validate` said all valid)."""
    tools = [{"name": name, "output": "x"} for name in names]
    spec = {"name": "x", "turns": [{"message": "x"}], "hosted": {"mcp_servers": {"docs": {"tools": tools}}}}
    assert why in refusal(spec)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), -1, 10**9])
def test_a_retry_after_that_is_not_a_sane_number_is_refused(value: float) -> None:
    spec = {"name": "retry", "turns": [{"message": "x", "fault": {"http_error": 429, "retry_after": value}}]}
    assert "turns.0.fault.retry_after" in refusal(spec)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"x-a": "b\r\nSet-Cookie: z"}, "line break"),
        ({"x-a": "b\nc"}, "line break"),
        ({"bad name": "v"}, "not a valid HTTP header name"),
    ],
    ids=["crlf", "lf", "name"],
)
def test_error_headers_with_line_breaks_or_bad_names_are_refused(headers: dict[str, str], why: str) -> None:
    message = refusal({"name": "hdr", "turns": [{"error": {"message": "x", "headers": headers}}]})
    assert why in message and "turns.0.error.headers" in message


# ---- templates, checked when loaded -------------------------------------------------------------------


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
def test_a_template_that_always_fails_is_refused(template: str, why: str) -> None:
    message = refusal({"name": "alwaysfails", "turns": [{"message": "ok"}, {"message": template}]})
    assert why in message and "turns.1.message" in message


@pytest.mark.parametrize(
    ("turn", "field"),
    [
        ({"call": {"name": "echo", "input": "{{ 1/0 }}"}}, "turns.0.call.0.input"),
        ({"call": {"name": "echo", "arguments": '{"a": {{ 1/0 }}}'}}, "turns.0.call.0.arguments"),
        ({"call": [{"name": "a"}, {"name": "b", "arguments": {"x": ["{{ 1/0 }}"]}}]}, "turns.0.call.1.arguments.x.0"),
        ({"search": {"query": "{% include 'x' %}"}}, "turns.0.search.query"),
        ({"search": {"query": "q", "arguments": {"query": "{{ 1/0 }}"}}}, "turns.0.search.arguments.query"),
        ({"mcp": {"server_label": "s", "name": "t", "arguments": {"a": "{{ 1/0 }}"}}}, "turns.0.mcp.arguments.a"),
        ({"code_interpreter": {"code": "{{ unclosed"}}, "turns.0.code_interpreter.code"),
        ({"program": "text({{ 1/0 }})"}, "turns.0.program"),
        ({"refusal": "{% import 'm' as m %}"}, "turns.0.refusal"),
    ],
    ids=[
        "call-input",
        "call-arguments-text",
        "call-arguments-nested",
        "search-query",
        "search-arguments",
        "mcp",
        "code",
        "program",
        "refusal",
    ],
)
def test_every_template_field_is_checked(turn: dict[str, Any], field: str) -> None:
    message = refusal({"name": "fields", "turns": [turn]})
    assert f"{field}: invalid template" in message


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{% include 'other' %}", "'include' is not supported"),
        ("{% import 'm' as m %}", "not supported"),
        ("{% extends 'base' %}", "'extends' is not supported"),
        ("{% for %}", "invalid template"),
        ("{{ unclosed", "invalid template"),
    ],
)
def test_a_template_that_cannot_render_is_refused(template: str, why: str) -> None:
    message = refusal({"name": "badtemplate", "turns": message_turn(template)})
    assert why in message and "turns.0.message" in message


def test_a_template_that_fails_only_on_some_input_is_loaded() -> None:
    """Nothing to refuse when loaded: it fails at request time (a 400 then, see the integration test)."""
    assert load_scenario({"name": "div0", "turns": message_turn("{{ 1 / (input|length - 4) }}")}).name == "div0"


# ---- YAML -----------------------------------------------------------------------------------------------


def test_a_yaml_alias_chain_is_refused_before_it_expands() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k in range(8):
        prev, name = chr(97 + k), chr(98 + k)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    assert "aliases (*name) are not supported in scenarios" in refusal("\n".join(lines) + "\nturns: [{message: x}]\n")


def test_an_oversized_yaml_scenario_is_refused() -> None:
    text = "turns:\n  - message: '" + "x" * (2 * 2**20) + "'\n"
    assert refusal(text) == f"scenario: larger than {MAX_SCENARIO_BYTES} bytes"


def test_deeply_nested_yaml_is_refused() -> None:
    assert "nested deeper than 64 levels" in refusal("turns: " + "[" * 100 + "]" * 100)


def test_the_loader_counts_what_it_reads_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the count before it missed, the loader counts the events it builds from by the
    same bounds: it never builds more values, or deeper, than a scenario may hold."""
    monkeypatch.setattr(scenario_module, "_count_nodes", lambda *args: None)
    many = "name: x\nmatch: {input: zz}\nturns: [" + "a," * MAX_YAML_NODES + "a]\n"
    assert refusal(many) == f"scenario: YAML of more than {MAX_YAML_NODES} values (a long text is one value)"
    assert refusal("name: x\nturns: " + "[" * 100 + "]" * 100) == "scenario: YAML nested deeper than 64 levels"


def test_invalid_yaml_is_refused() -> None:
    assert refusal("turns: [").startswith("scenario: invalid YAML:")


@pytest.mark.parametrize("c_parser", [True, False], ids=["c-parser", "no-c-parser"])
@pytest.mark.parametrize(
    "head",
    ["%YAML 1.3\n---\n", "%FOO bar\n---\n", 'note: "\\ud800"\n'],
    ids=["yaml-1.3", "unknown-directive", "surrogate-escape"],
)
def test_yaml_the_c_parser_refuses_is_still_counted_before_it_is_built(
    monkeypatch: pytest.MonkeyPatch, head: str, c_parser: bool
) -> None:
    """Python's parser reads texts the C parser refuses (`%YAML 1.3`, an unknown directive, a
    `\\ud800` escape) and the C parser's count stopped at its error: before, the loader built all
    of their values uncounted (100,000 of them through the admin API: seconds on the event loop).
    Without the C parser nothing was counted at all. The loader counts what it reads itself."""
    if not c_parser:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    built = {"composed": 0}
    loader = scenario_module._NoAliasLoader
    compose = loader.compose_node

    def composing(self: object, parent: object, index: object) -> object:
        built["composed"] += 1
        return compose(self, parent, index)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "compose_node", composing)
    many = head + "name: x\nmatch: {input: zz}\nturns: [" + "a," * MAX_YAML_NODES + "a]\n"
    assert refusal(many) == f"scenario: YAML of more than {MAX_YAML_NODES} values (a long text is one value)"
    deep = head + "name: x\nturns: " + "[" * 100 + "]" * 100
    assert refusal(deep) == "scenario: YAML nested deeper than 64 levels"
    assert built == {"composed": 0}  # refused by the count, before the loader read any of it
    # within the bounds, such a text still loads as before (the surrogate then refused by name)
    few = head + "name: x\nmatch: {input: zz}\nturns: [{message: hi}]\n"
    if "ud800" in head:
        assert "lone surrogate" in refusal(few)
    else:
        assert load_scenario(few).name == "x"


# ---- matching ----------------------------------------------------------------------------------------------


def test_named_groups_become_variables_and_priority_orders_the_scenarios() -> None:
    registry = ScenarioRegistry()
    registry.add(
        load_scenario({"name": "low", "match": {"input": "(?i)^hello (?P<who>\\w+)$"}, "turns": message_turn("hi")})
    )
    registry.add(
        load_scenario({"name": "high", "priority": 5, "match": {"input": "(?i)hello"}, "turns": message_turn("hey")})
    )
    found = registry.match(Request(text="Hello Ada", tools=frozenset(), ptc=True, model="m", metadata={}, scope=None))
    assert not isinstance(found, list)
    scenario, variables = found
    assert scenario.name == "high" and variables == {}
    registry.remove("high")
    found = registry.match(Request(text="Hello Ada", tools=frozenset(), ptc=True, model="m", metadata={}, scope=None))
    assert not isinstance(found, list) and found[1] == {"who": "Ada"}


def _request(text: str, tools: frozenset[str] = frozenset()) -> Request:
    return Request(text=text, tools=tools, ptc=True, model="m", metadata={}, scope=None)


def test_scenarios_match_by_input_and_tools_and_report_near_misses() -> None:
    registry = ScenarioRegistry()
    registry.add(
        load_scenario(
            {
                "name": "weather",
                "match": {"input": "(?i)weather in (?P<city>\\w+)", "tools": ["forecast"]},
                "turns": [{"message": "rain"}],
            }
        )
    )
    matched = registry.match(_request("Weather in Oslo?", frozenset({"forecast"})))
    assert not isinstance(matched, list)
    scenario, captures = matched
    assert scenario.name == "weather" and captures["city"] == "Oslo"
    misses = registry.match(_request("Weather in Oslo?"))
    assert isinstance(misses, list) and [m.scenario for m in misses] == ["weather"]
    assert isinstance(misses[0], NearMiss) and misses[0].field == "tools" and "forecast" in misses[0].reason


# ---- the admin API's answer to the same refusals ---------------------------------------------------------


def test_the_admin_api_refuses_bad_scenarios_with_a_400(unit_http: TestClient) -> None:
    json_headers = {"content-type": "application/json"}
    admin = "/_emulator/scenarios"
    assert_envelope(unit_http.post(admin, content=b"{not json", headers=json_headers), 400, "must be a scenario")
    assert_envelope(unit_http.post(admin, json={"yaml": "turns: ["}), 400, "Invalid scenario")
    assert_envelope(unit_http.post(admin, json={"turns": []}), 400, "Invalid scenario")
    reply = unit_http.post(admin, json={"name": "alwaysfails", "turns": message_turn("{{ 1/0 }}")})
    error = assert_envelope(reply, 400, "division by zero", code="invalid_scenario")
    assert "turns.0.message" in error["message"]
    reply = unit_http.post(admin, content='{"name": "sur", "turns": [{"message": "\\ud800"}]}', headers=json_headers)
    assert_envelope(reply, 400, "lone UTF-16 surrogate", code="invalid_scenario")
    assert_envelope(unit_http.delete(f"{admin}/nope"), 404, "No scenario named 'nope'")


@pytest.mark.parametrize("c_parser", [True, False], ids=["c-parser", "no-c-parser"])
def test_a_base_60_number_is_a_string(monkeypatch: pytest.MonkeyPatch, c_parser: bool) -> None:
    """YAML 1.1's base-60 ints and floats (`1:30`, `1:0:0.5`): before, the loader made numbers of
    them, and `construct_yaml_int` multiplied a bigger integer for each `:`-separated part, so
    1 MiB of `1:0:0:...` (500,000 parts) cost quadratic CPU on the event loop the scenario was
    added to. Now the loader reads ints and floats as YAML 1.2 does, without those forms: such a
    value is a string (the count before the loader, by either parser, reads it as one value)."""
    if not c_parser:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    long = ":".join(["1"] + ["0"] * 5000)
    data = scenario_module.load_yaml_without_aliases(
        f"a: 1:30\nb: 1:0:0.5\nc: -2:00\nd: {long}\ne: 0x1f\nf: 1_000\ng: 1.5\nh: .inf\ni: 12\n", 50
    )
    assert data == {
        "a": "1:30",
        "b": "1:0:0.5",
        "c": "-2:00",
        "d": long,
        "e": 31,
        "f": 1000,
        "g": 1.5,
        "h": math.inf,
        "i": 12,
    }
    scenario = load_scenario("name: x\nmatch: {input: zz}\nturns: [{message: 12:30}]\n")
    assert scenario.turns[0].message == "12:30"
    assert yaml.safe_load("a: 1:30") == {"a": 90}  # YAML's own loader is left as it was


@pytest.mark.parametrize("tag", ["!!int 1:0:0", "!!float 1:0:0.5"])
def test_a_base_60_number_tagged_as_a_number_is_refused(tag: str) -> None:
    """Tagged `!!int` or `!!float`, a base-60 value would still be made a number the costly way:
    it is refused by name."""
    message = refusal(f"name: x\nmatch: {{input: zz}}\nnote: {tag}\nturns: [{{message: hi}}]\n")
    assert "base-60 numbers (1:30) are not supported in scenarios" in message, message


def test_a_binary_value_is_refused_by_name() -> None:
    """`!!binary aGVsbG8=` was made bytes, which the message field took as the string "hello"."""
    message = refusal("name: x\nmatch: {input: zz}\nturns: [{message: !!binary aGVsbG8=}]\n")
    assert "binary values (!!binary) are not supported in scenarios" in message, message
