"""The entry script configures and starts a program in one eval, with the configuration after the
program's text. A program that breaks out of its function cannot start itself with a configuration
of its own (say, without its limits), nor capture the real one through a string, template or
comment it leaves open."""

from __future__ import annotations

import pytest

from ptc_emulator.sandbox import ToolResult
from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import completed_texts, failed, program

FORGED = (
    "JSON.stringify({now: 0, seed: [0, 0, 0, 0], maxCalls: 1e9, maxOut: 1e12, journal: [], tools: ['add'], "
    "textTools: []})"
)


def test_a_program_that_breaks_out_cannot_supply_its_own_configuration(pool: SyncPool) -> None:
    code = f"}}, {FORGED}); (function () {{"
    f = failed(pool.run(program(code)), "runtime")
    assert "denied" in f.message


@pytest.mark.parametrize(
    "opener",
    ["const t = String.raw`", "/*", "const s = 'x\\", 'const s = "x\\', "f(function () {"],
    ids=["template", "comment", "single-quoted", "double-quoted", "call"],
)
def test_what_a_program_leaves_open_cannot_swallow_the_configuration(pool: SyncPool, opener: str) -> None:
    # The journal holds every character that could close what the program opened.
    # (U+2028 and U+2029 end a line in JavaScript: carried raw, they would close a line comment.)
    journal = [ToolResult("add", '{"a":1,"b":2}', "` */ ' \" \\ --> <!-- ) } \u2028 \u2029")]
    outcome = pool.run(program(f"await tools.add({{a: 1, b: 2}});\n{opener}", journal=journal))
    assert outcome.status == "failed", outcome
    assert outcome.kind in ("syntax", "runtime"), outcome  # never a run with a forged configuration


def test_tool_outputs_with_script_characters_reach_the_program_unchanged(pool: SyncPool) -> None:
    text = "` */ ' \" \\ --> <!-- ) } \u2028 \U0001f600"
    journal = [ToolResult("echo", '{"s":1}', text)]
    outcome = pool.run(program("const r = await tools.echo({s: 1});\ntext(r);", journal=journal))
    assert completed_texts(outcome) == [text]
