"""Each rule fires through its catalogue entry: one test per entry of `emulator/messages.py`.

A trigger is the smallest input that makes the rule answer, in this tier (the app in-process on
the fake runner, or the function that holds the rule). The test patches the entry to mark what it
makes, runs the trigger, and finds the mark in what the client reads (and, for an error answered
over HTTP, the entry's status, code, type and param in the envelope): so the rule is the one
that fires, and it words its message through the catalogue, not inline. An entry with no trigger
in this tier names the integration test that makes it answer (`ELSEWHERE`), which must exist and
hold the entry's wording.
"""

from __future__ import annotations

import ast
import asyncio
import gzip
import json
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from starlette.requests import Request
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.disconnect import unless_disconnected
from ptc_emulator.api.errors import validation_error
from ptc_emulator.api.proxy import RecordingProxy
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model import ScenarioRegistry, UpstreamClient
from ptc_emulator.emulator.model.upstream import model as upstream_model
from ptc_emulator.emulator.model.upstream.chat import ChatCompletions
from ptc_emulator.emulator.model.upstream.client import UpstreamConfig
from ptc_emulator.emulator.model.upstream.protocol import ToolCall
from ptc_emulator.emulator.model.upstream.teach import CODE_TOOL
from ptc_emulator.emulator.rules import compaction, contract, larkgrammar
from ptc_emulator.emulator.storage import StoredResponse, open_store
from ptc_emulator.emulator.storage.memory import MemoryLeases
from ptc_emulator.emulator.tools import egress, kinds, mcp
from ptc_emulator.emulator.tools import guarded as egress_connections
from ptc_emulator.emulator.tools.egress import McpPolicy
from ptc_emulator.emulator.tools.mcp import McpServerSpec
from ptc_emulator.emulator.tools.mcp_child import ChildGone
from ptc_emulator.emulator.wire.tools import CustomTool, FunctionTool, McpTool
from tests.support import PTC_TOOLS, js
from tests.unit.fake_runner import FakeProgram, FakeRunner

ROOT = Path(__file__).resolve().parents[2]


class Context:
    """What a trigger may use: the app in-process (raw and through the SDK)."""

    def __init__(self, http: TestClient, sdk: openai.OpenAI) -> None:
        self.http = http
        self.sdk = sdk

    def items(self, *items: dict[str, Any], **body: Any) -> Any:
        """A store:false create whose input is `items` (a user message first) and the PTC tools."""
        return self.create(**{"input": [USER, *items], "tools": PTC_TOOLS, "store": False, **body})

    def post(self, path: str, body: Any, **headers: str) -> Any:
        content = json.dumps(body).encode()
        return self.http.post(path, content=content, headers={"content-type": "application/json", **headers})

    def create(self, **body: Any) -> Any:
        return self.post("/v1/responses", {"model": "m", **body})


Trigger = Callable[[Context], object]
TRIGGERS: dict[str, Trigger] = {}


def trigger(*names: str) -> Callable[[Trigger], Trigger]:
    def register(function: Trigger) -> Trigger:
        for name in names:
            assert name not in TRIGGERS, f"two triggers for {name}"
            TRIGGERS[name] = function
        return function

    return register


ELSEWHERE: dict[str, str] = {
    "context_length_exceeded": (
        "tests/conversations/test_context_bound.py::"
        "test_a_conversation_past_the_bound_is_refused_before_its_items_are_read"
    ),
    "too_many_scenarios": (
        "tests/scenarios/test_scenario_reading.py::test_the_scenarios_added_at_run_time_are_bounded"
    ),
    "scenarios_too_large": (
        "tests/scenarios/test_scenario_reading.py::"
        "test_the_bytes_of_the_scenarios_added_at_run_time_are_bounded_and_freed_off_the_loop"
    ),
    "scenario_matching_too_costly": (
        "tests/scenarios/test_matching_off_loop.py::test_a_requests_matches_together_are_bounded"
    ),
    "hosted_matching_too_costly": (
        "tests/scenarios/test_matching_off_loop.py::test_a_hosted_calls_matches_together_are_bounded"
    ),
    "header_fields_too_large": (
        "tests/api/test_connection_edge.py::test_a_request_head_past_the_bound_is_the_431_and_the_connection_closes"
    ),
    "trailer_fields_too_large": (
        "tests/api/test_connection_edge.py::test_a_trailer_field_past_the_bound_is_the_431_and_the_connection_closes"
    ),
    "chunk_framing_too_large": (
        "tests/api/test_connection_edge.py::test_chunks_of_one_byte_behind_long_extensions_are_the_431_early"
    ),
    "head_timeout": (
        "tests/api/test_connection_edge.py::test_a_head_sent_a_byte_at_a_time_is_the_408_and_the_connection_closes"
    ),
    "body_timeout": (
        "tests/api/test_connection_edge.py::test_a_body_sent_a_byte_at_a_time_is_the_408_and_the_connection_closes"
    ),
    "upgrade_not_supported": (
        "tests/api/test_connection_edge.py::test_an_upgrade_to_another_protocol_is_refused_not_served_without_its_body"
    ),
    "invalid_http_request": (
        "tests/api/test_connection_edge.py::test_bytes_that_are_not_http_are_the_400_in_the_envelope"
    ),
    "warm_up_failed": (
        "tests/usage/test_ready_before_the_tokenizer.py::test_a_failed_warm_up_is_a_503_naming_it_on_every_request"
    ),
    "database_away": (
        "tests/replicas/test_replicas.py::test_with_the_database_away_health_and_requests_fail_at_once_with_a_503"
    ),
    "database_busy": (
        "tests/replicas/test_pool_lanes.py::test_a_request_that_gives_up_waiting_for_a_connection_is_told_they_are_busy"
    ),
    "too_many_queued": "tests/streaming/test_websocket_frames.py::test_the_creates_waiting_on_one_socket_are_bounded",
    "too_many_queued_chars": "tests/streaming/test_websocket_frames.py::test_the_text_of_waiting_creates_is_bounded",
    "websocket_handshake_invalid": (
        "tests/streaming/test_websocket_handshake.py::"
        "test_an_upgrade_the_websocket_layer_refuses_is_the_400_in_the_envelope"
    ),
    "websocket_version_unsupported": (
        "tests/streaming/test_websocket_handshake.py::test_an_upgrade_to_another_version_is_the_426_naming_version_13"
    ),
    "host_missing": (
        "tests/api/test_admin_guard.py::test_a_repeated_host_or_origin_or_a_missing_http_1_1_host_is_refused"
    ),
    "socket_text_not_utf8": (
        "tests/streaming/test_websocket_fragments.py::"
        "test_a_text_message_not_utf_8_is_closed_with_1007_and_not_logged_as_the_servers_error"
    ),
    "socket_message_too_fragmented": (
        "tests/streaming/test_websocket_fragments.py::test_the_frames_of_one_message_are_bounded_empty_ones_counted"
    ),
    "approval_request_mismatch": (
        "tests/tools/test_mcp_approvals.py::test_an_approval_request_sent_back_changed_is_refused"
    ),
    "direct_approval_request_not_issued": (
        "tests/tools/test_mcp_approvals.py::test_a_direct_approval_request_the_server_never_issued_is_refused"
    ),
    "approval_request_not_issued": (
        "tests/tools/test_mcp_approvals.py::test_a_finished_programs_approval_request_sent_back_changed_is_refused"
    ),
    "sealed_results_too_large": (
        "tests/tools/test_mcp_continuable.py::test_results_past_what_a_client_can_send_back_end_the_program"
    ),
    "hosted_calls_out_of_time": (
        "tests/tools/test_mcp_together.py::test_calls_past_the_programs_time_limit_together_end_the_program_incomplete"
    ),
    "sealed_result_missing": (
        "tests/tools/test_mcp_single_flight.py::test_a_replay_without_the_sealed_result_is_refused_not_called_again"
    ),
    "visible_result_too_large": (
        "tests/tools/test_mcp_continuable.py::test_visible_mcp_results_are_bounded_so_the_response_can_be_continued"
    ),
    "visible_listing_too_large": (
        "tests/tools/test_mcp_continuable.py::test_a_listing_past_the_bound_fails_as_a_listing_that_cannot_be_read"
    ),
}
"""Entries whose rule needs what this tier does not start (V8, a server, a socket): the
integration test (`path::test`) that makes each answer."""


# ---- the harness ---------------------------------------------------------------------------------------


def _mark(name: str) -> str:
    return f"[{name}]"


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], list[EmulatorError | str]]]:
    def mark(name: str) -> list[EmulatorError | str]:
        entry = messages.CATALOGUE[name]
        made: list[EmulatorError | str] = []

        def marking(*args: Any, **kwargs: Any) -> EmulatorError | str:
            result = entry.function(*args, **kwargs)
            if isinstance(result, EmulatorError):
                result.message = _mark(name) + result.message
                result.args = (result.message,)
            else:
                result = _mark(name) + result
            made.append(result)
            return result

        monkeypatch.setattr(messages, name, marking)
        return made

    yield mark


def _answered(observed: object) -> bool:
    """Whether `observed` is an HTTP response (the test client's)."""
    return hasattr(observed, "status_code") and hasattr(observed, "json") and hasattr(observed, "text")


def _read(observed: object) -> str:
    if _answered(observed):
        return str(observed.text)
    if isinstance(observed, openai.APIStatusError):
        return json.dumps(observed.body)
    if isinstance(observed, EmulatorError):
        return json.dumps(observed.body())
    if isinstance(observed, BaseException):
        return str(observed)
    if isinstance(observed, str):
        return observed
    return json.dumps(observed, default=str)


CODE = "const s = await tools.add({a: 1, b: 2});\ntext(String(s))"
"""A program that calls `add` once, then finishes with its result."""
PROGRAM = js(CODE)
USER = {"role": "user", "content": "hi"}
AGAIN = {"role": "user", "content": js("text('again')")}
"""A later user message with an inline program: the scripted model plays it."""


@pytest.fixture(autouse=True)
def _programs(fake_runner: FakeRunner) -> None:
    fake_runner.define(CODE, FakeProgram(batches=[[("add", {"a": 1, "b": 2})]], finish=lambda out: out[-1]))


@pytest.mark.parametrize("name", list(messages.CATALOGUE))
def test_the_rule_fires_through_its_entry(
    name: str, unit_http: TestClient, unit_sdk: openai.OpenAI, marked: Callable[[str], list[EmulatorError | str]]
) -> None:
    if name in ELSEWHERE:
        pytest.skip(f"answered in the integration tier: {ELSEWHERE[name]}")
    assert name in TRIGGERS, f"messages.{name} has no trigger here and no integration test in ELSEWHERE"
    made = marked(name)
    observed = TRIGGERS[name](Context(unit_http, unit_sdk))
    assert made, f"the trigger of {name} did not reach messages.{name}"
    read = _read(observed)
    assert _mark(name) in read, f"what the client reads does not come from messages.{name}:\n{read}"
    last = made[-1]
    if _answered(observed) and isinstance(last, EmulatorError) and observed.status_code >= 400:
        assert observed.status_code == last.status
        assert observed.json()["error"] == last.body()["error"]


