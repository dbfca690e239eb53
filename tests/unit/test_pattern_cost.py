"""User-given patterns are bounded by what one match may cost (`emulator/patterns.py`): RE2 is
linear in the text, but a pattern whose DFA overflows its memory falls back to a simulation that
costs the program's size per byte. `((a|a)+){1,1000}!x` (18 characters, 7005 instructions)
against 100,000 characters held the event loop 5.5 s. A pattern too large a program is refused
when given; a match whose size × bytes is past the budget is refused before it runs, naming the
field, instead of running for seconds. No clock: the refusal's wording is what the code before
could not produce (it ran the match, slowly, and answered otherwise).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from ptc_emulator.emulator.patterns import MATCH_BUDGET, OFF_LOOP_MATCH_BUDGET, PatternTooCostly, compile_pattern
from ptc_emulator.emulator.rules import contract, larkgrammar
from ptc_emulator.emulator.wire.tools import CustomTool, FunctionTool
from tests.support import PTC_TOOLS

HUGE = "((a|a)+){1,1000}!x"
"""7005 RE2 instructions: past what a pattern may compile to."""
COSTLY = "((a|a)+){1,500}!x"
"""3505 RE2 instructions: allowed, but not against more than 285 bytes."""
INTERPRETER = {"type": "code_interpreter", "container": {"type": "auto"}}


def _post(http: TestClient, path: str, body: Any) -> Any:
    return http.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


@pytest.fixture(autouse=True)
def _removed(unit_http: TestClient) -> Iterator[None]:
    """Each test's scenarios are removed after it (the app serves the whole module)."""
    yield
    for name in ("huge", "costly", "bytes", "long", "costly_hosted", "refund"):
        unit_http.delete(f"/_emulator/scenarios/{name}")


def _add(http: TestClient, scenario: dict[str, Any]) -> Any:
    return _post(http, "/_emulator/scenarios", scenario)


def _create(http: TestClient, text: str, tools: list[Any] | None = None) -> Any:
    return _post(http, "/v1/responses", {"model": "m", "input": text, "tools": tools or PTC_TOOLS, "store": False})


def test_a_pattern_that_compiles_to_too_large_a_program_is_refused_when_added(unit_http: TestClient) -> None:
    added = _add(unit_http, {"name": "huge", "match": {"input": HUGE}, "turns": [{"message": "m"}]})
    assert added.status_code == 400, added.text
    error = added.json()["error"]
    assert error["code"] == "invalid_scenario"
    assert "match.input" in error["message"] and "7005 RE2 instructions, more than 5000" in error["message"]


def test_a_scenario_matcher_too_costly_for_the_text_is_a_scenario_error_naming_it(unit_http: TestClient) -> None:
    added = _add(unit_http, {"name": "costly", "match": {"input": COSTLY}, "turns": [{"message": "m"}]})
    assert added.status_code == 201, added.text
    answered = _create(unit_http, "a" * 100_000)
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert error["code"] == "scenario_error" and error["param"] == "input"
    assert "Scenario 'costly': the pattern of match.input (3505 RE2 instructions)" in error["message"]
    # a text this long is read in a worker thread, where a match may cost more than on the event loop
    assert (
        f"against 100000 bytes of text: instructions × bytes may be at most {OFF_LOOP_MATCH_BUDGET}"
        in (error["message"])
    )


