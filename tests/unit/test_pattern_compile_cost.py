"""What a user-given pattern may cost to compile, bounded from its text before RE2 compiles it
(`emulator/patterns.py`). RE2's compile holds the interpreter even in a worker thread, and the
5000-instruction bound did not bound it: `(?i)(?:\\PL|\\PL|...)` (4,087 characters, 1,214
instructions) compiled in 0.2 to 0.3 s, and a custom tool's regex grammar had no bound at all (80
KB of them held every client 4 to 5 s). No clock: the compiles are counted (none for a pattern
refused from its text), and the refusals named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import re2
from starlette.testclient import TestClient

from ptc_emulator.emulator import patterns
from ptc_emulator.emulator.patterns import MAX_PROPERTY_CLASSES

NONCE = iter(range(10**6))


def _alternatives(count: int) -> str:
    """`count` case-folded complements of the letters, and a text of its own (no cache has it)."""
    return "(?i)(?:" + "|".join([r"\PL"] * count) + f"|x{next(NONCE)}z)"


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The patterns RE2 is asked to compile, from here on."""
    seen: list[str] = []
    real = re2.compile

    def counted(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(pattern)
        return real(pattern, *args, **kwargs)

    monkeypatch.setattr(patterns.re2, "compile", counted)
    yield seen


def _post(http: TestClient, path: str, body: Any) -> Any:
    return http.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def _function(pattern: str) -> dict[str, Any]:
    properties = {"a": {"type": "string", "pattern": pattern}}
    return {"type": "function", "name": "f", "parameters": {"type": "object", "properties": properties}}


def test_a_schema_pattern_of_too_many_property_classes_is_refused_uncompiled(
    unit_http: TestClient, compiles: list[str]
) -> None:
    costly = _alternatives(MAX_PROPERTY_CLASSES + 1)
    answered = _post(unit_http, "/v1/responses", {"model": "m", "input": "hi", "tools": [_function(costly)]})
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert f"names {MAX_PROPERTY_CLASSES + 1} Unicode property classes" in error["message"]
    assert error["param"] is not None and "tools" in error["param"]
    assert costly not in compiles  # refused from its text: RE2 never built it


def test_a_schema_pattern_within_the_bound_is_compiled(unit_http: TestClient, compiles: list[str]) -> None:
    fits = _alternatives(MAX_PROPERTY_CLASSES)
    answered = _post(unit_http, "/v1/responses", {"model": "m", "input": "hi", "tools": [_function(fits)]})
    assert answered.status_code != 400 or "property classes" not in answered.text
    assert fits in compiles


def test_a_scenario_matcher_of_too_many_property_classes_is_refused_uncompiled(
    unit_http: TestClient, compiles: list[str]
) -> None:
    costly = _alternatives(MAX_PROPERTY_CLASSES + 1)
    scenario = {"name": "classes", "match": {"input": costly}, "turns": [{"message": "m"}]}
    added = _post(unit_http, "/_emulator/scenarios", scenario)
    assert added.status_code == 400, added.text
    assert "match.input" in added.json()["error"]["message"]
    assert "Unicode property classes" in added.json()["error"]["message"]
    hosted = unit_http.put("/_emulator/hosted", json={"code_interpreter": [{"code": costly, "logs": "x"}]})
    assert hosted.status_code == 400, hosted.text
    assert "code_interpreter" in hosted.json()["error"]["message"]
    assert costly not in compiles


@pytest.mark.parametrize(
    ("definition", "why"),
    [
        ("(?i)(?:" + "|".join([r"\PL"] * 20_000) + ")", "longer than 4096 characters"),
        (_alternatives(MAX_PROPERTY_CLASSES + 1), "Unicode property classes"),
    ],
)
def test_a_regex_grammar_is_bounded_before_its_compile(
    unit_http: TestClient, compiles: list[str], definition: str, why: str
) -> None:
    """An 80 KB definition was compiled as given: 4 to 5 s of RE2 holding the interpreter."""
    grammar = {"type": "grammar", "syntax": "regex", "definition": definition}
    tools = [{"type": "custom", "name": "g", "format": grammar}]
    answered = _post(unit_http, "/v1/responses", {"model": "m", "input": "hi", "tools": tools})
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert "Invalid regex grammar for custom tool 'g'" in error["message"] and why in error["message"]
    assert error["param"] is not None
    assert definition not in compiles


def test_a_regex_grammar_too_large_a_program_stops_within_its_bound(compiles: list[str]) -> None:
    """Compiled within `_MAX_MEM` at once, `(?i)[\\pL\\pN\\pP]{300}` was built to 432,000
    instructions before anything looked at its size; within the grammar's bound, RE2 stops."""
    with pytest.raises(patterns.PatternError, match="more than 20000 RE2 instructions"):
        patterns.compile_grammar(r"(?i)[\pL\pN\pP]{300}")
    assert len(compiles) == 1