def test_every_entry_has_one_trigger_or_one_integration_test() -> None:
    assert not set(TRIGGERS) & set(ELSEWHERE)
    assert set(TRIGGERS) | set(ELSEWHERE) == set(messages.CATALOGUE), sorted(
        set(messages.CATALOGUE) ^ (set(TRIGGERS) | set(ELSEWHERE))
    )


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_the_integration_test_named_exists_and_holds_the_wording(name: str) -> None:
    path, _, test = ELSEWHERE[name].partition("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert test in defined, f"{ELSEWHERE[name]} does not exist"
    made = messages.CATALOGUE[name].sample()
    wording = made.message if isinstance(made, EmulatorError) else made
    runs = []  # every five words in a row of the wording's fixed text
    for part in re.split(r"<[a-z_]+>", wording):
        words = part.split()
        runs += [" ".join(words[i : i + 5]) for i in range(len(words) - 4)]
    assert any(run in source for run in runs), f"{path} holds no five words in a row of messages.{name}"


# ==== the triggers, by surface ==========================================================================

# ---- stored responses and items --------------------------------------------------------------------


@trigger("previous_response_not_found")
def _(c: Context) -> object:
    return c.create(input="hi", previous_response_id="resp_nope")


def _sdk_items(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


def paused(c: Context) -> list[dict[str, Any]]:
    """The replay after the program's first pause: the user message, the program, its call and
    the call's output."""
    response = c.sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    program, call = _sdk_items(response)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
    return [{"role": "user", "content": PROGRAM}, program, call, output]


def finished(c: Context) -> list[dict[str, Any]]:
    """The replay once the program finished: `paused(c)` and the response that ends it."""
    items = paused(c)
    done = c.sdk.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    return [*items, *_sdk_items(done)]


def replay(c: Context, items: list[dict[str, Any]], **body: Any) -> Any:
    return c.create(**{"input": items, "tools": PTC_TOOLS, "store": False, **body})


def call(call_id: str = "call_1", **fields: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "echo", "arguments": "{}", **fields}


def output(call_id: str = "call_1", **fields: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "1", **fields}


def by_program(program: str = "call_nobody") -> dict[str, Any]:
    return {"caller": {"type": "program", "caller_id": program}}


def approval_request(item_id: str = "mcpr_1", **fields: Any) -> dict[str, Any]:
    return {
        "type": "mcp_approval_request",
        "id": item_id,
        "name": "t",
        "server_label": "s",
        "arguments": "{}",
        **fields,
    }


def approval_response(request_id: str = "mcpr_1", **fields: Any) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": True, **fields}


def search_call(call_id: str | None = "ts_1", execution: str = "client") -> dict[str, Any]:
    found = {"type": "tool_search_call", "execution": execution, "arguments": {"query": "x"}, "status": "completed"}
    return {**found, "call_id": call_id} if call_id else found


def search_output(call_id: str | None = "ts_1", execution: str = "client") -> dict[str, Any]:
    found = {"type": "tool_search_output", "execution": execution, "tools": [], "status": "completed"}
    return {**found, "call_id": call_id} if call_id else found


def function_tool(**fields: Any) -> FunctionTool:
    return FunctionTool.model_validate({"type": "function", "name": "f", **fields})


# ---- request parameters ----------------------------------------------------------------------------


@trigger("missing_parameter")
def _(c: Context) -> object:
    return c.post("/v1/responses", {"input": "hi"})


@trigger("unknown_parameter")
def _(c: Context) -> object:
    return c.create(input="hi", context_management=[{"type": "compaction", "colour": 1}])


@trigger("invalid_value")
def _(c: Context) -> object:
    return c.create(input="hi", context_management=[{"type": "summary"}])


@trigger("expected_an_object")
def _(c: Context) -> object:
    # The Responses body admits only objects there; the rule guards what reaches it otherwise.
    with pytest.raises(EmulatorError) as caught:
        compaction.compact_threshold(["compaction"])
    return caught.value


@trigger("compact_threshold_invalid")
def _(c: Context) -> object:
    return c.create(input="hi", context_management=[{"type": "compaction", "compact_threshold": 0}])


@trigger("saved_prompts")
def _(c: Context) -> object:
    return c.create(input="hi", prompt={"id": "pmpt_1"})


@trigger("conversation_with_previous_response")
def _(c: Context) -> object:
    return c.create(input="hi", conversation="conv_1", previous_response_id="resp_1")


@trigger("background_needs_store")
def _(c: Context) -> object:
    return c.create(input="hi", background=True, store=False)


@trigger("completion_window_needs_background")
def _(c: Context) -> object:
    return c.create(input="hi", background_options={"completion_window": "2h"})


@trigger("completion_window_with_stream")
def _(c: Context) -> object:
    return c.create(input="hi", background=True, stream=True, background_options={"completion_window": "2h"})


@trigger("completion_window_needs_standard")
def _(c: Context) -> object:
    return c.create(input="hi", background=True, service_tier="flex", background_options={"completion_window": "8h"})


# ---- tools and tool search -------------------------------------------------------------------------


@trigger("duplicate_tool_name")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[{"type": "function", "name": "f"}, {"type": "function", "name": "f"}])


@trigger("invalid_function_schema")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": {"type": "nope"}}])


@trigger("invalid_format_schema")
def _(c: Context) -> object:
    text = {"format": {"type": "json_schema", "name": "answer", "schema": {"type": 5}}}
    return c.post("/v1/responses", {"model": "m", "input": "hi", "text": text})


@trigger("schema_too_large")
def _(c: Context) -> object:
    """A schema of 257 distinct patterns: counted, and refused before the meta-schema check."""
    many = {"type": "object", "patternProperties": {f"^p{i}$": {} for i in range(257)}}
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": many}])


@trigger("strict_schema_allows_more")
def _(c: Context) -> object:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": loose, "strict": True}])


@trigger("strict_schema_misses_required")
def _(c: Context) -> object:
    partial = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": partial, "strict": True}])


@trigger("strict_schema_not_object")
def _(c: Context) -> object:
    listed = {"type": "array", "items": {"type": "string"}}
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": listed, "strict": True}])


@trigger("tool_choice_name_not_found")
def _(c: Context) -> object:
    return c.create(input="hi", tools=PTC_TOOLS, tool_choice={"type": "function", "name": "nope"})


@trigger("tool_choice_not_found")
def _(c: Context) -> object:
    return c.create(input="hi", tool_choice={"type": "programmatic_tool_calling"})


@trigger("invalid_grammar")
def _(c: Context) -> object:
    grammar = {"type": "grammar", "syntax": "regex", "definition": "("}
    return c.create(input="hi", tools=[{"type": "custom", "name": "c", "format": grammar}])


@trigger("lark_grammar_too_costly")
def _(c: Context) -> object:
    budget, contract.LARK_COMPILE_BUDGET = contract.LARK_COMPILE_BUDGET, 100_000  # reached sooner, counted alike
    contract._cached_grammar.cache_clear()  # compiled afresh under this budget, whatever ran before
    try:
        chain = "\n".join(f'r{i}: r{i + 1} "a" | r{i + 1} "b"' for i in range(100)) + '\nr100: "z"\nstart: r0'
        grammar = {"type": "grammar", "syntax": "lark", "definition": chain}
        return c.create(input="hi", tools=[{"type": "custom", "name": "c", "format": grammar}])
    finally:
        contract.LARK_COMPILE_BUDGET = budget
        contract._cached_grammar.cache_clear()


def _lark_tool(c: Context, definition: str) -> object:
    grammar = {"type": "grammar", "syntax": "lark", "definition": definition}
    return c.create(input="hi", tools=[{"type": "custom", "name": "c", "format": grammar}])


@trigger("lark_grammar_too_large")
def _(c: Context) -> object:
    return _lark_tool(c, "start: " + " ".join('"a"?' for _ in range(30)))


@trigger("lark_grammar_too_deep")
def _(c: Context) -> object:
    return _lark_tool(c, "start: " + "[" * 500 + '"a"' + "]" * 500)


@trigger("lark_import_refused")
def _(c: Context) -> object:
    return _lark_tool(c, "start: X\n%import .elsewhere.X")


@trigger("lark_terminal_not_re2")
def _(c: Context) -> object:
    return _lark_tool(c, "start: /(?<=a)b/")


@trigger("not_json")
def _(c: Context) -> object:
    return contract.check_output(function_tool(output_schema={"type": "object"}), "call_1", "not json")


@trigger("nested_too_deep")
def _(c: Context) -> object:
    return contract.check_output(function_tool(output_schema={"type": "array"}), "call_1", "[" * 100_000)


@trigger("schema_invalid")
def _(c: Context) -> object:
    """Over HTTP: an output checked against a schema whose `$ref` leads nowhere is reported, never a 500."""
    tools = [{**PTC_TOOLS[0], "output_schema": {"$ref": "#/$defs/nowhere"}}, *PTC_TOOLS[1:]]
    answered = replay(c, paused(c), tools=tools)
    assert answered.status_code == 200
    return answered.headers["x-ptc-emulator-contract-warning"]


@trigger("contract_broken")
def _(c: Context) -> object:
    violation = contract.check_output(function_tool(output_schema={"type": "object"}), "call_1", "[]")
    assert violation is not None
    return violation.describe()


def _custom(syntax: str, definition: str) -> CustomTool:
    grammar = {"type": "grammar", "syntax": syntax, "definition": definition}
    return CustomTool.model_validate({"type": "custom", "name": "c", "format": grammar})


@trigger("regex_mismatch")
def _(c: Context) -> object:
    return contract.check_input(_custom("regex", "[a-z]+"), "call_1", "123")


@trigger("pattern_too_many_property_classes")
def _(c: Context) -> object:
    properties = {"a": {"type": "string", "pattern": "(?i)(?:" + "|".join([r"\PL"] * 17) + ")"}}
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": properties}}
    return c.create(input="hi", tools=[tool])


@trigger("grammar_too_large")
def _(c: Context) -> object:
    grammar = {"type": "grammar", "syntax": "regex", "definition": "(?i)[a-z\\x{100}-\\x{3000}]{1000}"}
    return c.create(input="hi", tools=[{"type": "custom", "name": "c", "format": grammar}])


@trigger("regex_too_costly")
def _(c: Context) -> object:
    async def on_the_loop() -> contract.Violation | None:
        return contract.check_input(_custom("regex", "((a|a)+){1,500}!x"), "call_1", "a" * 10_000)

    return asyncio.run(on_the_loop())


@trigger("lark_too_costly")
def _(c: Context) -> object:
    budget, contract.LARK_CALL_BUDGET = contract.LARK_CALL_BUDGET, 100_000  # reached sooner, counted alike
    try:
        return contract.check_input(_custom("lark", 'start: x\nx: "a" | x x'), "call_1", "a" * 200)
    finally:
        contract.LARK_CALL_BUDGET = budget


@trigger("lark_scan_too_costly")
def _(c: Context) -> object:
    factor, larkgrammar.SCAN_BUDGET_FACTOR = larkgrammar.SCAN_BUDGET_FACTOR, 0  # reached at once, counted alike
    try:
        return contract.check_input(_custom("lark", 'start: /a+/ "b"'), "call_1", "a" * 50 + "b")
    finally:
        larkgrammar.SCAN_BUDGET_FACTOR = factor


@trigger("lark_mismatch")
def _(c: Context) -> object:
    return contract.check_input(_custom("lark", 'start: "a"'), "call_1", "b")


# ---- conversation items ----------------------------------------------------------------------------


@trigger("no_tool_output")
def _(c: Context) -> object:
    return c.items(call())


@trigger("no_call_for_output")
def _(c: Context) -> object:
    return c.items(output())


@trigger("output_answers_another_kind")
def _(c: Context) -> object:
    return c.items(call(), {"type": "custom_tool_call_output", "call_id": "call_1", "output": "1"})


@trigger("output_caller_changed")
def _(c: Context) -> object:
    return c.items(call(), output(**by_program("call_p")))


@trigger("duplicate_item")
def _(c: Context) -> object:
    return c.items(call(), call(), output())


@trigger("duplicate_answer")
def _(c: Context) -> object:
    return c.items(call(), output(), output())


@trigger("not_a_string")
def _(c: Context) -> object:
    return c.create(input="hi", include=[None])


@trigger("assistant_part_invalid")
def _(c: Context) -> object:
    return c.create(input=[{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}, USER])


@trigger("input_part_invalid")
def _(c: Context) -> object:
    return c.create(input=[{"role": "user", "content": [{"type": "output_text", "text": "x"}]}, USER])


@trigger("duplicate_item_id")
def _(c: Context) -> object:
    return c.items(approval_request(), approval_request())


@trigger("duplicate_approval_response")
def _(c: Context) -> object:
    return c.items(approval_request(), approval_response(), approval_response())


@trigger("call_without_program")
def _(c: Context) -> object:
    return c.items(call(**by_program()), output(**by_program()))


@trigger("approval_without_program")
def _(c: Context) -> object:
    return c.items(approval_request(**by_program()))


@trigger("item_without_program")
def _(c: Context) -> object:
    mcp_call = {"type": "mcp_call", "id": "mcp_1", "name": "t", "server_label": "s", "arguments": "{}"}
    return c.items({**mcp_call, **by_program()})


@trigger("call_of_finished_program")
def _(c: Context) -> object:
    items = finished(c)
    program = items[1]["call_id"]
    return replay(c, [*items, call("call_late", **by_program(program)), output("call_late", **by_program(program))])


@trigger("approval_of_finished_program")
def _(c: Context) -> object:
    items = finished(c)
    return replay(c, [*items, approval_request(**by_program(items[1]["call_id"]))])


@trigger("no_user_message")
def _(c: Context) -> object:
    return c.create(input=[{"role": "assistant", "content": "hello"}], store=False)


@trigger("program_output_missing")
def _(c: Context) -> object:
    first, second = paused(c)[1], paused(c)[1]
    return replay(c, [USER, first, second])


@trigger("no_program_for_output")
def _(c: Context) -> object:
    program_output = next(i for i in finished(c) if i.get("type") == "program_output")
    return c.items(program_output)


@trigger("program_output_modified")
def _(c: Context) -> object:
    items = finished(c)
    at = next(n for n, i in enumerate(items) if i.get("type") == "program_output")
    items[at]["result"] = "300"
    return replay(c, [*items, AGAIN])


@trigger("approval_response_missing")
def _(c: Context) -> object:
    user, program, *_ = paused(c)
    return replay(c, [user, program, approval_request(**by_program(program["call_id"]))])


@trigger("approval_request_not_found")
def _(c: Context) -> object:
    return c.items(approval_response())


@trigger("approval_caller_changed")
def _(c: Context) -> object:
    return c.items(approval_request(), approval_response(**by_program()))


@trigger("no_search_output")
def _(c: Context) -> object:
    return c.items(search_call())


@trigger("search_call_without_call_id")
def _(c: Context) -> object:
    return c.items(search_call(None))


@trigger("search_output_without_call_id")
def _(c: Context) -> object:
    return c.items(search_output(None))


@trigger("search_while_program_runs")
def _(c: Context) -> object:
    return replay(c, [*paused(c), search_call(), search_output()])


@trigger("no_search_call_for_output")
def _(c: Context) -> object:
    return c.items(search_output("ts_9"))


@trigger("search_execution_changed")
def _(c: Context) -> object:
    return c.items(search_call(), search_output(execution="server"))


@trigger("compaction_trigger_not_last")
def _(c: Context) -> object:
    return c.create(input=[{"type": "compaction_trigger"}, USER], store=False)


@trigger("compaction_unverified")
def _(c: Context) -> object:
    return c.create(input=[{"type": "compaction", "encrypted_content": "forged"}, USER], store=False)


# ---- programs and sealed content --------------------------------------------------------------------


@trigger("tools_changed")
def _(c: Context) -> object:
    return c.create(input=paused(c), tools=[t for t in PTC_TOOLS if t.get("name") != "echo"], store=False)


@trigger("call_not_issued_by_finished_program")
def _(c: Context) -> object:
    items = finished(c)
    at = next(n for n, i in enumerate(items) if i.get("type") == "program_output")
    caller = items[2]["caller"]
    forged = [call("call_forged", caller=caller), output("call_forged", caller=caller)]
    return replay(c, [*items[:at], *forged, *items[at:], AGAIN])


@trigger("call_not_issued_here")
def _(c: Context) -> object:
    items = paused(c)
    items[2]["call_id"] = items[3]["call_id"] = "call_forged"
    return replay(c, items)


@trigger("encrypted_content_unverified")
def _(c: Context) -> object:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "forged"}
    return replay(c, [{"role": "user", "content": PROGRAM}, reasoning])


