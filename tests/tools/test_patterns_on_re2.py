"""The hosted tools' scripted patterns run on RE2 (`emulator/patterns.py`), never on Python's
backtracking `re`: a scenario's or `/hosted`'s code_interpreter `code` and shell `command`, as the
scenario matchers already did. `^(a|a)+$` against 40 `a`s and a `!` takes a backtracking engine 2**40 steps (it took the
server 3 s at 25 characters, doubling with each); here every request answers, and the test's
timeout is the only clock. A pattern that RE2 cannot run (a backreference, a lookaround) is refused
where it is given, naming it.
"""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js
from tests.tools.client_kinds_support import PTC

CATASTROPHIC = "^(a|a)+$"
LONG = "a" * 40 + "!"
CI = {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
SHELL = {"type": "shell", "environment": {"type": "container_auto"}, "allowed_callers": ["programmatic"]}


def test_hosted_patterns_run_on_re2(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.set_hosted(
        {"code_interpreter": [{"code": CATASTROPHIC, "logs": "x"}], "shell": [{"command": CATASTROPHIC}]}
    )
    client = ptc_emulator.client(max_retries=0)
    for tool, call in (
        (CI, f"tools.code_interpreter({{code: '{LONG}'}})"),
        (SHELL, f"tools.shell({{commands: ['{LONG}']}})"),
    ):
        response = client.responses.create(model="m", tools=[PTC, tool], input=js(f"await {call};"))  # type: ignore[list-item]
        output = response.output[1]
        assert output.type == "program_output" and output.status == "incomplete"  # no entry matches: unscripted
        assert "unscripted" in (output.result or "")


@pytest.mark.parametrize(
    ("hosted", "where"),
    [
        ({"shell": [{"command": r"(a)\1"}]}, "shell.0.command"),
        ({"code_interpreter": [{"code": "x(?=y)"}]}, "code_interpreter.0.code"),
    ],
    ids=["backreference", "lookahead"],
)
def test_a_hosted_pattern_re2_cannot_run_is_refused_when_added(
    ptc_emulator: PTCEmulator, hosted: dict[str, Any], where: str
) -> None:
    pattern = next(iter(hosted.values()))[0]
    pattern = pattern.get("command") or pattern.get("code")
    scenario = {"name": "hosted_re2", "match": {"input": "^x$"}, "hosted": hosted, "turns": [{"message": "m"}]}
    added = ptc_emulator.admin.post("/scenarios", json=scenario)
    assert added.status_code == 400, added.text
    error = added.json()["error"]
    assert error["code"] == "invalid_scenario"
    assert f"hosted.{where}" in error["message"] and f"invalid regular expression {pattern!r}" in error["message"]
    assert "no backreferences or lookaround" in error["message"]
    assert ptc_emulator.admin.put("/hosted", json=hosted).status_code == 400
