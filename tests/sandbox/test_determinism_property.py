"""Replay determinism as a property: whatever a program observes is the same in every mode.

Programs are generated from a grammar (awaits, tool calls, try/catch, error stacks, Promise
combinators, getters on `Promise[Symbol.species]`, `Promise.prototype.then` and `constructor`,
thenables, Symbol and Proxy tricks, a program's own `Error.prepareStackTrace`). Each one is
driven to its end twice in a subprocess (`determinism_driver.py`; V8 never runs in the pytest
process): resumed live (one context, handed the results) and resumed by replay (a fresh context
per resume, answered from the items). Both must see the same calls with the same arguments, in
the same suspensions, and end with the same outcome; none may see the runtime's own frames.

The default run checks a few hundred programs from a fixed seed (reproducible, tens of seconds).
`PTC_DETERMINISM_EXAMPLES=5000` runs that many, from a random seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("PTC_DETERMINISM_EXAMPLES", "0"))


class Driver:
    """The long-lived subprocess that runs each program both ways."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.sandbox.determinism_driver"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def both_ways(self, code: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"code": code}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the driver died (exit {self.proc.poll()}) on:\n{code}"
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    d = Driver()
    yield d
    d.close()


# ---- the grammar -----------------------------------------------------------------------------
# Every statement records what it saw in `L` or counts hooks in `n`; both flow into tool
# arguments (`tools.echo`, `tools.add`) and into the final text, so any difference shows as a
# different call (a divergence) or a different result.

ints = st.integers(min_value=0, max_value=99)

LEAVES: list[str] = [
    "L.push(await tools.add({{a: {i}, b: L.length}}));",
    "L.push((await tools.echo({{s: new Error('e{i}').stack}})).s);",
    "try {{ await tools.fail({{why: 'w{i}'}}); }} catch (e) {{ L.push(e.stack, String(e)); }}",
    "L.push(await Promise.all([tools.add({{a: {i}, b: n}}), tools.echo({{k: {i}, n}})]));",
    "L.push((await Promise.allSettled([tools.fail({{why: 'x{i}'}}), tools.add({{a: {i}, b: 2}})]))"
    ".map((r) => r.status + ':' + (r.status === 'fulfilled' ? r.value : r.reason.stack)));",
    "L.push(await Promise.race([tools.echo({{r: {i}}}), tools.add({{a: n, b: {i}}})]));",
    "L.push(await Promise.any([tools.fail({{why: 'a{i}'}}), tools.echo({{any: {i}}})]));",
    "Object.defineProperty(Promise, Symbol.species, {{configurable: true, get() {{ n++; return Promise; }}}});",
    "{{ const d = Object.getOwnPropertyDescriptor(Promise.prototype, 'then'); const f = d.get ? d.get() : d.value;"
    " Object.defineProperty(Promise.prototype, 'then', {{configurable: true, get() {{ n++; return f; }}}}); }}",
    "Object.defineProperty(Promise.prototype, 'constructor',"
    " {{configurable: true, get() {{ n++; return Promise; }}}});",
    "Object.defineProperty(Object.prototype, 'then', {{configurable: true, get() {{ n++; return undefined; }}}});",
    "L.push(new Error('s{i}').stack);",
    "try {{ null[{i}]; }} catch (e) {{ L.push(e.stack); }}",
    "Error.prepareStackTrace = (e, fs) => String(e) + fs.map((f) => '|' + f.getFunctionName() + '@' +"
    " f.getLineNumber() + ':' + f.getColumnNumber() + ':' + f.getScriptNameOrSourceURL()).join('');",
    "L.push(await tools.echo(new Proxy({{p: {i}}}, {{get(t, k, r) {{ n++; return Reflect.get(t, k, r); }},"
    " ownKeys(t) {{ n++; return Reflect.ownKeys(t); }}}})));",
    "L.push(await tools.echo({{s: String({{[Symbol.toPrimitive]() {{ n++; return 'prim' + n; }}}})}}));",
    "{{ const it = Array.prototype[Symbol.iterator]; Object.defineProperty(Array.prototype, Symbol.iterator,"
    " {{configurable: true, writable: true, value: function () {{ n++; return it.call(this); }}}}); }}",
    "await tools.add({{a: n, b: L.length}});",
    "L.push(await {{then(r) {{ n++; r({i}); }}}});",
    "await null; L.push(n);",
    "L.push(Math.random(), Date.now());",
    "{{ const o = {{}}; Error.captureStackTrace(o); L.push(o.stack); }}",
    "Error.prepareStackTrace = (e, fs) => fs.map((f) => [f.getScriptHash(), f.getPosition(), f.getFileName(),"
    " f.getEvalOrigin(), f.getEnclosingLineNumber(), f.getEnclosingColumnNumber(), f.isToplevel(),"
    " f.getPromiseIndex()].join(',')).join('|'); L.push(new Error('c{i}').stack);",
    "L.push(await Promise.resolve({i}).then((v) => {{ n++; return v; }}));",
]