@trigger("reasoning_missing")
def _(c: Context) -> object:
    scenario = {
        "name": "triggers__think_first",
        "match": {"input": "think first"},
        "turns": [{"reasoning": "Add them in a program.", "program": CODE}, {"message": "{{ result }}"}],
    }
    c.post("/_emulator/scenarios", scenario)
    response = c.sdk.responses.create(model="m", input="think first", tools=PTC_TOOLS, store=False)  # type: ignore[arg-type]
    _, program, paused_call = _sdk_items(response)
    answer = output(paused_call["call_id"], caller=paused_call["caller"], output="3")
    return replay(c, [{"role": "user", "content": "think first"}, program, paused_call, answer])


@trigger("fingerprint_invalid")
def _(c: Context) -> object:
    items = paused(c)
    items[1]["fingerprint"] = items[1]["fingerprint"][:-4] + "AAAA"
    return replay(c, items)


@trigger("fingerprint_of_another_program")
def _(c: Context) -> object:
    items, other = paused(c), paused(c)
    items[1]["fingerprint"] = other[1]["fingerprint"]
    return replay(c, items)


@trigger("program_code_modified")
def _(c: Context) -> object:
    items = paused(c)
    items[1]["code"] = items[1]["code"].replace("b: 2", "b: 3")
    return replay(c, items)


@trigger("program_calls_modified")
def _(c: Context) -> object:
    items = paused(c)
    items[2]["arguments"] = json.dumps({"a": 1, "b": 20})
    return replay(c, items)


@trigger("program_answered_too_much")
def _(c: Context) -> object:
    items = paused(c)
    program, caller = items[1]["call_id"], items[2]["caller"]
    extra = c.http.app.state.emulator.signer.program_call_id(program, 2)  # a call it never reaches
    arguments = json.dumps({"a": 3, "b": 3})
    return replay(
        c, [*items, call(extra, name="add", arguments=arguments, caller=caller), output(extra, caller=caller)]
    )


@trigger("contract_violation")
def _(c: Context) -> object:
    scenario = {"name": "triggers__strict", "match": {"input": "strict"}, "strict_contract": True}
    c.post("/_emulator/scenarios", {**scenario, "turns": [{"program": CODE}, {"message": "{{ result }}"}]})
    tools = [{**PTC_TOOLS[0], "output_schema": {"type": "object"}}, *PTC_TOOLS[1:]]
    response = c.sdk.responses.create(model="m", input="strict", tools=tools, store=False)  # type: ignore[arg-type]
    program, paused_call = _sdk_items(response)
    answer = output(paused_call["call_id"], caller=paused_call["caller"], output="3")
    return replay(c, [{"role": "user", "content": "strict"}, program, paused_call, answer], tools=tools)


# ---- stored responses, conversations and pages ----------------------------------------------------


def stored(c: Context, response_id: str, status: str = "completed", output: list[Any] | None = None) -> str:
    """A response put in the store as it is (its status and output as given)."""
    body = {"id": response_id, "object": "response", "status": status, "output": output or []}
    c.http.app.state.emulator.store.responses.put(StoredResponse(response_id, body, [], None))
    return response_id


def conversation(c: Context) -> str:
    return str(c.post("/v1/conversations", {}).json()["id"])


@trigger("response_not_found")
def _(c: Context) -> object:
    return c.http.get("/v1/responses/resp_nope")


@trigger("previous_response_unfinished")
def _(c: Context) -> object:
    return c.create(input="hi", previous_response_id=stored(c, "resp_triggers_unfinished", "in_progress"))


@trigger("item_not_found")
def _(c: Context) -> object:
    return c.create(input=[{"type": "item_reference", "id": "msg_nope"}])


@trigger("item_not_input")
def _(c: Context) -> object:
    odd = {"type": "message", "id": "msg_triggers_odd", "role": "wizard", "content": 7}
    stored(c, "resp_triggers_odd", output=[odd])
    return c.create(input=[{"type": "item_reference", "id": "msg_triggers_odd"}])


@trigger("no_input_item_after")
def _(c: Context) -> object:
    response = c.create(input=PROGRAM, tools=PTC_TOOLS).json()
    return c.http.get(f"/v1/responses/{response['id']}/input_items", params={"after": "msg_nope"})


@trigger("ambiguous_page_cursor")
def _(c: Context) -> object:
    """Two input items with one id, kept before ids were held unique (straight into the store)."""
    twins = [{"type": "message", "id": "msg_twin", "role": "user", "content": "a"}] * 2
    body = {"id": "resp_triggers_twins", "object": "response", "status": "completed", "output": []}
    c.http.app.state.emulator.store.responses.put(StoredResponse("resp_triggers_twins", body, twins, None))
    return c.http.get("/v1/responses/resp_triggers_twins/input_items", params={"after": "msg_twin"})


@trigger("conversation_not_found")
def _(c: Context) -> object:
    return c.http.get("/v1/conversations/conv_nope")


@trigger("conversation_item_not_found")
def _(c: Context) -> object:
    return c.http.get(f"/v1/conversations/{conversation(c)}/items/msg_nope")


@trigger("no_conversation_item_after")
def _(c: Context) -> object:
    return c.http.get(f"/v1/conversations/{conversation(c)}/items", params={"after": "msg_nope"})


@trigger("conversation_locked")
def _(c: Context) -> object:
    """The one write of a continuation, at a version another write has moved on from."""
    with pytest.raises(EmulatorError) as caught:
        c.http.app.state.emulator.engine.conversations.record(conversation(c), [], [], expected=-1)
    return caught.value


@trigger("no_listed_after")
def _(c: Context) -> object:
    return c.http.get("/v1/agents", params={"after": "agent_nope"}, headers={"OpenAI-Beta": "agents=v1"})


# ---- tools and tool search (the toolset) ------------------------------------------------------------


def namespace(name: str = "n", *members: str) -> dict[str, Any]:
    tools = [{"type": "function", "name": member} for member in members or ("f",)]
    return {"type": "namespace", "name": name, "description": "d", "tools": tools}


SEARCH = {"type": "tool_search"}


@trigger("duplicate_namespace")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[namespace(), namespace()])


@trigger("one_tool_search")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[SEARCH, SEARCH])


@trigger("namespace_reserved")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[namespace("n", "n")])


@trigger("function_and_namespace")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[{"type": "function", "name": "n"}, namespace("n")])


@trigger("deferred_needs_search")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "defer_loading": True}])


@trigger("missing_namespace")
def _(c: Context) -> object:
    return c.items(call(name="f"), output(), tools=[namespace("n", "f")])


@trigger("search_output_invalid_tool")
def _(c: Context) -> object:
    return c.items(search_call(), {**search_output(), "tools": [{"type": "function"}]}, tools=[SEARCH])


@trigger("search_output_loads_kind")
def _(c: Context) -> object:
    return c.items(search_call(), {**search_output(), "tools": [SEARCH]}, tools=[SEARCH])


@trigger("search_output_undeclared")
def _(c: Context) -> object:
    loaded = {**search_output("ts_1", "server"), "tools": [{"type": "function", "name": "zzz"}]}
    return c.items(search_call("ts_1", "server"), loaded, tools=[SEARCH])


def _refused(kind: kinds.ToolKind, arguments: Any) -> object:
    return kind.check(kinds.Binding("t", kind, None, True, True), arguments)


@trigger("takes_a_string")
def _(c: Context) -> object:
    return _refused(kinds.CUSTOM, {"text": "hi"})


@trigger("unknown_field")
def _(c: Context) -> object:
    return _refused(kinds.SHELL, {"commands": ["ls"], "cwd": "/"})


@trigger("missing_field")
def _(c: Context) -> object:
    return _refused(kinds.SHELL, {})


