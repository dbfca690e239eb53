"""Programs that suspend and resume by replay, tool results and errors, and image()/text()."""

from __future__ import annotations

import json
import re

import pytest

from ptc_emulator.sandbox import Completed, ImageOutput, PendingCall, Suspended, TextOutput, ToolResult
from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import (
    CAUGHT_ERROR,
    FANOUT9,
    IMAGES,
    RACE,
    SEQ50,
    THROW_AFTER_AWAIT,
    answer,
    completed_texts,
    failed,
    program,
    texts,
)


def test_fanout_of_nine_calls_suspends_once_with_all_pending_in_issue_order(pool: SyncPool) -> None:
    first = pool.run(program(FANOUT9))
    assert isinstance(first, Suspended)
    assert first.calls == 9
    assert first.outputs == ()
    assert first.pending == tuple(
        PendingCall(i - 1, "add", json.dumps({"a": i, "b": i * 10}, separators=(",", ":"))) for i in range(1, 10)
    )

    journal = [answer(p) for p in first.pending]
    done = pool.run(program(FANOUT9, journal=journal))
    assert done == Completed((TextOutput("sums=11,22,33,44,55,66,77,88,99"),), calls=9)


def test_fifty_dependent_calls_resume_one_at_a_time_by_replay(pool: SyncPool) -> None:
    d = pool.drive(program(SEQ50))
    assert len(d.suspensions) == 50
    acc = 0
    for i, s in enumerate(d.suspensions, start=1):
        # Each call depends on the previous result, so each suspension has exactly one call.
        assert s.pending == (PendingCall(i - 1, "add", json.dumps({"a": acc, "b": i}, separators=(",", ":"))),)
        acc += i
    assert d.outcome == Completed((TextOutput(f"acc={acc}"),), calls=50)
    assert acc == 1275


def test_promise_race_settles_with_the_first_call_in_issue_order(pool: SyncPool) -> None:
    d = pool.drive(program(RACE))
    assert [len(s.pending) for s in d.suspensions] == [2, 1]
    assert [p.arguments for p in d.suspensions[0].pending] == ['{"who":"first"}', '{"who":"second"}']
    # The loser's result is journaled too; the program goes on to a third call.
    assert d.suspensions[1].pending == (PendingCall(2, "add", '{"a":40,"b":2}'),)
    assert completed_texts(d.outcome) == ["winner=first", "next=42"]
    assert d.outcome.calls == 3


def test_promise_race_with_a_failing_first_call_rejects(pool: SyncPool) -> None:
    code = """
    try {
      await Promise.race([tools.fail({why: 'down'}), tools.echo({x: 1})]);
      text('resolved');
    } catch (e) { text('rejected: ' + e.message); }
    """
    assert completed_texts(pool.drive(program(code)).outcome) == ["rejected: tool failed: down"]


def test_caught_tool_error_keeps_its_message(pool: SyncPool) -> None:
    d = pool.drive(program(CAUGHT_ERROR))
    assert d.journal[0].is_error
    assert d.journal[0].output == "tool failed: no such order\nsecond line \u00fc"
    assert completed_texts(d.outcome) == [
        "caught true Error: tool failed: no such order\nsecond line \u00fc",
        "after=42",
    ]


def test_uncaught_tool_error_fails_the_program_with_its_message(pool: SyncPool) -> None:
    d = pool.drive(program("text('before');\nawait tools.fail({why: 'disk full'});\ntext('after');"))
    f = failed(d.outcome, "runtime")
    assert f.message.startswith("Error: tool failed: disk full")
    assert f.outputs == (TextOutput("before"),)
    assert f.calls == 1


def test_thrown_error_after_an_await_names_the_program_line(pool: SyncPool) -> None:
    d = pool.drive(program(THROW_AFTER_AWAIT))
    f = failed(d.outcome, "runtime")
    first_line = f.message.splitlines()[0]
    assert first_line == "TypeError: bad thing 2 (line 4)"
    assert "at inner (program.js:4:9)" in f.message
    assert "program.js:6:1" in f.message
    assert f.outputs == (TextOutput("v=2"),)
    assert f.calls == 1
    assert "ptc-prelude" not in f.message and "__ptc" not in f.message


@pytest.mark.parametrize(
    ("code", "header", "frame"),
    [
        # Line 1 shares its row with the host's wrapper: the column is still the program's.
        ("throw new Error('first line')", "Error: first line (line 1)", "program.js:1:7"),
        (
            "const o = null;\n\n\nconsole_free = o.x;",
            "TypeError: Cannot read properties of null",
            "program.js:4:",
        ),
        (
            "function a() { b(); }\nfunction b() {\n  throw new RangeError('deep');\n}\na();",
            "RangeError: deep (line 3)",
            "at b (program.js:3:9)",
        ),
    ],
)
def test_thrown_error_reports_line_and_frame(pool: SyncPool, code: str, header: str, frame: str) -> None:
    f = failed(pool.run(program(code)), "runtime")
    assert f.message.startswith(header)
    line = int(re.search(r"program\.js:(\d+):", frame).group(1))  # type: ignore[union-attr]
    assert f"(line {line})" in f.message.splitlines()[0]
    assert frame in f.message