def test_the_text_is_counted_in_utf8_bytes(unit_http: TestClient) -> None:
    size = compile_pattern(COSTLY).size
    # within the budget in characters, past it in bytes (matched in a worker thread: a request that
    # could cost more than a match on the event loop may is matched in one)
    text = "é" * (OFF_LOOP_MATCH_BUDGET // size // 2 + 1)
    assert size * len(text) <= OFF_LOOP_MATCH_BUDGET
    _add(unit_http, {"name": "bytes", "match": {"input": COSTLY}, "turns": [{"message": "m"}]})
    answered = _create(unit_http, text)
    assert answered.status_code == 400, answered.text
    assert f"against {2 * len(text)} bytes of text" in answered.json()["error"]["message"]


def test_a_normal_pattern_still_matches_a_long_text_past_a_costly_scenario(unit_http: TestClient) -> None:
    """The costly scenario comes first (by name) and cannot tell: it is passed over, not a 400."""
    assert _add(unit_http, {"name": "costly", "match": {"input": COSTLY}, "turns": [{"message": "m"}]}).is_success
    scenario = {"name": "long", "match": {"input": r"^(?P<word>\w+) "}, "turns": [{"message": "got {{ word }}"}]}
    assert _add(unit_http, scenario).status_code == 201
    answered = _create(unit_http, "hello " + "x" * 50_000)
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "got hello"


def test_a_hosted_pattern_too_costly_for_the_code_is_a_scenario_error_naming_it(unit_http: TestClient) -> None:
    scenario = {
        "name": "costly_hosted",
        "match": {"input": "^costly_hosted$"},
        "hosted": {"code_interpreter": [{"code": COSTLY, "logs": "x"}]},
        "turns": [{"code_interpreter": {"code": "a" * 100_000}}],  # matched in a worker thread, and past its budget
    }
    assert _add(unit_http, scenario).status_code == 201
    answered = _create(unit_http, "costly_hosted", [INTERPRETER])
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert error["code"] == "scenario_error"
    assert (
        "hosted.code_interpreter.0.code (3505 RE2 instructions) is too costly to match against 100000"
        in (error["message"])
    )


def test_a_schema_pattern_too_costly_for_the_value_is_a_contract_violation_saying_so() -> None:
    tool = FunctionTool.model_validate(
        {"type": "function", "name": "f", "output_schema": {"type": "string", "pattern": COSTLY}}
    )

    async def on_the_loop() -> contract.Violation | None:  # where an output under 64 Ki characters is checked
        return contract.check_output(tool, "call_1", json.dumps("a" * 60_000))

    violation = asyncio.run(on_the_loop())
    assert violation is not None
    assert f"pattern {COSTLY!r} (3505 RE2 instructions) on 60000 bytes is too costly" in violation.message
    short = contract.check_output(tool, "call_1", json.dumps("a" * 200 + "!x"))
    assert short is None  # within the budget, the pattern runs and matches


def test_a_match_on_the_event_loop_has_the_small_budget_and_one_in_a_worker_thread_the_large() -> None:
    """RE2 releases the interpreter: a long match in a worker thread holds no other client."""
    pattern = compile_pattern(r"refund (\w+)")
    text = "x" * (MATCH_BUDGET // pattern.size + 1) + " refund r_42"

    async def on_the_loop() -> None:
        with pytest.raises(PatternTooCostly) as refused:
            pattern.search(text)
        assert refused.value.budget == MATCH_BUDGET
        found = await asyncio.to_thread(pattern.search, text)
        assert found is not None and found.group(1) == "r_42"

    asyncio.run(on_the_loop())


def test_a_common_pattern_matches_a_long_message_read_off_the_loop(unit_http: TestClient) -> None:
    """A 200,000-character message is read in a worker thread, where a short pattern matches all of
    it (on the event loop its budget would stop at 1 MB of instructions × bytes, about 60 KB)."""
    scenario = {"name": "refund", "match": {"input": r"refund (?P<id>r_\d+)"}, "turns": [{"message": "{{ id }}"}]}
    assert _add(unit_http, scenario).status_code == 201
    assert compile_pattern(r"refund (?P<id>r_\d+)").size * 200_000 > MATCH_BUDGET
    answered = _create(unit_http, "x" * 200_000 + " refund r_42")
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "r_42"


def test_a_custom_tools_regex_grammar_is_bounded_as_every_pattern_is() -> None:
    """A request's custom tool grammar was compiled and matched with no bound at all."""
    tool = CustomTool.model_validate(
        {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "regex", "definition": COSTLY}}
    )

    async def on_the_loop() -> contract.Violation | None:
        return contract.check_input(tool, "call_1", "a" * 10_000)

    violation = asyncio.run(on_the_loop())
    assert violation is not None
    assert "the input (10000 bytes) is too costly to match against the regex" in violation.message
    assert contract.check_input(tool, "call_1", "a" * 20 + "!x") is None


def test_a_lark_grammar_parse_is_bounded_by_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ambiguous grammar's Earley parse grows with the cube of the input and beyond: 200
    characters took 6.7 s of pure Python (which no thread lets go of) before the bound. The bound
    is lowered here so that reaching it costs the suite little; it is counted the same way."""
    monkeypatch.setattr(contract, "LARK_CALL_BUDGET", 100_000)
    ambiguous = CustomTool.model_validate(
        {
            "type": "custom",
            "name": "c",
            "format": {"type": "grammar", "syntax": "lark", "definition": 'start: x\nx: "a" | x x'},
        }
    )
    violation = contract.check_input(ambiguous, "call_1", "a" * 200)
    assert violation is not None
    assert "the input (200 characters) is too costly to parse with the lark grammar" in violation.message
    assert contract.check_input(ambiguous, "call_1", "a" * 5) is None
    assert contract.parses_lark(ambiguous)
    assert sys.gettrace() is None  # the step counter is gone once the parse ends


def _lark(definition: str) -> CustomTool:
    grammar = {"type": "grammar", "syntax": "lark", "definition": definition}
    return CustomTool.model_validate({"type": "custom", "name": "c", "format": grammar})


def test_a_lark_grammars_terminals_are_matched_by_re2_never_by_python_re(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, lark matched `/(a|aa)+c/` with Python's backtracking `re`: 2 s on 35 characters,
    doubling with each further one, in one C call the parse's budget of Python calls cannot end.
    Now lark's own matcher is never called; each terminal is matched by RE2, once per position."""
    from lark.parser_frontends import EarleyRegexpMatcher

    def refused(*args: object) -> None:
        raise AssertionError("a terminal was matched by Python's re")

    monkeypatch.setattr(EarleyRegexpMatcher, "match", refused)
    matches: list[int] = []
    match = larkgrammar.Terminals.match

    def counted(self: larkgrammar.Terminals, term: object, text: str, index: int = 0) -> object:
        matches.append(index)
        return match(self, term, text, index)

    monkeypatch.setattr(larkgrammar.Terminals, "match", counted)
    contract._cached_grammar.cache_clear()
    tool = _lark("start: /(a|aa)+c/")
    violation = contract.check_input(tool, "call_1", "a" * 45 + "b")  # about 250 s with re
    assert violation is not None and "No terminal matches" in violation.message
    assert matches == [0]
    assert contract.check_input(tool, "call_1", "a" * 45 + "c") is None


@pytest.mark.parametrize(
    "text",
    [
        '"plain"',
        '"esc \\" quote"',
        '"two \\\\"',
        '"three \\\\\\" still"',
        '"é ü"',
        '"a\\nb"',
        '""',
        '"unclosed',
        '"x\\\\\\"',
    ],
)
def test_escaped_string_matches_on_re2_as_lark_writes_it_with_a_lookbehind(text: str) -> None:
    """lark's common ESCAPED_STRING has a lookbehind (not RE2's); its RE2 equivalent accepts the same strings."""
    import re

    tool = _lark("start: ESCAPED_STRING\n%import common.ESCAPED_STRING")
    python = re.fullmatch(r'".*?(?<!\\)(\\\\)*?"', text) is not None
    assert (contract.check_input(tool, "call_1", text) is None) == python


def test_a_lark_parse_bounds_what_its_terminals_may_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(larkgrammar, "SCAN_BUDGET_FACTOR", 0)
    violation = contract.check_input(_lark('start: /a+/ "b"'), "call_1", "a" * 50 + "b")
    assert violation is not None
    assert (
        "is too costly to parse with the lark grammar: its terminals' matches may cost at most 0" in violation.message
    )