@trigger("invalid_field")
def _(c: Context) -> object:
    return _refused(kinds.SHELL, {"commands": "ls"})


@trigger("unemulated_tool")
def _(c: Context) -> object:
    return kinds.Unemulated("image_generation").message("image_generation")


@trigger("not_run_here")
def _(c: Context) -> object:
    return kinds.Unemulated("image_generation").message("image_generation")


# ---- MCP servers ------------------------------------------------------------------------------------


def listed(c: Context, server_url: str | None) -> Any:
    """A program's first run with an MCP server's tools: the server is listed first."""
    tool = {"type": "mcp", "server_label": "docs", "allowed_callers": ["programmatic"]}
    return c.create(input=PROGRAM, tools=[*PTC_TOOLS, {**tool, "server_url": server_url} if server_url else tool])


@trigger("mcp_listing_error", "no_server")
def _(c: Context) -> object:
    return listed(c, None)


@trigger("listing_failed", "mcp_url_scheme")
def _(c: Context) -> object:
    return listed(c, "ftp://docs.example/mcp")


@trigger("mcp_url_no_host")
def _(c: Context) -> object:
    return listed(c, "http:///mcp")


@trigger("mcp_address_refused")
def _(c: Context) -> object:
    return listed(c, "http://127.0.0.1:9/mcp")  # refused before any connection


@trigger("mcp_is_the_emulator")
def _(c: Context) -> object:
    return listed(c, "http://127.0.0.1:80/mcp")  # the port the test client reaches the app on


def _failed(error: BaseException) -> object:
    """What a listing or call that failed below MCP reports, for `error`."""
    return mcp._http_error(error, McpPolicy())


@trigger("mcp_http_status")
def _(c: Context) -> object:
    request = httpx2.Request("POST", "https://docs.example/mcp")
    return _failed(httpx2.HTTPStatusError("503", request=request, response=httpx2.Response(503, request=request)))


@trigger("mcp_no_answer")
def _(c: Context) -> object:
    return _failed(TimeoutError())


@trigger("mcp_no_connection")
def _(c: Context) -> object:
    return _failed(httpx2.ConnectTimeout("connect"))


@trigger("mcp_unreachable")
def _(c: Context) -> object:
    return _failed(ConnectionRefusedError())


@trigger("mcp_not_mcp")
def _(c: Context) -> object:
    return _failed(ValueError("not JSON-RPC"))


@trigger("mcp_client_gone")
def _(c: Context) -> object:
    return _failed(ChildGone())


@trigger("mcp_answer_too_large")
def _(c: Context) -> object:
    with pytest.raises(egress.AnswerTooLarge) as caught:
        egress._Budget(10).spend(11)
    return caught.value


@trigger("mcp_compressed")
def _(c: Context) -> object:
    async def gzipped(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-encoding": "gzip"}, content=b"")

    async def run() -> None:
        client = egress_connections.guarded_client(McpPolicy())
        client._transport = egress_connections._Identity(httpx2.MockTransport(gzipped))
        async with client:
            await client.get("https://docs.example/mcp")

    with pytest.raises(egress.AnswerCompressed) as caught:
        asyncio.run(run())
    return caught.value


@trigger("mcp_no_address")
def _(c: Context) -> object:
    async def nothing(*args: Any, **kwargs: Any) -> list[Any]:
        return []

    with pytest.MonkeyPatch.context() as patch, pytest.raises(egress.EgressRefused) as caught:
        patch.setattr(anyio, "getaddrinfo", nothing)
        asyncio.run(egress_connections._Backend(McpPolicy()).connect_tcp("docs.example", 443))
    return caught.value


@trigger("mcp_tcp_only")
def _(c: Context) -> object:
    with pytest.raises(egress.EgressRefused) as caught:
        asyncio.run(egress_connections._Backend(McpPolicy()).connect_unix_socket("/run/mcp.sock"))
    return caught.value


@trigger("mcp_tool_name_invalid")
def _(c: Context) -> object:
    return mcp.name_problem(["lookup", "a.b"])


@trigger("mcp_tool_name_twice")
def _(c: Context) -> object:
    return mcp.name_problem(["lookup", "lookup"])


@trigger("mcp_unknown_tool")
def _(c: Context) -> object:
    tool = McpTool.model_validate({"type": "mcp", "server_label": "docs"})
    return asyncio.run(mcp.call_tool(tool, McpServerSpec(), "nope", {}, McpPolicy())).error


@trigger("mcp_tool_failed")
def _(c: Context) -> object:
    return mcp.CallResult(error={"type": "mcp_tool_execution_error", "content": []}).message()


@trigger("mcp_unknown_error")
def _(c: Context) -> object:
    return mcp.CallResult(error={"type": "http_error"}).message()


# ---- scenarios (the scripted model) ------------------------------------------------------------------


def play(c: Context, name: str, turns: list[Any], tools: list[Any] | None = None, **scenario: Any) -> Any:
    """A scenario of `turns` (matched by its own name), and a first request that plays it."""
    added = c.post("/_emulator/scenarios", {"name": name, "match": {"input": f"^{name}$"}, "turns": turns, **scenario})
    assert added.status_code == 201, added.text
    return c.create(input=name, tools=tools if tools is not None else PTC_TOOLS)


def played(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return list(response.json()["output"])


HOSTED_SHELL = {"type": "shell", "environment": {"type": "container_auto"}}
INTERPRETER = {"type": "code_interpreter", "container": {"type": "auto"}}


def docs_server(**fields: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "docs", "allowed_callers": ["direct"], **fields}


@trigger("no_scenario_matched")
def _(c: Context) -> object:
    return c.create(input="nothing is scripted for this")


@trigger("inline_cannot_run", "tool_choice_conflict")
def _(c: Context) -> object:
    return c.create(input=PROGRAM, tools=PTC_TOOLS, tool_choice="none")


@trigger("scenario_exhausted")
def _(c: Context) -> object:
    (looked_up,) = played(play(c, "exhausted", [{"call": {"name": "lookup", "arguments": {}}}]))
    answer = output(looked_up["call_id"])
    return replay(c, [{"role": "user", "content": "exhausted"}, looked_up, answer])


@trigger("scenario_mismatch")
def _(c: Context) -> object:
    play(c, "mismatch", [{"program": CODE}, {"message": "done"}])
    return replay(c, [{"role": "user", "content": "mismatch"}, call(name="lookup"), output()])


@trigger("scenario_turn", "arguments_not_object")
def _(c: Context) -> object:
    return play(c, "not_an_object", [{"call": {"name": "lookup", "arguments": "[1]"}}])


@trigger("arguments_not_json")
def _(c: Context) -> object:
    return play(c, "not_json", [{"call": {"name": "lookup", "arguments": "{{ 'not' }} json"}}])


@trigger("template_error")
def _(c: Context) -> object:
    # a name a request may give (a template that reads none and fails is refused when added)
    return play(c, "template_error", [{"message": "{{ output.nowhere.deeper }}"}])


@trigger("template_failed")
def _(c: Context) -> object:
    return play(c, "template_failed", [{"message": "{{ 10 // (input | length - 15) }}"}])  # its name is 15 long


def _added(c: Context, message: str) -> Any:
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "^x$"}, "turns": [{"message": message}]})


@trigger("template_too_long")
def _(c: Context) -> object:
    return _added(c, "a" * 1_000_001)


@trigger("template_syntax_too_long")
def _(c: Context) -> object:
    return _added(c, "{{ input }}" + "a" * 100_000)


@trigger("template_too_many_tags")
def _(c: Context) -> object:
    return _added(c, "{{ input }}" * 2_001)


@trigger("template_code_too_large")
def _(c: Context) -> object:
    return _added(c, "{{ input + input + input + input + input + input + input + input }}" * 500)


@trigger("custom_takes_input")
def _(c: Context) -> object:
    custom = {"type": "custom", "name": "c"}
    return play(c, "custom_input", [{"call": {"name": "c", "arguments": {}}}], [custom])


@trigger("scenario_calls_directly", "undeclared")
def _(c: Context) -> object:
    return play(c, "undeclared", [{"call": {"name": "nope", "arguments": {}}}])


@trigger("programmatic_only")
def _(c: Context) -> object:
    return play(c, "programmatic_only", [{"call": {"name": "add", "arguments": {}}}])


@trigger("not_loaded_yet")
def _(c: Context) -> object:
    """A search turn that finds another tool than the one the next turn calls."""
    f, g = ({"type": "function", "name": name, "defer_loading": True} for name in ("f", "g"))
    turns = [{"search": {"query": "weather"}}, {"call": {"name": "f", "arguments": {}}}]
    return play(c, "not_loaded", turns, [f, {**g, "description": "weather"}, SEARCH])


@trigger("scenario_calls_unemulated")
def _(c: Context) -> object:
    return play(c, "unemulated", [{"call": {"name": "web_search", "arguments": {}}}], [{"type": "web_search"}])


@trigger("scenario_calls_server_tool")
def _(c: Context) -> object:
    return play(c, "server_side", [{"call": {"name": "shell", "arguments": {}}}], [HOSTED_SHELL])


@trigger("mcp_called_directly")
def _(c: Context) -> object:
    return play(c, "mcp_undeclared", [{"mcp": {"server_label": "docs", "name": "a"}}])


DECLARED = {"mcp_servers": {"docs": {"tools": [{"name": "a", "input_schema": {"type": "object"}}]}}}


@trigger("mcp_tool_not_listed")
def _(c: Context) -> object:
    return play(c, "mcp_unlisted", [{"mcp": {"server_label": "docs", "name": "b"}}], [docs_server()], hosted=DECLARED)


@trigger("mcp_no_result")
def _(c: Context) -> object:
    unasked = docs_server(require_approval="never")
    return play(c, "mcp_no_result", [{"mcp": {"server_label": "docs", "name": "a"}}], [unasked], hosted=DECLARED)


@trigger("interpreter_called_directly")
def _(c: Context) -> object:
    return play(c, "interpreter_undeclared", [{"code_interpreter": {"code": "1 + 1"}}])


@trigger("interpreter_unscripted")
def _(c: Context) -> object:
    return play(c, "interpreter_unscripted", [{"code_interpreter": {"code": "1 + 1"}}], [INTERPRETER])


@trigger("scenario_pattern_too_costly")
def _(c: Context) -> object:
    """A matcher of 3505 RE2 instructions against 100,000 bytes: past one match's budget."""
    added = c.post(
        "/_emulator/scenarios", {"name": "costly", "match": {"input": "((a|a)+){1,500}!x"}, "turns": [{"message": "m"}]}
    )
    assert added.status_code == 201, added.text
    answered = c.create(input="a" * 100_000)
    c.http.delete("/_emulator/scenarios/costly")
    return answered


@trigger("hosted_pattern_too_costly")
def _(c: Context) -> object:
    hosted = {"code_interpreter": [{"code": "((a|a)+){1,500}!x", "logs": "x"}]}
    return play(c, "costly_hosted", [{"code_interpreter": {"code": "a" * 100_000}}], [INTERPRETER], hosted=hosted)


@trigger("no_hosted_shell")
def _(c: Context) -> object:
    return play(c, "no_shell", [{"shell": {"commands": ["ls"]}}])


@trigger("shell_programmatic_only")
def _(c: Context) -> object:
    only = {**HOSTED_SHELL, "allowed_callers": ["programmatic"]}
    return play(c, "shell_programmatic", [{"shell": {"commands": ["ls"]}}], [only])


@trigger("shell_unscripted")
def _(c: Context) -> object:
    return play(c, "shell_unscripted", [{"shell": {"commands": ["ls"]}}], [HOSTED_SHELL])


@trigger("no_search_tool")
def _(c: Context) -> object:
    return play(c, "no_search_tool", [{"search": {"query": "weather"}}])


