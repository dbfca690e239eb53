"""A user-given pattern too large a program is refused before RE2 builds it, and the refusal is
kept (`emulator/patterns.py`). Compiled within 8 MiB at once, `(?i)[\\pL\\pN\\pP]{300}` (22
characters) was built to its 432,000 instructions, 0.3 s with the interpreter held, before its
size was refused, again for every request or scenario that gave it: a 199-byte request with a
function tool's `pattern` held every other client 0.35-0.49 s, a scenario of 30 such history
patterns 12.6 s. No clock: every program RE2 builds is counted (its instructions), and each time
RE2 is asked to compile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import re2
from starlette.testclient import TestClient

from ptc_emulator.emulator.patterns import MAX_PROGRAM_SIZE

HUGE = r"(?i)[\pL\pN\pP]{300}"
"""432,004 RE2 instructions when built whole."""


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The size of every program RE2 builds of these tests' patterns (-1: a compile refused)."""
    sizes: list[int] = []
    real = re2.compile

    def counted(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        if "\\pP]" not in str(pattern):
            return real(pattern, *args, **kwargs)  # the server's own
        try:
            compiled = real(pattern, *args, **kwargs)
        except re2.error:
            sizes.append(-1)
            raise
        sizes.append(int(compiled.programsize))
        return compiled

    monkeypatch.setattr(re2, "compile", counted)
    yield sizes


def _post(http: TestClient, path: str, body: Any) -> Any:
    return http.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def test_a_function_tools_schema_pattern_too_large_is_refused_before_it_is_built(
    unit_http: TestClient, built: list[int]
) -> None:
    pattern = HUGE.replace("300", "307")  # a pattern of its own: not compiled by another test
    tool = {"type": "function", "name": "f", "parameters": {"type": "string", "pattern": pattern}}
    for _ in range(3):
        answered = _post(unit_http, "/v1/responses", {"model": "m", "input": "hi", "tools": [tool]})
        assert answered.status_code == 400, answered.text
        error = answered.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert f"more than {MAX_PROGRAM_SIZE} RE2 instructions" in error["message"]
    assert built, "the pattern was never compiled"
    assert max(built) <= MAX_PROGRAM_SIZE, f"RE2 built a program of {max(built)} instructions"
    assert len(built) == 1, f"the refusal was not kept: compiled {len(built)} times"


def test_a_scenarios_history_pattern_too_large_is_refused_before_it_is_built(
    unit_http: TestClient, built: list[int]
) -> None:
    pattern = HUGE.replace("300", "301")
    history = [{"text": pattern + "x" * i} for i in range(3)]
    scenario = {"name": "huge_history", "match": {"input": "^q$", "history": history}, "turns": [{"message": "x"}]}
    added = _post(unit_http, "/_emulator/scenarios", scenario)
    assert added.status_code == 400, added.text
    assert added.json()["error"]["code"] == "invalid_scenario"
    assert "match.history.0.text" in added.json()["error"]["message"]
    assert built and max(built) <= MAX_PROGRAM_SIZE, f"RE2 built a program of {max(built)} instructions"