leaf = st.builds(lambda t, i: t.format(i=i), st.sampled_from(LEAVES), ints)


def _nested(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    block = st.lists(children, min_size=1, max_size=3).map(" ".join)
    return st.one_of(
        st.builds(
            lambda b, i: f"L.push(await (async function h{i}() {{ {b} return new Error('h{i}').stack; }})());",
            block,
            ints,
        ),
        st.builds(
            lambda b, i: f"try {{ {b} throw new RangeError('r{i}'); }} catch (e) {{ L.push(e.stack); }}", block, ints
        ),
        st.builds(lambda b, i: f"{{ const p{i} = tools.add({{a: {i}, b: 0}}); {b} L.push(await p{i}); }}", block, ints),
        st.builds(lambda b: f"await Promise.all([(async () => {{ {b} }})(), tools.echo({{n}})]);", block),
    )


statement = st.recursive(leaf, _nested, max_leaves=8)

END = st.sampled_from(
    [
        "text(JSON.stringify([n, L]));",
        "text(JSON.stringify([n, L])); throw new Error('end');",
        "text(JSON.stringify([n, L])); null.end;",
        "return JSON.stringify([n, L]);",
    ]
)


@st.composite
def programs(draw: st.DrawFn) -> str:
    body = draw(st.lists(statement, min_size=1, max_size=6))
    end = draw(END)
    sep = draw(st.sampled_from([" ", "\n"]))  # one line (columns on line 1) or many
    return sep.join(["let n = 0; const L = [];", *body, end])


def _settings() -> settings:
    if EXAMPLES:
        return settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    return settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.timeout(max(900, 3 * EXAMPLES))  # one test, hundreds of programs: not the suite's per-test limit
@_settings()
@given(code=programs())
def test_live_resume_equals_replay_for_generated_programs(driver: Driver, code: str) -> None:
    result = driver.both_ways(code)
    replay, live = result["replay"], result["live"]
    assert live == replay, code
    seen = json.dumps(replay)
    assert "ptc-prelude" not in seen, code
    assert replay["outcome"].get("kind") != "divergence", code


def test_the_grammar_reaches_suspensions_failures_and_hooks(driver: Driver) -> None:
    """A sanity check on the generator's reach: a fixed program with every hook suspends several
    times, counts hook calls, and both ways agree."""
    code = "\n".join(
        ["let n = 0; const L = [];", *(t.format(i=k) for k, t in enumerate(LEAVES)), "text(JSON.stringify([n, L]));"]
    )
    result = driver.both_ways(code)
    assert result["live"] == result["replay"]
    assert len(result["replay"]["suspensions"]) >= 10
    assert result["replay"]["outcome"]["status"] == "completed", result["replay"]["outcome"]


# ---- the findings this property replaced, each kept as a named case --------------------------


def test_an_error_stack_passed_to_a_tool_is_the_same_live_and_on_replay(driver: Driver) -> None:
    # The host text before the program used to hold the history, so columns on line 1 moved.
    code = "let s; try { null.x } catch (e) { s = e.stack } await tools.echo({s}); text((await tools.echo({s})).s);"
    result = driver.both_ways(code)
    assert result["live"] == result["replay"]
    assert result["replay"]["outcome"]["status"] == "completed", result["replay"]["outcome"]


def test_a_species_getter_counts_the_same_live_and_on_replay(driver: Driver) -> None:
    for hook in (
        "Object.defineProperty(Promise, Symbol.species, {get() { n++; return Promise; }, configurable: true});",
        "Object.defineProperty(Promise.prototype, 'constructor',"
        " {get() { n++; return Promise; }, configurable: true});",
    ):
        code = f"let n = 0; {hook}\nawait tools.add({{a: 1, b: 2}}); await tools.add({{a: n, b: 0}}); text(String(n));"
        result = driver.both_ways(code)
        assert result["live"] == result["replay"], hook
        # The runtime's own promises are invisible: only the program's awaits count.
        assert result["replay"]["outcome"]["outputs"][0]["text"] in ("0", "2"), result["replay"]["outcome"]


def test_the_runtimes_frames_never_show_in_a_programs_stacks(driver: Driver) -> None:
    code = (
        "text(new Error('top').stack);\n"
        "try { await tools.fail({why: 'x'}); } catch (e) { text(e.stack); }\n"
        "try { await tools.add({a: 1n}); } catch (e) { text(e.stack); }\n"
        "Error.prepareStackTrace = (e, fs) => fs.map((f) => f.getScriptNameOrSourceURL()).join(',');\n"
        "text(new Error('custom').stack);"
    )
    result = driver.both_ways(code)
    assert result["live"] == result["replay"]
    texts = [o["text"] for o in result["replay"]["outcome"]["outputs"]]
    assert len(texts) == 4 and not any("ptc-prelude" in t for t in texts), texts
    assert texts[0].startswith("Error: top\n    at program.js:1:"), texts
    assert texts[1] == "Error: tool failed: x", texts
    assert texts[3] and set(texts[3].split(",")) == {"program.js"}, texts