@trigger("search_loads_undeferred")
def _(c: Context) -> object:
    return play(c, "search_undeferred", [{"search": {"load": ["nope"]}}], [SEARCH])


@trigger("search_arguments_unfit")
def _(c: Context) -> object:
    schema = {"type": "object", "properties": {"goal": {"type": "string"}}, "required": ["goal"]}
    client_search = {"type": "tool_search", "execution": "client", "parameters": schema}
    deferred = {"type": "function", "name": "f", "defer_loading": True}
    return play(c, "search_unfit", [{"search": {"query": "weather"}}], [deferred, client_search])


@trigger("rate_limited")
def _(c: Context) -> object:
    return play(c, "fault_429", [{"message": "hi", "fault": {"http_error": 429}}])


@trigger("overloaded")
def _(c: Context) -> object:
    return play(c, "fault_503", [{"message": "hi", "fault": {"http_error": 503}}])


@trigger("server_error")
def _(c: Context) -> object:
    return play(c, "fault_500", [{"message": "hi", "fault": {"http_error": 500}}])


# ---- the model upstream ------------------------------------------------------------------------------

UPSTREAM_URL = "http://upstream.test/v1"
SSE = {"content-type": "text/event-stream"}


def asked(
    answer: Callable[[httpx.Request], httpx.Response], *, api: str = "chat", stream: bool = False, **config: Any
) -> object:
    """The model upstream's client asked one turn, the answer made by `answer` (no retries;
    `config`: more of `UpstreamConfig`)."""
    config = UpstreamConfig(UPSTREAM_URL, api=api, retries=0, stream=stream, timeout_s=5, **config)
    client = UpstreamClient(config, transport=httpx.MockTransport(answer))
    with pytest.raises(EmulatorError) as caught:
        asyncio.run(client.complete(model="m", instructions=None, transcript=[], functions=[]))
    return caught.value


def raising(error: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        raise error

    return answer


def answering(**response: Any) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(**response)


class _Broken(httpx.AsyncByteStream):
    """A stream that breaks off after its first chunk."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'data: {"choices": []}\n\n'
        raise httpx.ReadError("reset")


@trigger("upstream_timeout")
def _(c: Context) -> object:
    return asked(raising(httpx.ReadTimeout("slow")))


@trigger("upstream_unreachable")
def _(c: Context) -> object:
    return asked(raising(httpx.ConnectError("refused")))


@trigger("upstream_answered_status")
def _(c: Context) -> object:
    return asked(answering(status_code=400, json={"error": {"message": "no"}}))


def body(text: str | bytes) -> Callable[[httpx.Request], httpx.Response]:
    """A whole answer of JSON type whose body is `text`, as it is."""
    content = text.encode() if isinstance(text, str) else text
    return answering(status_code=200, content=content, headers={"content-type": "application/json"})


SAID = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."}}]}
"""A Chat Completions answer with text in it."""


@trigger("malformed", "answer_not_json", "answered_body")
def _(c: Context) -> object:
    return asked(answering(status_code=200, text="<html>"))


@trigger("answer_not_utf8")
def _(c: Context) -> object:
    return asked(body(b'{"choices": "\xff"}'))


@trigger("answer_too_deep")
def _(c: Context) -> object:
    return asked(body("[" * 100 + "]" * 100))


@trigger("answer_constant")
def _(c: Context) -> object:
    return asked(body('{"choices": [], "usage": {"prompt_tokens": Infinity}}'))


@trigger("answer_number_too_large")
def _(c: Context) -> object:
    return asked(body('{"choices": [], "usage": {"prompt_tokens": 1e999}}'))


@trigger("answer_lone_surrogate")
def _(c: Context) -> object:
    return asked(body('{"choices": [{"message": {"content": "\\ud800"}}]}'))


@trigger("upstream_fault", "unknown_shape_at", "shape_wrong")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json={"choices": "many"}))


@trigger("shape_missing")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json={"choices": [{"index": 0}]}))


@trigger("shape_negative")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json={**SAID, "usage": {"prompt_tokens": -1}}))


@trigger("no_choices")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json={"choices": []}))


@trigger("too_many_calls")
def _(c: Context) -> object:
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for n in range(2049)]
    return asked(answering(status_code=200, json={"choices": [{"index": 0, "message": {"tool_calls": calls}}]}))


@trigger("answered_nothing")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json={"choices": [{"index": 0, "message": {"content": ""}}]}))


@trigger("key_in_arguments")
def _(c: Context) -> object:
    nested = "".join(f"\\u005cu{ord(ch):04x}" for ch in "sk-trigger-key")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": "' + nested + '"}'}}
    choice = {"index": 0, "message": {"content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}
    answer = {"choices": [choice]}
    return asked(answering(status_code=200, json=answer), api_key="sk-trigger-key")


@trigger("deltas_disagree")
def _(c: Context) -> object:
    """A Responses stream whose delta is not its final text."""
    final = {"status": "completed", "output": [{"type": "message", "content": [{"type": "output_text", "text": "b"}]}]}
    said = [{"type": "response.output_text.delta", "delta": "a"}, {"type": "response.completed", "response": final}]
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in said)
    return asked(answering(status_code=200, text=text, headers=SSE), api="responses", stream=True)


@trigger("upstream_refused")
def _(c: Context) -> object:
    refused = {"choices": [{"index": 0, "message": {"content": None, "refusal": "I can't help with that."}}]}
    return asked(answering(status_code=200, json=refused))


@trigger("too_many_bytes")
def _(c: Context) -> object:
    return asked(answering(status_code=200, json=SAID), max_answer_bytes=10)


class _Gzipped(httpx.AsyncByteStream):
    """`SAID`, gzipped, sent as it is (not unpacked by the transport)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield gzip.compress(json.dumps(SAID).encode())


@trigger("compressed")
def _(c: Context) -> object:
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    return asked(answering(status_code=200, stream=_Gzipped(), headers=headers))


@trigger("not_an_answer")
def _(c: Context) -> object:
    page = "<!doctype html><html><body>Sign in</body></html>"
    return asked(answering(status_code=200, text=page, headers={"content-type": "text/html; charset=utf-8"}))


@trigger("json_not_events")
def _(c: Context) -> object:
    """A whole JSON answer to a streamed request, sent as text/plain."""
    headers = {"content-type": "text/plain"}
    return asked(answering(status_code=200, json=SAID, headers=headers), stream=True)


@trigger("unreadable_shape")
def _(c: Context) -> object:
    """A protocol that reads without a `Shape` and stumbles (a `KeyError`): still the 502."""

    def answer(self: ChatCompletions, data: Any) -> object:
        return data["missing"]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChatCompletions, "answer", answer)
        return asked(answering(status_code=200, json=SAID))


@trigger("failed_response")
def _(c: Context) -> object:
    failed = {"status": "failed", "error": {"message": "overloaded"}, "output": []}
    return asked(answering(status_code=200, json=failed), api="responses")


@trigger("streamed_chunk")
def _(c: Context) -> object:
    return asked(answering(status_code=200, text="data: {\n\n", headers=SSE), stream=True)


@trigger("streamed_line")
def _(c: Context) -> object:
    """A comment line holding a byte that is not UTF-8."""
    return asked(answering(status_code=200, content=b": \xff\n\n", headers=SSE), stream=True)


@trigger("unknown_stream_field")
def _(c: Context) -> object:
    """`Data:`, not `data:`."""
    return asked(answering(status_code=200, text="Data: {}\n\n", headers=SSE), stream=True)


@trigger("streamed_event")
def _(c: Context) -> object:
    return asked(answering(status_code=200, text="data: {\n\n", headers=SSE), api="responses", stream=True)


@trigger("stream_unfinished")
def _(c: Context) -> object:
    cut = 'data: {"choices": [{"index": 0, "delta": {"content": "Th"}}]}\n\n'
    return asked(answering(status_code=200, text=cut, headers=SSE), stream=True)


@trigger("failed_mid_stream")
def _(c: Context) -> object:
    failed = 'data: {"error": {"message": "overloaded"}}\n\n'
    return asked(answering(status_code=200, text=failed, headers=SSE), stream=True)


@trigger("no_failure_message")
def _(c: Context) -> object:
    failed = 'data: {"type": "error", "error": {}}\n\n'
    return asked(answering(status_code=200, text=failed, headers=SSE), api="responses", stream=True)


@trigger("stream_ended_early")
def _(c: Context) -> object:
    cut = 'data: {"type": "response.output_text.delta", "delta": "Th"}\n\n'
    return asked(answering(status_code=200, text=cut, headers=SSE), api="responses", stream=True)


@trigger("stream_without_finish_reason")
def _(c: Context) -> object:
    cut = 'data: {"choices": [{"index": 0, "delta": {"content": "Th"}}]}\n\ndata: [DONE]\n\n'
    return asked(answering(status_code=200, text=cut, headers=SSE), stream=True)


@trigger("finish_reasons_differ")
def _(c: Context) -> object:
    cut = (
        'data: {"choices": [{"index": 0, "delta": {"content": "Th"}, "finish_reason": "length"}]}\n\n'
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    )
    return asked(answering(status_code=200, text=cut, headers=SSE), stream=True)


@trigger("unknown_finish_reason")
def _(c: Context) -> object:
    said = {"choices": [{**SAID["choices"][0], "finish_reason": "banana"}]}
    return asked(answering(status_code=200, json=said))


@trigger("unfinished_response")
def _(c: Context) -> object:
    message = {"type": "message", "content": [{"type": "output_text", "text": "Hi."}]}
    cancelled = {"status": "cancelled", "output": [message]}
    return asked(answering(status_code=200, json=cancelled), api="responses")


@trigger("unfinished_item")
def _(c: Context) -> object:
    message = {"type": "message", "status": "in_progress", "content": [{"type": "output_text", "text": "Hi."}]}
    return asked(answering(status_code=200, json={"status": "completed", "output": [message]}), api="responses")


@trigger("upstream_stream_broke")
def _(c: Context) -> object:
    return asked(answering(status_code=200, stream=_Broken(), headers=SSE), stream=True)


@trigger("upstream_arguments_not_json")
def _(c: Context) -> object:
    with pytest.raises(EmulatorError) as caught:
        asyncio.run(upstream_model._arguments(ToolCall("call_1", CODE_TOOL, "not json")))
    return caught.value


@trigger("upstream_arguments_malformed")
def _(c: Context) -> object:
    with pytest.raises(EmulatorError) as caught:
        asyncio.run(upstream_model._arguments(ToolCall("call_1", "lookup", '{"n": NaN}')))
    return caught.value


@trigger("upstream_code_missing")
def _(c: Context) -> object:
    with pytest.raises(EmulatorError) as caught:
        upstream_model._code(ToolCall("call_1", CODE_TOOL, '{"program": "text(1)"}'), {"program": "text(1)"})
    return caught.value


ELSEWHERE["upstream_too_many_turns"] = (
    "tests/anymodel/test_failures.py::test_an_upstream_that_never_stops_running_programs"
)
ELSEWHERE["upstream_unoffered_function"] = "tests/anymodel/test_failures.py::test_an_unknown_tool_name"

_HOSTILE_CASSETTE = (
    "tests/recording/test_cassettes.py::test_a_hostile_cassette_fails_its_test_naming_the_file_without_a_traceback"
)
for _name in (
    "cassette_unusable",
    "cassette_not_text",
    "cassette_not_yaml",
    "cassette_not_cassette",
    "cassette_not_mapping",
    "cassette_not_json",
    "cassette_duplicate_name",
    "cassette_empty_answer",
    "cassette_scenario_refused",
    "cassette_too_large",
    "cassette_too_many_values",
):
    ELSEWHERE[_name] = _HOSTILE_CASSETTE
for _name in ("cassette_not_a_file", "cassette_unreadable"):
    ELSEWHERE[_name] = (
        "tests/recording/test_cassettes.py::test_a_cassette_that_is_no_regular_file_fails_its_test_naming_the_file"
    )


