"""The engine without HTTP and without V8: create, suspend, resume and the conversation's errors.

A fake runner (`fake_runner.py`) stands in for the sandbox; clock, ids and seeds are injected.
What only V8 can show (real JavaScript, limits, isolation) is tested in tests/sandbox/ and through
the running app; here the engine's own rules are under test, fast.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from openai.types.responses import Response

from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.model.scripted.scenario import ScenarioRegistry, load_scenario
from ptc_emulator.emulator.responses.engine import Engine, Refused
from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.storage import ConnectionStore as MemoryStore
from ptc_emulator.emulator.wire.request import CreateRequest
from tests.unit.fake_runner import FakeProgram, FakeRunner

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"]},
    {"type": "function", "name": "lookup", "allowed_callers": ["direct"]},
    {"type": "programmatic_tool_calling"},
]
CODE = "const [a, b] = await Promise.all([tools.add({a: 1}), tools.add({a: 2})]);\ntext(a + b);"
FANOUT = FakeProgram(batches=[[("add", {"a": 1}), ("add", {"a": 2})]], finish=lambda out: f"sum={sum(map(int, out))}")


def make_engine(runner: FakeRunner, *scenarios: dict[str, Any]) -> Engine:
    """An engine on `runner` with a pinned clock, ids and seed, playing the given scenarios."""
    registry = ScenarioRegistry()
    for spec in scenarios:
        registry.add(load_scenario(spec))
    counter = itertools.count()
    return Engine(
        runner=runner,
        store=MemoryStore(),
        signer=Signer(b"engine-tests"),
        scenarios=registry,
        clock=lambda: 1_800_000_000.0,
        ids=lambda prefix: f"{prefix}_{next(counter):04d}",
        seeds=lambda: 42,
    )


def create(engine: Engine, **body: Any) -> dict[str, Any]:
    response = asyncio.run(engine.create(CreateRequest.model_validate({"model": "m", **body})))
    Response.model_validate(response)  # every response is one the SDK's strict models accept
    return response


def js(code: str) -> str:
    return f"```js\n{code}\n```"


def outputs(response: dict[str, Any], results: dict[int, str]) -> list[dict[str, Any]]:
    calls = [i for i in response["output"] if i["type"] == "function_call"]
    return [
        {"type": "function_call_output", "call_id": c["call_id"], "output": results[i], "caller": c["caller"]}
        for i, c in enumerate(calls)
    ]


@pytest.fixture
def runner() -> FakeRunner:
    fake = FakeRunner()
    fake.define(CODE, FANOUT)
    return fake


def test_a_program_suspends_on_its_calls_and_resumes_by_replay(runner: FakeRunner) -> None:
    engine = make_engine(runner)
    first = create(engine, input=js(CODE), tools=TOOLS, store=False)
    program, *calls = first["output"]
    assert program["type"] == "program" and program["code"] == CODE
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("add", {"a": 1}), ("add", {"a": 2})]
    assert all(c["caller"] == {"type": "program", "caller_id": program["call_id"]} for c in calls)

    items = [{"role": "user", "content": js(CODE)}, *first["output"], *outputs(first, {0: "3", 1: "4"})]
    second = create(engine, input=items, tools=TOOLS, store=False)
    assert [i["type"] for i in second["output"]] == ["program_output", "message"]
    assert second["output"][0]["status"] == "completed" and second["output"][0]["result"] == "sum=7"
    assert [len(p.journal) for p in runner.runs] == [0, 2]  # the resume replayed both answers


def test_previous_response_id_continues_the_stored_conversation(runner: FakeRunner) -> None:
    engine = make_engine(runner)
    first = create(engine, input=js(CODE), tools=TOOLS)
    second = create(engine, previous_response_id=first["id"], input=outputs(first, {0: "10", 1: "20"}), tools=TOOLS)
    assert second["output"][0]["result"] == "sum=30"
    assert engine.retrieve(second["id"], scope=None)["output"] == second["output"]


def test_a_missing_tool_output_is_refused_with_the_hosted_message(runner: FakeRunner) -> None:
    engine = make_engine(runner)
    first = create(engine, input=js(CODE), tools=TOOLS, store=False)
    items = [{"role": "user", "content": js(CODE)}, *first["output"], *outputs(first, {0: "3", 1: "4"})[:1]]
    missing = first["output"][2]["call_id"]
    with pytest.raises(InvalidRequest, match=f"No tool output found for function call {missing}."):
        create(engine, input=items, tools=TOOLS, store=False)


def test_a_tampered_argument_is_refused(runner: FakeRunner) -> None:
    engine = make_engine(runner)
    first = create(engine, input=js(CODE), tools=TOOLS, store=False)
    first["output"][1]["arguments"] = '{"a":100}'
    items = [{"role": "user", "content": js(CODE)}, *first["output"], *outputs(first, {0: "3", 1: "4"})]
    with pytest.raises(InvalidRequest) as caught:
        create(engine, input=items, tools=TOOLS, store=False)
    assert caught.value.param == "input"


def test_a_failing_program_ends_incomplete_not_as_an_error(runner: FakeRunner) -> None:
    runner.define("boom", FakeProgram(batches=[], finish=str, fail="TypeError: x is undefined"))
    response = create(make_engine(runner), input=js("boom"), tools=TOOLS)
    program_output, message = response["output"][1:]
    assert program_output["status"] == "incomplete"
    assert program_output["result"] == "runtime: TypeError: x is undefined"
    assert message["content"][0]["text"].startswith("The program did not complete")


def test_without_the_programmatic_tool_no_program_runs(runner: FakeRunner) -> None:
    response = create(make_engine(runner), input=js(CODE), tools=TOOLS[:2])
    assert [i["type"] for i in response["output"]] == ["message"]
    assert runner.runs == []


def test_a_scenario_drives_direct_calls_and_a_final_message(runner: FakeRunner) -> None:
    engine = make_engine(
        runner,
        {
            "name": "direct",
            "match": {"input": "(?i)look up (?P<key>\\w+)"},
            "turns": [
                {"call": {"name": "lookup", "arguments": {"key": "{{ key }}"}}},
                {"message": "found {{ output }}"},
            ],
        },
    )
    first = create(engine, input="Look up alpha", tools=TOOLS, store=False)
    (call,) = first["output"]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"key": "alpha"}
    assert "caller" not in call or call["caller"] is None or call["caller"] == {"type": "direct"}
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "42"}
    second = create(
        engine, input=[{"role": "user", "content": "Look up alpha"}, call, answer], tools=TOOLS, store=False
    )
    assert second["output"][-1]["content"][0]["text"] == "found 42"
    assert runner.runs == []


def test_a_refused_create_comes_back_with_what_the_engine_knew(runner: FakeRunner) -> None:
    """`attempt()` returns the refusal and its trace (for the journal) instead of raising."""
    engine = make_engine(
        runner,
        {
            "name": "flaky",
            "match": {"input": "flaky"},
            "turns": [{"message": "never sent", "fault": {"http_error": 503}}],
        },
    )
    attempt = engine.attempt(CreateRequest.model_validate({"model": "m", "input": "flaky", "store": False}))
    assert isinstance(attempt, Refused)
    assert attempt.error.status == 503
    assert attempt.trace is not None and attempt.trace.scenario == "flaky" and attempt.trace.fault is not None
    nothing = engine.attempt(CreateRequest.model_validate({"model": "m", "input": "no scenario, no code"}))
    assert isinstance(nothing, Refused) and nothing.trace is None and nothing.error.status == 400
    with pytest.raises(InvalidRequest, match="No scenario matches"):
        engine.prepare(CreateRequest.model_validate({"model": "m", "input": "no scenario, no code"}))


def test_a_background_response_is_queued_then_finished(runner: FakeRunner) -> None:
    engine = make_engine(runner)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        request = CreateRequest.model_validate({"model": "m", "input": js(CODE), "tools": TOOLS, "background": True})
        queued = await engine.create(request)
        # The response's own task: awaited, not yielded to a set number of times (its end is
        # written in a worker thread, so a yield count would race it).
        task = engine.background._tasks.get(queued["id"])
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        return queued, engine.retrieve(queued["id"], scope=None)

    queued, finished = asyncio.run(scenario())
    assert queued["status"] == "queued"
    assert finished["status"] == "completed" and finished["id"] == queued["id"]
    assert [i["type"] for i in finished["output"]] == ["program", "function_call", "function_call"]


class _HeldRunner(FakeRunner):
    """The fake runner, its runs held at their start until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, program: Any, client: str = "") -> Any:
        self.entered.set()
        await self.release.wait()
        return await super().run(program, client)


def test_a_background_response_reads_in_progress_while_it_runs() -> None:
    """Queued when created, `in_progress` once its task runs (held in its program), then
    completed: the hosted API's statuses (before, it read `queued` until it finished)."""
    runner = _HeldRunner()
    runner.define(CODE, FANOUT)
    engine = make_engine(runner)

    async def scenario() -> tuple[str, str, str]:
        request = CreateRequest.model_validate({"model": "m", "input": js(CODE), "tools": TOOLS, "background": True})
        queued = await engine.create(request)
        task = engine.background._tasks[queued["id"]]
        await runner.entered.wait()
        running = engine.retrieve(queued["id"], scope=None)
        runner.release.set()
        await asyncio.gather(task, return_exceptions=True)
        return queued["status"], running["status"], engine.retrieve(queued["id"], scope=None)["status"]

    assert asyncio.run(scenario()) == ("queued", "in_progress", "completed")