def test_throwing_a_non_error_value(pool: SyncPool) -> None:
    f = failed(
        pool.run(
            program(
                "await tools.add({a: 1, b: 1});\nthrow 'plain string';",
                journal=[ToolResult("add", '{"a":1,"b":1}', "2")],
            )
        ),
        "runtime",
    )
    assert f.message == "Uncaught plain string"
    assert f.calls == 1


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("let x = ;", "SyntaxError: Unexpected token ';' (line 1)\nlet x = ;"),
        (
            "const a = 1;\n\nlet y = ;\nconst b = 2;",
            "SyntaxError: Unexpected token ';' (line 3)\nlet y = ;\n        ^",
        ),
        # At end of input the error is reported on the program's last line.
        ("function f() {\n  return (1 +\n", "SyntaxError: Unexpected end of input (line 3)"),
        ("const o = {\n  a: 1,\n  b: [1, 2", "SyntaxError: Unexpected end of input (line 3)"),
    ],
)
def test_syntax_error_reports_its_line(pool: SyncPool, code: str, expected: str) -> None:
    f = failed(pool.run(program(code)), "syntax")
    assert f.message == expected
    assert f.calls == 0 and f.outputs == ()


def test_syntax_error_is_found_before_anything_runs(pool: SyncPool) -> None:
    f = failed(pool.run(program("text('never');\nawait tools.add({a: 1, b: 2});\nlet = = 3;")), "syntax")
    assert "(line 3)" in f.message
    assert f.outputs == () and f.calls == 0


def test_tool_outputs_are_parsed_when_they_are_json(pool: SyncPool) -> None:
    outs = ['{"a": [1, 2], "b": {"c": null}}', "42", "hello world", '"quoted"', "", "null", "[1, 2", "true"]
    code = f"""
    const outs = {json.dumps(outs)};
    const got = await Promise.all(outs.map((out) => tools.raw({{out}})));
    for (const v of got) text(typeof v, JSON.stringify(v));
    """
    d = pool.drive(program(code))
    assert completed_texts(d.outcome) == [
        'object {"a":[1,2],"b":{"c":null}}',
        "number 42",
        'string "hello world"',
        'string "quoted"',
        'string ""',
        "object null",
        'string "[1, 2"',
        "boolean true",
    ]


def test_text_joins_its_arguments_and_serialises_values(pool: SyncPool) -> None:
    code = "text('a', 1, {b: [2]}, null, true);\ntext();\ntext('\u00e9\\n\u2603');"
    assert completed_texts(pool.run(program(code))) == ['a 1 {"b":[2]} null true', "", "\u00e9\n\u2603"]


def test_a_tool_argument_must_be_a_json_object(pool: SyncPool) -> None:
    code = """
    for (const bad of [42, 'str', [1], null]) {
      try { await tools.echo(bad); text('accepted'); } catch (e) { text(e.name); }
    }
    const cyc = {}; cyc.self = cyc;
    try { await tools.echo(cyc); } catch (e) { text(e.name); }
    text(JSON.stringify(await tools.echo()));
    """
    d = pool.drive(program(code))
    assert completed_texts(d.outcome) == ["TypeError"] * 5 + ["{}"]
    assert d.trace == [(0, "echo", "{}")]


def test_image_accepts_data_and_https_urls(pool: SyncPool) -> None:
    d = pool.drive(program(IMAGES))
    assert d.outcome == Completed(
        (
            ImageOutput("data:image/png;base64,iVBORw0KGgo="),
            ImageOutput("https://example.com/cat.png"),
            TextOutput("TypeError"),
        ),
        calls=1,
    )


@pytest.mark.parametrize(
    "bad",
    [
        "'http://example.com/a.png'",
        "'data:text/plain;base64,aGVsbG8='",
        "'data:image/png;base64,not base64!'",
        "'https://exa mple.com/a.png'",
        "'javascript:alert(1)'",
        "42",
        "null",
        "{url: 'ftp://example.com/a.png'}",
        "['https://example.com/a.png']",
    ],
)
def test_image_rejects_anything_else_with_a_catchable_type_error(pool: SyncPool, bad: str) -> None:
    code = f"try {{ image({bad}); text('accepted'); }} catch (e) {{ text(e.name + ': ' + e.message); }}"
    [message] = completed_texts(pool.run(program(code)))
    assert message.startswith("TypeError: image() takes")


def test_image_accepts_an_object_with_image_url_or_url(pool: SyncPool) -> None:
    code = "image({image_url: 'https://example.com/a.png'}); image({url: 'data:image/webp;base64,AAAA'});"
    assert pool.run(program(code)).outputs == (
        ImageOutput("https://example.com/a.png"),
        ImageOutput("data:image/webp;base64,AAAA"),
    )


def test_uncaught_image_error_fails_the_program(pool: SyncPool) -> None:
    f = failed(pool.run(program("text('ok');\nimage('nope');")), "runtime")
    assert f.message.startswith("TypeError: image() takes")
    assert "(line 2)" in f.message
    assert f.outputs == (TextOutput("ok"),)


def test_outputs_before_a_suspension_are_reported_with_it(pool: SyncPool) -> None:
    code = "text('one');\nimage('https://x.test/i.png');\nawait tools.add({a: 1, b: 2});\ntext('two');"
    first = pool.run(program(code))
    assert isinstance(first, Suspended)
    assert first.outputs == (TextOutput("one"), ImageOutput("https://x.test/i.png"))


def test_a_promise_that_can_never_settle_is_a_runtime_failure(pool: SyncPool) -> None:
    f = failed(pool.run(program("text('waiting');\nawait new Promise(() => {});")), "runtime")
    assert "can never settle" in f.message
    assert texts(f) == ["waiting"]


def test_an_unknown_tool_is_a_type_error(pool: SyncPool) -> None:
    f = failed(pool.run(program("await tools.nope({});", tools=("add",))), "runtime")
    assert f.message.startswith("TypeError: tools.nope is not a function (line 1)")