# ---- the Agents API ------------------------------------------------------------------------------------

BETA = {"OpenAI-Beta": "agents=v1"}
FUNCTION = {"type": "function", "name": "lookup", "description": "d", "parameters": {"type": "object"}}


def agents(c: Context, method: str, path: str, body: Any = None, **headers: str) -> Any:
    """A request to `/v1/agents{path}` with the beta header."""
    content = None if body is None else json.dumps(body).encode()
    every = {"content-type": "application/json", **BETA, **headers}
    return c.http.request(method, f"/v1/agents{path}", content=content, headers=every)


def agent_with(c: Context, **fields: Any) -> Any:
    return agents(c, "POST", "", {"model": "m", **fields})


def mcp_server(**fields: Any) -> dict[str, Any]:
    transport = {"type": "http", "server_url": "http://mcp.test/mcp"}
    return {"type": "mcp", "server_label": "docs", "transport": transport, **fields}


class Stepped:
    """Sessions whose model steps answer `outputs` in turn (the harness's step replaced: these
    rules are the harness's, whatever the model says), each session run to where it stops."""

    def __init__(self, c: Context, *outputs: list[dict[str, Any]] | BaseException) -> None:
        self.c = c
        self.harness = c.http.app.state.emulator.agents
        self.outputs = list(outputs)

    async def _play(self, doc: Any) -> dict[str, Any]:
        output = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        if isinstance(output, BaseException):
            raise output
        return {"output": output, "usage": None}

    def session(self, **body: Any) -> dict[str, Any]:
        """A session, once its first turn has stopped (waiting, or over)."""
        self.harness._play = self._play
        try:
            made = agents(self.c, "POST", "/sessions", {"environment": {"type": "none"}, "input": "hi", **body})
            assert made.status_code == 200, made.text
            session: dict[str, Any] = made.json()
            for _ in range(1000):  # the turn runs on the app's loop: wait for the state it ends in
                session = agents(self.c, "GET", f"/sessions/{session['id']}").json()
                if session["status"] != "in_progress":
                    return session
                time.sleep(0.01)
            raise AssertionError(f"the session's turn did not stop: {session}")
        finally:
            del self.harness._play


CALL = {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"}


def waiting(c: Context) -> dict[str, Any]:
    """A session whose turn waits on the result of `lookup` (call_1)."""
    return Stepped(c, [CALL]).session(agent={"model": "m", "tools": [FUNCTION]})


def result(session: dict[str, Any], **fields: Any) -> dict[str, Any]:
    (action,) = session["required_actions"]
    return {"type": "agent.session.input.tool_result", "turn_id": action["turn_id"], "call_id": "call_1", **fields}


def send(c: Context, session: dict[str, Any], *events: dict[str, Any], **headers: str) -> Any:
    return agents(c, "POST", f"/sessions/{session['id']}/events", {"events": list(events)}, **headers)


@trigger("agents_beta_missing")
def _(c: Context) -> object:
    return c.http.get("/v1/agents")


@trigger("agent_not_found")
def _(c: Context) -> object:
    return agents(c, "GET", "/agent_nope")


@trigger("session_not_found")
def _(c: Context) -> object:
    return agents(c, "GET", "/sessions/sess_nope")


@trigger("turn_not_found")
def _(c: Context) -> object:
    session = Stepped(c, [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]).session(
        agent={"model": "m"}
    )
    return agents(c, "GET", f"/sessions/{session['id']}/turns/turn_nope")


@trigger("duplicate_mcp_label")
def _(c: Context) -> object:
    return agent_with(c, tools=[mcp_server(), mcp_server()])


@trigger("mcp_without_transport")
def _(c: Context) -> object:
    return agent_with(c, tools=[{"type": "mcp", "server_label": "docs", "server_url": "http://mcp.test/mcp"}])


@trigger("agent_tool_unsupported")
def _(c: Context) -> object:
    return agent_with(c, tools=[{"type": "code_interpreter"}])


@trigger("agent_deferred_needs_search")
def _(c: Context) -> object:
    return agent_with(c, tools=[{**FUNCTION, "defer_loading": True}])


@trigger("async_function_tool")
def _(c: Context) -> object:
    return agent_with(c, tools=[{**FUNCTION, "async": True}])


@trigger("at_most_one")
def _(c: Context) -> object:
    return agent_with(c, tools=[{"type": "tool_search"}, {"type": "tool_search"}])


@trigger("agent_tools_too_large")
def _(c: Context) -> object:
    return agent_with(c, tools=[{**FUNCTION, "description": "d" * (3 * 2**20)}])


@trigger("subagents_unsupported")
def _(c: Context) -> object:
    return agent_with(c, multi_agent={"enabled": True})


@trigger("stdio_mcp_unsupported")
def _(c: Context) -> object:
    stdio = {"type": "stdio", "command": "docs-server", "cwd": "/"}
    return agent_with(c, tools=[mcp_server(transport=stdio)])


@trigger("mcp_authorization_unsupported")
def _(c: Context) -> object:
    transport = {"type": "http", "server_url": "http://mcp.test/mcp", "authorization": "token"}
    return agent_with(c, tools=[mcp_server(transport=transport)])


@trigger("mcp_environment_origin_unsupported")
def _(c: Context) -> object:
    return agent_with(c, tools=[mcp_server(connection_origin="environment")])


@trigger("mcp_credential_unsupported")
def _(c: Context) -> object:
    return agent_with(c, tools=[mcp_server(credential_id="cred_1")])


@trigger("environment_type_invalid")
def _(c: Context) -> object:
    return agents(c, "POST", "/sessions", {"environment": {"type": "cloud"}, "agent": {"model": "m"}, "input": "hi"})


@trigger("environment_unsupported")
def _(c: Context) -> object:
    body = {"environment": {"type": "openai_hosted"}, "agent": {"model": "m"}, "input": "hi"}
    return agents(c, "POST", "/sessions", body)


@trigger("vaults_unsupported")
def _(c: Context) -> object:
    body = {"environment": {"type": "none"}, "agent": {"model": "m"}, "input": "hi", "vault_ids": ["vault_1"]}
    return agents(c, "POST", "/sessions", body)


@trigger("agent_model_missing")
def _(c: Context) -> object:
    return agents(c, "POST", "/sessions", {"environment": {"type": "none"}, "input": "hi"})


@trigger("session_input_missing")
def _(c: Context) -> object:
    return agents(c, "POST", "/sessions", {"environment": {"type": "none"}, "agent": {"model": "m"}})


@trigger("unknown_pending_call")
def _(c: Context) -> object:
    session = waiting(c)
    return send(c, session, {**result(session, success=True, output="x"), "call_id": "call_nope"})


@trigger("unknown_pending_approval")
def _(c: Context) -> object:
    session = waiting(c)
    approval = {"type": "agent.session.input.mcp_approval_request_result", "request_id": "mcpr_nope"}
    return send(c, session, {**approval, "response": {"type": "mcp_tool_call", "decision": "approve"}})


@trigger("turn_in_progress")
def _(c: Context) -> object:
    message = {
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "more"}]}],
    }
    return send(c, waiting(c), message)


@trigger("successful_result_with_error")
def _(c: Context) -> object:
    session = waiting(c)
    return send(c, session, result(session, success=True, output="x", error="no"))


@trigger("failed_result_without_error")
def _(c: Context) -> object:
    session = waiting(c)
    return send(c, session, result(session, success=False))


@trigger("result_already_submitted")
def _(c: Context) -> object:
    session = waiting(c)
    first = send(c, session, result(session, success=True, output="x"))
    assert first.status_code == 202, first.text
    return send(c, session, result(session, success=True, output="y"))


@trigger("idempotency_key_reused")
def _(c: Context) -> object:
    session = waiting(c)
    first = send(c, session, result(session, success=True, output="x"), **{"Idempotency-Key": "k1"})
    assert first.status_code == 202, first.text
    return send(c, session, result(session, success=True, output="y"), **{"Idempotency-Key": "k1"})


@trigger("mcp_approval_question")
def _(c: Context) -> object:
    asked = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "name": "lookup",
        "server_label": "docs",
        "arguments": "{}",
    }
    return Stepped(c, [asked]).session(agent={"model": "m"})["required_actions"]


@trigger("turn_failed")
def _(c: Context) -> object:
    session = Stepped(c, RuntimeError("a bug")).session(agent={"model": "m"})
    return agents(c, "GET", f"/sessions/{session['id']}/turns").json()


@trigger("too_many_steps")
def _(c: Context) -> object:
    session = Stepped(c, []).session(agent={"model": "m"})
    return agents(c, "GET", f"/sessions/{session['id']}/turns").json()


# ---- responses: background, compaction, continuations ----------------------------------------------


@trigger("background_interrupted")
def _(c: Context) -> object:
    with tempfile.TemporaryDirectory() as data:
        before = open_store("sqlite", Path(data))
        before.responses.put(StoredResponse("resp_cut", {"id": "resp_cut", "status": "in_progress"}, [], None))
        before.close()
        after = open_store("sqlite", Path(data))  # the next start
        try:
            record = after.responses.get("resp_cut")
        finally:
            after.close()
    assert record is not None and record.response["status"] == "failed"
    return record.response["error"]


@trigger("background_replica_stopped")
def _(c: Context) -> object:
    background = c.http.app.state.emulator.engine.background
    held = background.leases
    background.leases = MemoryLeases()  # shared, and nobody holds the response's lease
    try:
        made = c.sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS)  # type: ignore[arg-type]
        body = {**made.model_dump(exclude_none=True), "status": "in_progress", "background": True}
        c.http.app.state.emulator.store.responses.put(StoredResponse(made.id, body, [], None))
        return c.http.get(f"/v1/responses/{made.id}")
    finally:
        background.leases = held


# ---- request parameters: what a body's JSON and metadata may hold ----------------------------------


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@trigger("json_too_deep")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[{"type": "function", "name": "f", "parameters": nested(70)}])


@trigger("lone_surrogate")
def _(c: Context) -> object:
    return c.create(input="hi", metadata={"k": "\ud800"})


@trigger("number_not_finite")
def _(c: Context) -> object:
    return c.create(input="hi", temperature=float("nan"))


@trigger("metadata_too_many_keys")
def _(c: Context) -> object:
    return c.create(input="hi", metadata={f"k{n}": "v" for n in range(17)})


@trigger("metadata_key_too_long")
def _(c: Context) -> object:
    return c.create(input="hi", metadata={"k" * 65: "v"})


@trigger("metadata_value_too_long")
def _(c: Context) -> object:
    return c.create(input="hi", metadata={"k": "v" * 513})


@trigger("conversation_id_invalid")
def _(c: Context) -> object:
    return c.create(input="hi", conversation={"id": 5})


@trigger("configuration_update_empty")
def _(c: Context) -> object:
    return c.create(input=[USER, {"type": "configuration_update"}])


# ---- the edge: a client that leaves --------------------------------------------------------------------


@trigger("client_closed")
def _(c: Context) -> object:
    """A create whose client disconnects once its body is read: the run is cancelled."""

    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def run() -> object:
        forever = asyncio.get_running_loop().create_future()
        request = Request({"type": "http", "method": "POST", "headers": []}, gone)
        try:
            await unless_disconnected(request, forever)
        except EmulatorError as e:
            assert forever.cancelled()
            return e
        raise AssertionError("the run outlived its client")

    return asyncio.run(run())


# ---- the admin API, journal and inspector ------------------------------------------------------------

ADMIN = "/_emulator"


@trigger("scenario_body_not_json")
def _(c: Context) -> object:
    return c.http.post(f"{ADMIN}/scenarios", content=b"{not json", headers={"content-type": "application/json"})


@trigger("scenario_body_refused")
def _(c: Context) -> object:
    return c.http.post(f"{ADMIN}/scenarios", content=b'{"turns": NaN}', headers={"content-type": "application/json"})


