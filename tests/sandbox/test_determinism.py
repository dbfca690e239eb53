"""Seeded randomness, a pinned clock, byte-identical outcomes across processes, and divergence."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from ptc_emulator.sandbox import Completed, PoolConfig, TextOutput, ToolResult
from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import (
    CLOCK_MS,
    RANDOM_AND_CLOCK,
    SEED,
    answer,
    completed_texts,
    failed,
    outcome_json,
    program,
)

RANDOMS = "text(JSON.stringify(Array.from({length: 8}, () => Math.random())));"


def randoms(pool: SyncPool, seed: int) -> list[float]:
    values: list[float] = json.loads(completed_texts(pool.run(program(RANDOMS, seed=seed)))[0])
    return values


def test_math_random_is_seeded(pool: SyncPool) -> None:
    a, b = randoms(pool, SEED), randoms(pool, SEED)
    assert a == b
    assert len(set(a)) == 8 and all(0 <= x < 1 for x in a)
    assert randoms(pool, SEED + 1) != a
    assert randoms(pool, 0) != randoms(pool, 1)
    # Only the low 128 bits count.
    assert randoms(pool, SEED + 2**128) == a


def sfc32(seed: int) -> Callable[[], float]:
    """Reference: sfc32 seeded with the low 128 bits as four 32-bit words, warmed up 16 times."""
    m = 0xFFFFFFFF
    a, b, c, d = ((seed >> (32 * i)) & m for i in range(4))

    def step() -> float:
        nonlocal a, b, c, d
        t = (a + b) & m
        a = b ^ (b >> 9)
        b = (c + (c << 3)) & m
        c = ((c << 21) | (c >> 11)) & m
        d = (d + 1) & m
        t = (t + d) & m
        c = (c + t) & m
        return t / 2**32

    for _ in range(16):
        step()
    return step


@pytest.mark.parametrize("seed", [SEED, 0, 1, 123456789, 2**128 - 1])
def test_math_random_is_sfc32_of_the_seed(pool: SyncPool, seed: int) -> None:
    step = sfc32(seed)
    assert randoms(pool, seed) == [step() for _ in range(8)]


def test_random_sequence_continues_across_awaits_identically_on_replay(pool: SyncPool) -> None:
    code = """
    const r1 = Math.random();
    await tools.add({a: 1, b: 2});
    const r2 = Math.random();
    text(JSON.stringify([r1, r2]));
    """
    d = pool.drive(program(code))
    r1, r2 = json.loads(completed_texts(d.outcome)[0])
    assert [r1, r2] == randoms(pool, SEED)[:2]


def test_date_and_intl_are_pinned_to_the_clock(pool: SyncPool) -> None:
    code = """
    text(String(Date.now()));
    text(String(new Date().getTime()));
    text(new Date().toISOString());
    text(Date());
    text(String(Date() === new Date().toString()));
    const dtf = (options) => new Intl.DateTimeFormat('en-US', {timeZone: 'UTC', ...options});
    text(dtf({dateStyle: 'short', timeStyle: 'medium'}).format());
    text(JSON.stringify(dtf({year: 'numeric'}).formatToParts()));
    text(new Date().toLocaleString('en-US', {timeZone: 'UTC'}));
    // Explicit dates still work, and the clock does not move across an await.
    text(new Date(0).toISOString(), String(Date.UTC(2020, 0, 1)), String(Date.parse('2020-01-01T00:00:00Z')));
    text(String(new Date() instanceof Date), String(Date.prototype.constructor === Date));
    await tools.add({a: 1, b: 2});
    text(String(Date.now()));
    """
    now = datetime.fromtimestamp(CLOCK_MS / 1000, UTC)
    assert completed_texts(pool.drive(program(code)).outcome) == [
        str(CLOCK_MS),
        str(CLOCK_MS),
        "2023-11-14T22:13:20.000Z",
        "Tue Nov 14 2023 22:13:20 GMT+0000 (Coordinated Universal Time)",
        "true",
        "11/14/23, 10:13:20 PM",
        '[{"type":"year","value":"2023"}]',
        "11/14/2023, 10:13:20 PM",
        "1970-01-01T00:00:00.000Z 1577836800000 1577836800000",
        "true true",
        str(CLOCK_MS),
    ]
    assert now.isoformat() == "2023-11-14T22:13:20+00:00"


def test_another_clock_gives_other_dates(pool: SyncPool) -> None:
    code = "text(new Date().toISOString(), String(Date.now()), new Intl.DateTimeFormat('en-US').format());"
    assert completed_texts(pool.run(program(code, clock_ms=0))) == ["1970-01-01T00:00:00.000Z 0 1/1/1970"]
    assert completed_texts(pool.run(program(code, clock_ms=CLOCK_MS))) == [
        f"2023-11-14T22:13:20.000Z {CLOCK_MS} 11/14/2023"
    ]


def test_identical_outcomes_from_separate_processes(
    pool: SyncPool, make_pool: Callable[[PoolConfig], SyncPool]
) -> None:
    # The same programs, driven in the shared pool and in two fresh pools (fresh processes, and
    # with spare contexts created ahead of time in one of them), give identical outcomes and
    # identical pending calls, random numbers and dates included.
    progs = [
        program(RANDOM_AND_CLOCK),
        program(RANDOMS),
        program(RANDOM_AND_CLOCK, seed=1, clock_ms=86_400_000),
    ]
    fresh = [make_pool(PoolConfig(size=1)), make_pool(PoolConfig(size=1, spare_contexts=2))]
    assert not set(fresh[0].pids()) & set(fresh[1].pids()) and not set(fresh[0].pids()) & set(pool.pids())
    results = [[p.drive(prog).as_json() for prog in progs] for p in (pool, *fresh)]
    assert results[0] == results[1] == results[2]
    # ...and the two seeds/clocks really produced different data.
    assert results[0][0] != results[0][2]


def test_random_and_clock_program_output(pool: SyncPool) -> None:
    d = pool.drive(program(RANDOM_AND_CLOCK))
    out = json.loads(completed_texts(d.outcome)[0])
    assert out["a"]["now"] == CLOCK_MS and out["a"]["iso"] == "2023-11-14T22:13:20.000Z"
    assert out["b"]["s"] == "Tue Nov 14 2023 22:13:20 GMT+0000 (Coordinated Universal Time)"
    assert out["c"]["fmt"] == "Tuesday, November 14, 2023 at 10:13:20 PM UTC"
    assert [out["a"]["r1"], out["b"]["r2"], out["r3"]] == randoms(pool, SEED)[:3]
    # Each random number was already part of the calls the host saw.
    assert json.loads(d.suspensions[0].pending[0].arguments)["r1"] == out["a"]["r1"]


# ---- divergence --------------------------------------------------------------------------------

TWO_CALLS = """
const x = await tools.add({a: 1, b: 2});
const y = await tools.echo({x, tag: 'second'});
text(JSON.stringify(y));
"""


def test_the_faithful_journal_replays(pool: SyncPool) -> None:
    d = pool.drive(program(TWO_CALLS))
    assert d.outcome == Completed((TextOutput('{"x":3,"tag":"second"}'),), calls=2)
    assert [(r.name, r.arguments) for r in d.journal] == [
        ("add", '{"a":1,"b":2}'),
        ("echo", '{"x":3,"tag":"second"}'),
    ]


@pytest.mark.parametrize(
    ("journal", "message"),
    [
        pytest.param(
            [ToolResult("echo", '{"a":1,"b":2}', "3")],
            'tool call 0 was add({"a":1,"b":2}) on replay but the journal has echo({"a":1,"b":2})',
            id="other-tool-name",
        ),
        pytest.param(
            [ToolResult("add", '{"a":1,"b":3}', "3")],
            'tool call 0 was add({"a":1,"b":2}) on replay but the journal has add({"a":1,"b":3})',
            id="other-arguments",
        ),
        pytest.param(
            [ToolResult("add", '{"a":1}', "3")],
            'tool call 0 was add({"a":1,"b":2}) on replay but the journal has add({"a":1})',
            id="missing-argument",
        ),
        pytest.param(
            [ToolResult("add", '{"a":1,"b":2}', "3"), ToolResult("echo", '{"x":4,"tag":"second"}', "{}")],
            'tool call 1 was echo({"x":3,"tag":"second"}) on replay '
            'but the journal has echo({"x":4,"tag":"second"})',
            id="second-call-differs",
        ),
        pytest.param(
            [ToolResult("add", '{"a":1,"b":2}', "3"), ToolResult("echo", '{"x":3,"tag":"second"}', "{}"),
             ToolResult("add", '{"a":0,"b":0}', "0")],
            "the journal holds 3 results but the program made only 2 tool calls",
            id="extra-entry-after-completion",
        ),
        pytest.param(
            [ToolResult("add", '{"a":1,"b":2}', '"n"'), ToolResult("echo", '{"x":"n","tag":"second"}', "{}"),
             ToolResult("add", '{"a":0,"b":0}', "0"), ToolResult("add", '{"a":0,"b":0}', "0")],
            "the journal holds 4 results but the program made only 2 tool calls",
            id="two-extra-entries",
        ),
    ],
)  # fmt: skip
def test_divergent_journals_fail(pool: SyncPool, journal: list[ToolResult], message: str) -> None:
    f = failed(pool.run(program(TWO_CALLS, journal=journal)), "divergence")
    assert f.message == message


def test_extra_entries_while_the_program_waits_forever_are_divergence(pool: SyncPool) -> None:
    code = "await tools.add({a: 1, b: 2});\nawait new Promise(() => {});"
    journal = [ToolResult("add", '{"a":1,"b":2}', "3"), ToolResult("add", '{"a":1,"b":2}', "3")]
    f = failed(pool.run(program(code, journal=journal)), "divergence")
    assert f.message == "the journal holds 2 results but the program made only 1 tool calls"


def test_extra_entries_after_a_runtime_error_are_divergence(pool: SyncPool) -> None:
    code = "await tools.add({a: 1, b: 2});\nnull.boom;"
    journal = [ToolResult("add", '{"a":1,"b":2}', "3"), ToolResult("add", '{"a":1,"b":2}', "3")]
    failed(pool.run(program(code, journal=journal)), "divergence")


def test_divergence_keeps_the_outputs_made_before_it(pool: SyncPool) -> None:
    code = "text('before');\nawait tools.add({a: 1, b: 2});\ntext('after');"
    f = failed(pool.run(program(code, journal=[ToolResult("add", '{"a":9,"b":9}', "18")])), "divergence")
    assert f.outputs == (TextOutput("before"),)
    assert f.calls == 1


@pytest.mark.parametrize(
    "journal_arguments",
    [
        '{"b":2,"a":1}',
        '{ "a" : 1 ,\n\t"b" : 2 }',
        '{"a":1.0,"b":2e0}',
        '{"b":2,\n "a":1}',
    ],
)
def test_key_order_and_whitespace_are_not_divergence(pool: SyncPool, journal_arguments: str) -> None:
    journal = [
        ToolResult("add", journal_arguments, "3"),
        ToolResult("echo", '{"tag":"second","x":3}', '"ok"'),
    ]
    assert completed_texts(pool.run(program(TWO_CALLS, journal=journal))) == ['"ok"']


def test_nested_key_order_is_not_divergence_but_array_order_is(pool: SyncPool) -> None:
    code = "text(await tools.echo({outer: {z: 1, a: [{d: 1, c: 2}, 3]}, first: true}));"
    same = '{"first":true,"outer":{"a":[{"c":2,"d":1},3],"z":1}}'
    assert completed_texts(pool.run(program(code, journal=[ToolResult("echo", same, '"ok"')]))) == ["ok"]
    swapped = '{"first":true,"outer":{"a":[3,{"c":2,"d":1}],"z":1}}'
    failed(pool.run(program(code, journal=[ToolResult("echo", swapped, '"ok"')])), "divergence")


def test_a_program_that_changes_its_calls_is_caught_by_replay(pool: SyncPool) -> None:
    # The same journal under another seed: the program's random argument differs on replay.
    code = "const r = Math.random();\nawait tools.echo({r});\ntext('done');"
    first = pool.run(program(code))
    journal = [answer(p) for p in first.pending]  # type: ignore[union-attr]
    assert completed_texts(pool.run(program(code, journal=journal))) == ["done"]
    failed(pool.run(replace(program(code, journal=journal), seed=SEED + 1)), "divergence")
    # So does another clock.
    code2 = "await tools.echo({t: Date.now()});"
    first2 = pool.run(program(code2))
    journal2 = [answer(p) for p in first2.pending]  # type: ignore[union-attr]
    failed(pool.run(program(code2, journal=journal2, clock_ms=CLOCK_MS + 1)), "divergence")
    assert outcome_json(pool.run(program(code2, journal=journal2)))["status"] == "completed"