@trigger("invalid_scenario")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"turns": []})


@trigger("scenario_number_not_finite")
def _(c: Context) -> object:
    yaml_text = "match: {input: x}\nturns:\n  - call: {name: echo, arguments: {x: .nan}}\n"
    return c.post(f"{ADMIN}/scenarios", {"yaml": yaml_text})


@trigger("scenario_metadata_key_too_long")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"match": {"metadata": {"k" * 65: "v"}}, "turns": [{"message": "x"}]})


@trigger("scenario_preamble_misplaced")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "x"}, "turns": [{"message": "x", "preamble": "y"}]})


@trigger("scenario_program_fault_misplaced")
def _(c: Context) -> object:
    turn = {"message": "x", "fault": {"program_timeout": True}}
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "x"}, "turns": [turn]})


@trigger("scenario_group_named_twice")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "(?P<x>a)|(?P<x>b)"}, "turns": [{"message": "x"}]})


@trigger("scenario_group_name_reserved")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "(?P<input>a)"}, "turns": [{"message": "x"}]})


@trigger("scenario_group_in_two_fields")
def _(c: Context) -> object:
    match = {"input": "(?P<x>a)", "instructions": "(?P<x>b)"}
    return c.post(f"{ADMIN}/scenarios", {"match": match, "turns": [{"message": "x"}]})


@trigger("scenario_number_not_bool")
def _(c: Context) -> object:
    turn = {"message": "x", "fault": {"latency_ms": True}}
    return c.post(f"{ADMIN}/scenarios", {"match": {"input": "x"}, "turns": [turn]})


@trigger("scenario_metadata_too_many_keys")
def _(c: Context) -> object:
    metadata = {f"k{i}": "v" for i in range(17)}
    return c.post(f"{ADMIN}/scenarios", {"match": {"metadata": metadata}, "turns": [{"message": "x"}]})


@trigger("scenario_match_too_many_tools")
def _(c: Context) -> object:
    tools = [f"t{i}" for i in range(129)]
    return c.post(f"{ADMIN}/scenarios", {"match": {"tools": tools}, "turns": [{"message": "x"}]})


@trigger("scenario_metadata_value_too_long")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"match": {"metadata": {"k": "v" * 513}}, "turns": [{"message": "x"}]})


@trigger("scenario_json_too_many_values")
def _(c: Context) -> object:
    body = '{"match": {"input": "x"}, "turns": [{"message": "x"}], "x": [' + ",".join(["0"] * 250_001) + "]}"
    return c.http.post(f"{ADMIN}/scenarios", content=body.encode(), headers={"content-type": "application/json"})


@trigger("scenario_yaml_not_text")
def _(c: Context) -> object:
    return c.post(f"{ADMIN}/scenarios", {"yaml": 1})


@trigger("invalid_hosted_script")
def _(c: Context) -> object:
    return c.http.put(f"{ADMIN}/hosted", content="[" * 100 + "]" * 100)


@trigger("invalid_hosted_field")
def _(c: Context) -> object:
    return c.http.put(f"{ADMIN}/hosted", json={"mcp_servers": 1})


@trigger("scenario_not_found")
def _(c: Context) -> object:
    return c.http.delete(f"{ADMIN}/scenarios/nope")


def scoped(c: Context) -> dict[str, str]:
    """A scope of its own, so this module's other requests are not in its journal."""
    return {"x-ptc-emulator-scope": f"triggers-{time.monotonic_ns()}"}


@trigger("journal_names_nothing")
def _(c: Context) -> object:
    return c.http.get(f"{ADMIN}/journal/compare", params={"direct": "resp_nope"}, headers=scoped(c))


@trigger("journal_has_no_route")
def _(c: Context) -> object:
    return c.http.get(f"{ADMIN}/journal/compare", headers=scoped(c))


@trigger("compare_same_conversation")
def _(c: Context) -> object:
    scope = scoped(c)
    made = c.post("/v1/responses", {"model": "m", "input": PROGRAM, "tools": PTC_TOOLS}, **scope).json()
    both = {"direct": made["id"], "ptc": made["id"]}
    return c.http.get(f"{ADMIN}/journal/compare", params=both, headers=scope)


# ---- the recording proxy --------------------------------------------------------------------------------


def recording(data: str) -> RecordingProxy:
    """A recording proxy that forwards everything (`--record-mode all`) to an upstream it cannot reach."""
    settings = Settings(upstream="http://upstream.test/v1", record_dir=Path(data), record_mode="all")
    proxy = RecordingProxy(settings, ScenarioRegistry())

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    return proxy


def asgi(scope: dict[str, Any], inbound: list[dict[str, Any]], serve: Callable[..., Any]) -> list[dict[str, Any]]:
    """What an ASGI callable sends, given `inbound` messages (then nothing more)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if inbound:
            return inbound.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        await serve(scope, receive, send)

    asyncio.run(run())
    return sent


@trigger("proxy_unreachable")
def _(c: Context) -> object:
    with tempfile.TemporaryDirectory() as data:
        proxy = recording(data)
        scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "query_string": b""}
        body = {"type": "http.request", "body": b'{"model": "m", "input": "hi"}', "more_body": False}
        sent = asgi(scope, [body], lambda *a: proxy.serve(c.http.app, *a))
    assert sent[0]["status"] == 502, sent
    return json.loads(sent[1]["body"])


@trigger("proxy_answer_cut")
def _(c: Context) -> object:
    class Cut(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'data: {"type": "response.created", "sequence_number": 0}\n\n'
            raise httpx.ReadError("connection reset")

    def cut(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Cut())

    with tempfile.TemporaryDirectory() as data:
        proxy = recording(data)
        proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(cut))
        scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "query_string": b""}
        body = {"type": "http.request", "body": b'{"model": "m", "input": "hi", "stream": true}', "more_body": False}
        sent = asgi(scope, [body], lambda *a: proxy.serve(c.http.app, *a))
    assert sent[0]["status"] == 200 and sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    event = sent[-2]["body"].decode()
    assert event.startswith("event: error\ndata: "), event
    return json.loads(event.split("data: ", 1)[1])


@trigger("proxy_answer_packed")
def _(c: Context) -> object:
    def packed(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=b"x")

    with tempfile.TemporaryDirectory() as data:
        proxy = recording(data)
        proxy.api_key = "sk-trigger"
        proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(packed))
        scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "query_string": b""}
        body = {"type": "http.request", "body": b'{"model": "m", "input": "hi"}', "more_body": False}
        sent = asgi(scope, [body], lambda *a: proxy.serve(c.http.app, *a))
    assert sent[0]["status"] == 502, sent
    return json.loads(sent[1]["body"])


@trigger("proxy_answer_unreadable")
def _(c: Context) -> object:
    def wide(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json; charset=utf-16"}
        return httpx.Response(200, headers=headers, content='{"id": "resp_1"}'.encode("utf-16"))

    with tempfile.TemporaryDirectory() as data:
        proxy = recording(data)
        proxy.api_key = "sk-trigger"
        proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(wide))
        scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "query_string": b""}
        body = {"type": "http.request", "body": b'{"model": "m", "input": "hi"}', "more_body": False}
        sent = asgi(scope, [body], lambda *a: proxy.serve(c.http.app, *a))
    assert sent[0]["status"] == 502, sent
    return json.loads(sent[1]["body"])


@trigger("proxy_timeout")
def _(c: Context) -> object:
    with tempfile.TemporaryDirectory() as data:
        proxy = recording(data)
        proxy.deadline = 0.01
        gate = asyncio.Event()  # never set: the upstream never answers

        async def never(request: httpx.Request) -> httpx.Response:
            await gate.wait()
            raise AssertionError("unreachable")

        proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(never))
        scope = {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "query_string": b""}
        body = {"type": "http.request", "body": b'{"model": "m", "input": "hi"}', "more_body": False}
        sent = asgi(scope, [body], lambda *a: proxy.serve(c.http.app, *a))
    assert sent[0]["status"] == 504, sent
    return json.loads(sent[1]["body"])


@trigger("proxy_socket_refused")
def _(c: Context) -> object:
    import websockets.asyncio.client as client

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("connection refused")

    connect = client.connect
    client.connect = refuse  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as data:
            proxy = recording(data)
            scope = {"type": "websocket", "path": "/v1/responses", "headers": [], "query_string": b""}
            sent = asgi(scope, [{"type": "websocket.connect"}], lambda *a: proxy.serve(c.http.app, *a))
    finally:
        client.connect = connect  # type: ignore[assignment]
    assert sent[-1] == {"type": "websocket.close", "code": 1014, "reason": "the upstream did not take the WebSocket"}
    return [json.loads(m["text"]) for m in sent if m.get("text")]


@trigger("proxy_socket_timeout")
def _(c: Context) -> object:
    import websockets.asyncio.client as client

    class Silent:
        """An upstream socket that takes every frame and never answers."""

        close_code = None

        async def send(self, text: str) -> None:
            pass

        def __aiter__(self) -> Silent:
            return self

        async def __anext__(self) -> str:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def close(self) -> None:
            pass

    async def silent(*args: Any, **kwargs: Any) -> Any:
        return Silent()

    connect = client.connect
    client.connect = silent  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as data:
            proxy = recording(data)
            proxy.deadline = 0.01
            scope = {"type": "websocket", "path": "/v1/responses", "headers": [], "query_string": b""}
            create = {"type": "websocket.receive", "text": '{"type": "response.create", "model": "m", "input": "hi"}'}
            sent = asgi(scope, [{"type": "websocket.connect"}, create], lambda *a: proxy.serve(c.http.app, *a))
    finally:
        client.connect = connect  # type: ignore[assignment]
    assert sent[-1]["type"] == "websocket.close" and sent[-1]["code"] == 1014, sent
    return [json.loads(m["text"]) for m in sent if m.get("text")]


def _socket_ends(c: Context, closed: Exception) -> list[dict[str, Any]]:
    """What a client of the recording proxy's WebSocket gets when the upstream's socket raises
    `closed` at its first read (after the client's response.create)."""
    import websockets.asyncio.client as client

    class Ending:
        close_code = 1006

        async def send(self, text: str) -> None:
            pass

        def __aiter__(self) -> Ending:
            return self

        async def __anext__(self) -> str:
            raise closed

        async def close(self) -> None:
            pass

    async def ending(*args: Any, **kwargs: Any) -> Any:
        return Ending()

    connect = client.connect
    client.connect = ending  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as data:
            proxy = recording(data)
            scope = {"type": "websocket", "path": "/v1/responses", "headers": [], "query_string": b""}
            create = {"type": "websocket.receive", "text": '{"type": "response.create", "model": "m", "input": "hi"}'}
            sent = asgi(scope, [{"type": "websocket.connect"}, create], lambda *a: proxy.serve(c.http.app, *a))
    finally:
        client.connect = connect  # type: ignore[assignment]
    return sent


@trigger("proxy_socket_frame_too_large")
def _(c: Context) -> object:
    from websockets.exceptions import ConnectionClosedError
    from websockets.frames import Close

    sent = _socket_ends(c, ConnectionClosedError(None, Close(1009, "frame too big"), None))
    assert sent[-1]["type"] == "websocket.close" and sent[-1]["code"] == 1009, sent
    return [json.loads(m["text"]) for m in sent if m.get("text")]


@trigger("proxy_socket_broke")
def _(c: Context) -> object:
    from websockets.exceptions import ConnectionClosedError

    sent = _socket_ends(c, ConnectionClosedError(None, None, None))
    assert sent[-1]["type"] == "websocket.close" and sent[-1]["code"] == 1014, sent
    return [json.loads(m["text"]) for m in sent if m.get("text")]


# ---- responses: compaction, cancellation, continuations ------------------------------------------------


@trigger("nothing_to_compact")
def _(c: Context) -> object:
    return c.post("/v1/responses/compact", {"model": "m"})


@trigger("cancel_needs_background")
def _(c: Context) -> object:
    made = c.sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS)  # type: ignore[arg-type]
    return c.post(f"/v1/responses/{made.id}/cancel", {})


@trigger("cancel_finished")
def _(c: Context) -> object:
    made = c.post("/v1/responses", {"model": "m", "input": PROGRAM, "tools": PTC_TOOLS, "background": True}).json()
    for _ in range(3000):  # until it finished (a bound on the loop, not a timing)
        current = c.http.get(f"/v1/responses/{made['id']}").json()
        if current["status"] not in ("queued", "in_progress"):
            break
        time.sleep(0.02)
    assert current["status"] == "completed", current
    return c.post(f"/v1/responses/{made['id']}/cancel", {})


@trigger("previous_response_continued")
def _(c: Context) -> object:
    """Another continuation of the paused program is stored between this one's read and its write."""
    paused = c.sdk.responses.create(model="m", input=PROGRAM, tools=PTC_TOOLS)  # type: ignore[arg-type]
    _, paused_call = _sdk_items(paused)
    responses = c.http.app.state.emulator.store.responses
    put_continuation = responses.put_continuation

    def overtaken(record: StoredResponse, digest: str) -> str | None:
        other = StoredResponse(
            "resp_other", {**record.response, "id": "resp_other"}, [], record.previous_response_id, record.scope
        )
        assert put_continuation(other, "another request's digest") is None  # the other one wins
        return put_continuation(record, digest)  # type: ignore[no-any-return]

    responses.put_continuation = overtaken
    try:
        answer = output(paused_call["call_id"], caller=paused_call["caller"], output="3")
        return c.create(previous_response_id=paused.id, input=[answer], tools=PTC_TOOLS)
    finally:
        del responses.put_continuation


# ---- the edge: keys, hosts, origins, content types, scopes, body size ----------------------------------


def guarded(c: Context, path: str, **headers: str) -> object:
    """A request to an app started with `--api-key sk-the-right-key --max-body-bytes 64`."""
    settings = Settings(store="memory", secret="unit-tests", api_key="sk-the-right-key", max_body_bytes=64)
    with TestClient(create_app(settings, runner=FakeRunner()), base_url="http://127.0.0.1") as client:
        if path == "/v1/responses":
            return client.post(path, content=b'{"model": "m", "input": "' + b"x" * 100 + b'"}', headers=headers)
        return client.get(path, headers=headers)


@trigger("api_key_missing")
def _(c: Context) -> object:
    return guarded(c, "/v1/models")


@trigger("api_key_incorrect")
def _(c: Context) -> object:
    return guarded(c, "/v1/models", authorization="Bearer sk-the-wrong-key")


@trigger("body_too_large")
def _(c: Context) -> object:
    return guarded(c, "/v1/responses", authorization="Bearer sk-the-right-key", **{"content-type": "application/json"})


@trigger("host_not_allowed")
def _(c: Context) -> object:
    return c.http.get("/v1/models", headers={"host": "evil.example"})


@trigger("header_repeated")
def _(c: Context) -> object:
    return c.http.get("/v1/models", headers=[("host", "localhost"), ("host", "localhost")])


@trigger("origin_not_allowed")
def _(c: Context) -> object:
    return c.http.get("/v1/models", headers={"origin": "https://evil.example"})


@trigger("unsupported_content_type")
def _(c: Context) -> object:
    return c.http.post("/v1/responses", content=b"hi", headers={"content-type": "text/plain"})


@trigger("invalid_scope")
def _(c: Context) -> object:
    return c.http.get(f"/scopes/{'x' * 201}/v1/models")


@trigger("scope_conflict")
def _(c: Context) -> object:
    return c.http.get("/scopes/one/v1/models", headers={"x-ptc-emulator-scope": "two"})


@trigger("inspector_conversation_id_invalid")
def _(c: Context) -> object:
    return c.http.get(f"{ADMIN}/inspector/conversations/nope")


@trigger("inspector_conversation_not_found")
def _(c: Context) -> object:
    return c.http.get(f"{ADMIN}/inspector/conversations/c999999")


@trigger("inspector_file_not_found")
def _(c: Context) -> object:
    return c.http.get(f"{ADMIN}/ui/nope.js")


# ---- request parameters: validation as the hosted API words it --------------------------------------


@trigger("json_parse_error")
def _(c: Context) -> object:
    return c.http.post("/v1/responses", content=b"{not json", headers={"content-type": "application/json"})


@trigger("invalid_url")
def _(c: Context) -> object:
    return c.http.get("/v1/nope")


@trigger("invalid_method")
def _(c: Context) -> object:
    return c.http.put("/v1/responses", json={})


@trigger("http_refusal")
def _(c: Context) -> object:
    """A body past --max-body-bytes that declares no length: refused while it is read."""
    settings = Settings(store="memory", secret="unit-tests", max_body_bytes=64)
    chunks = iter([b'{"model": "m", "input": "', b"x" * 100, b'"}'])
    with TestClient(create_app(settings, runner=FakeRunner()), base_url="http://127.0.0.1") as client:
        return client.post("/v1/responses", content=chunks, headers={"content-type": "application/json"})


@trigger("invalid_request")
def _(c: Context) -> object:
    return validation_error([], {})


@trigger("invalid_value_unlisted")
def _(c: Context) -> object:
    refused = {"type": "union_tag_invalid", "loc": ("body", "input", 0), "ctx": {"tag": "nope", "expected_tags": ""}}
    return validation_error([refused], {"input": [{"type": "nope"}]})


@trigger("wrong_type")
def _(c: Context) -> object:
    return c.create(input="hi", temperature="hot")


@trigger("string_too_long")
def _(c: Context) -> object:
    return c.create(input="hi", safety_identifier="x" * 129)


@trigger("array_too_long")
def _(c: Context) -> object:
    return c.post("/v1/conversations", {"items": [{"role": "user", "content": "x"}] * 21})


@trigger("empty_array")
def _(c: Context) -> object:
    tool = {"type": "namespace", "name": "ns", "description": "d", "tools": []}
    return c.post("/v1/responses", {"model": "gpt-test", "input": "hi", "tools": [tool]})


@trigger("pattern_mismatch")
def _(c: Context) -> object:
    text = {"format": {"type": "json_schema", "name": "an answer", "schema": {"type": "object"}}}
    return c.post("/v1/responses", {"model": "m", "input": "hi", "text": text})


@trigger("empty_string")
def _(c: Context) -> object:
    return c.post("/v1/responses", {"model": "", "input": "hi"})


@trigger("below_minimum")
def _(c: Context) -> object:
    return c.http.get("/v1/responses/resp_nope/input_items", params={"limit": 0})


@trigger("above_maximum")
def _(c: Context) -> object:
    return c.create(input="hi", temperature=5)


@trigger("invalid_reason")
def _(c: Context) -> object:
    return c.create(input="hi", metadata={"k": "v" * 513})


# ---- WebSocket mode ---------------------------------------------------------------------------------


def over_socket(c: Context, *frames: str, until: str = "error") -> dict[str, Any]:
    """The first event of type `until` on a socket that was sent `frames`."""
    with c.http.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
        for sent in frames:
            ws.send_text(sent)
        while True:
            event = ws.receive_json()
            if event["type"] == until:
                return dict(event)


def create_frame(**fields: Any) -> str:
    return json.dumps({"type": "response.create", "model": "m", "input": "hi", **fields})


@trigger("socket_lifetime_reached")
def _(c: Context) -> object:
    settings = Settings(store="memory", secret="unit-tests", websocket_lifetime_s=0.01)
    with TestClient(create_app(settings, runner=FakeRunner()), base_url="http://127.0.0.1") as client:
        with client.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
            return ws.receive_json()


@trigger("frame_too_deep")
def _(c: Context) -> object:
    return over_socket(c, "[" * 200 + "]" * 200)


@trigger("frame_not_json")
def _(c: Context) -> object:
    return over_socket(c, "{nope")


@trigger("frame_invalid")
def _(c: Context) -> object:
    return over_socket(c, '{"type": "response.create", "model": "m", "input": "hi", "temperature": NaN}')


@trigger("steer_reference_wrong_type")
def _(c: Context) -> object:
    frame = json.dumps({"type": "response.steer", "input": "hi", "previous_response_id": ["x"]})
    return over_socket(c, frame, until="response.steer.failed")


@trigger("include_value_invalid")
def _(c: Context) -> object:
    return c.http.get("/v1/responses/resp_nope?include[]=bogus")


@trigger("frame_type_invalid")
def _(c: Context) -> object:
    return over_socket(c, '{"type": "response.nope"}')


@trigger("frame_not_an_object")
def _(c: Context) -> object:
    return over_socket(c, "[1]")


@trigger("stream_id_invalid")
def _(c: Context) -> object:
    return over_socket(c, create_frame(stream_id="not a stream id!"))


@trigger("stream_limit_reached")
def _(c: Context) -> object:
    """Named streams past the bound: each refused create (no model) still takes its stream."""
    frames = [json.dumps({"type": "response.create", "stream_id": f"s{n}"}) for n in range(40)]
    with c.http.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
        for sent in frames:
            ws.send_text(sent)
        while True:
            event = ws.receive_json()
            if event["type"] == "error" and event["error"]["code"] == "websocket_stream_limit_reached":
                return event


@trigger("background_over_socket")
def _(c: Context) -> object:
    return over_socket(c, create_frame(background=True))


@trigger("schema_too_costly")
def _(c: Context) -> object:
    """A chain of two-way `anyOf`s over references, forty links long: 2**40 paths for a string."""
    defs: dict[str, object] = {f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(40)}
    defs["l40"] = {"type": "integer"}
    violation = contract.check_output(function_tool(output_schema={"$ref": "#/$defs/l0", "$defs": defs}), "c", '"x"')
    assert violation is not None
    return violation.message


@trigger("schema_pattern_too_costly")
def _(c: Context) -> object:
    schema = {"type": "string", "pattern": "((a|a)+){1,500}!x"}

    async def on_the_loop() -> contract.Violation | None:  # where an output under 64 Ki characters is checked
        # (an output no other test checks: a verdict kept from one would not reach the message)
        return contract.check_output(function_tool(output_schema=schema), "c", json.dumps("a" * 59_999))

    violation = asyncio.run(on_the_loop())
    assert violation is not None
    return violation.message


@trigger("schema_loops")
def _(c: Context) -> object:
    violation = contract.check_output(function_tool(output_schema={"$ref": "#", "title": "trigger"}), "call_1", "{}")
    assert violation is not None
    return violation.message


@trigger("one_programmatic_tool_calling")
def _(c: Context) -> object:
    return c.create(input="hi", tools=[*PTC_TOOLS, {"type": "programmatic_tool_calling"}])


@trigger("after_finish_reason")
def _(c: Context) -> object:
    late = (
        'data: {"choices": [{"index": 0, "delta": {"content": "first"}, "finish_reason": "stop"}]}\n\n'
        'data: {"choices": [{"index": 0, "delta": {"content": " LATE"}}]}\n\ndata: [DONE]\n\n'
    )
    return asked(answering(status_code=200, text=late, headers=SSE), stream=True)


@trigger("call_ids_differ")
def _(c: Context) -> object:
    call = '{"index": 0, "id": "%s", "type": "function", "function": {"name": "lookup", "arguments": ""}}'
    two = (
        'data: {"choices": [{"index": 0, "delta": {"tool_calls": [%s]}}]}\n\n' % (call % "call_1")
        + 'data: {"choices": [{"index": 0, "delta": {"tool_calls": [%s]}}]}\n\n' % (call % "call_2")
        + 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\ndata: [DONE]\n\n'
    )
    return asked(answering(status_code=200, text=two, headers=SSE), stream=True)
