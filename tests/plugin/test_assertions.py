"""Assertions a test can make with the fixture: typed journal entries, `calls(...)`,
`requests(...)`, `assert_all_scenarios_used()`, `assert_no_unmatched()`, and strict mode."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from ptc_emulator.testing.assertions import Figures, JournalEntry, ToolCall
from ptc_emulator.testing.server import PTCEmulator
from tests.plugin.plugin_support import run

TOOLS = [
    {
        "type": "function",
        "name": name,
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}},
        "allowed_callers": ["programmatic"],
    }
    for name in ("get_inventory", "get_demand")
] + [{"type": "programmatic_tool_calling"}]
STOCK = {"get_inventory": {"available_units": 42}, "get_demand": {"requested_units": 50}}
SHORTAGE = {
    "name": "shortage",
    "match": {"input": "(?i)shortage for (?P<sku>sku_\\w+)", "tools": ["get_inventory", "get_demand"]},
    "turns": [
        {
            "program": "const [s, d] = await Promise.all([tools.get_inventory({ sku: {{ sku }} }), "
            "tools.get_demand({ sku: {{ sku }} })]);\ntext(String(d.requested_units - s.available_units));"
        },
        {"message": "short by {{ result }}"},
    ],
}


def loop(client: openai.OpenAI, question: str) -> str:
    items: list[object] = [{"role": "user", "content": question}]
    while True:
        response = client.responses.create(model="gpt-test", store=False, input=items, tools=TOOLS)  # type: ignore[arg-type]
        items += [i.model_dump(exclude_none=True) for i in response.output]
        calls = [i for i in response.output if i.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            sku = json.loads(call.arguments)["sku"]
            output = json.dumps({"sku": sku, **STOCK[call.name]})
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": output,
                    "caller": call.caller.model_dump(),
                }
            )


def test_calls_and_typed_entries(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(SHORTAGE)

    assert loop(ptc_emulator.client(max_retries=0), "What is the shortage for sku_123?") == "short by 8"

    [inventory] = ptc_emulator.calls("get_inventory")
    assert isinstance(inventory, ToolCall)
    assert (inventory.arguments, inventory.route, inventory.type) == ({"sku": "sku_123"}, "program", "function_call")
    assert inventory.output == {"sku": "sku_123", "available_units": 42}  # what the client sent back
    assert inventory.program is not None and inventory.seq == ptc_emulator.entries[0].seq
    assert [c.name for c in ptc_emulator.calls(route="program")] == ["get_inventory", "get_demand"]
    assert ptc_emulator.calls(route="direct") == []
    first, second = ptc_emulator.entries
    assert isinstance(first, JournalEntry) and isinstance(first.figures, Figures)
    assert first.figures.program_tool_calls == 2 and second.route == ["program_output", "message"]
    assert [e.scenario for e in ptc_emulator.requests(status=200, scenario="shortage")] == ["shortage"] * 2
    ptc_emulator.assert_all_scenarios_used()
    ptc_emulator.assert_no_unmatched()
    with pytest.raises(ValueError, match="route is 'program' or 'direct'"):
        ptc_emulator.calls(route="programmatic")


@pytest.mark.ptc_strict(False)  # it leaves an unmatched request on purpose
def test_assert_no_unmatched_shows_each_unmatched_request(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(SHORTAGE)
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="gpt-test", input="What is the shortage for sku_123?")  # no tools declared

    [refused] = ptc_emulator.requests(status=400)
    assert refused.error is not None and refused.error["code"] == "no_scenario_matched"
    with pytest.raises(AssertionError) as caught:
        ptc_emulator.assert_no_unmatched()
    message = str(caught.value)
    assert message.startswith("1 of 1 requests matched no scenario:\n")
    assert (
        "  #1 POST /v1/responses 'What is the shortage for sku_123?' -> no match (400; closest 'shortage' (tools): "
        in message
    )
    assert "the request does not declare the function tool 'get_inventory'" in message


@pytest.mark.ptc_strict(False)  # it leaves a scenario unused on purpose
def test_assert_all_scenarios_used_names_the_unused_and_what_answered(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(SHORTAGE)
    ptc_emulator.add_scenario({"name": "greet", "match": {"input": "(?i)hello"}, "turns": [{"message": "hi"}]})
    ptc_emulator.client(max_retries=0).responses.create(model="gpt-test", input="hello")

    with pytest.raises(AssertionError) as caught:
        ptc_emulator.assert_all_scenarios_used()

    message = str(caught.value)
    assert message.startswith("1 of this test's scenarios answered no request: 'shortage'. The requests:\n")
    assert "  #1 POST /v1/responses 'hello' -> scenario 'greet' (200, message)" in message  # its first request


STRICT = """
import openai
import pytest

GREET = {"name": "greet", "match": {"input": "(?i)hello"}, "turns": [{"message": "hi"}]}
SHOUT = {"name": "shout", "match": {"input": "(?i)shout"}, "turns": [{"message": "HI"}]}


def ask(ptc_emulator, text):
    try:
        return ptc_emulator.client(max_retries=0).responses.create(model="m", input=text).output_text
    except openai.BadRequestError:
        return None  # the agent under test swallows the 400: the test itself would pass


def test_clean(ptc_emulator):  # its requests come first on the server
    ptc_emulator.add_scenario(GREET)
    assert ask(ptc_emulator, "hello") == "hi"
    assert ask(ptc_emulator, "Hello again") == "hi"


def test_swallows_a_400(ptc_emulator):
    ptc_emulator.add_scenario(GREET)
    assert ask(ptc_emulator, "hello") == "hi"
    ask(ptc_emulator, "goodbye")


def test_leaves_a_scenario_unused(ptc_emulator):
    ptc_emulator.add_scenario(GREET)
    ptc_emulator.add_scenario(SHOUT)
    assert ask(ptc_emulator, "hello") == "hi"


def test_does_both(ptc_emulator):
    ptc_emulator.add_scenario(GREET)
    ptc_emulator.add_scenario(SHOUT)
    ask(ptc_emulator, "goodbye")
    assert ask(ptc_emulator, "hello") == "hi"


@pytest.mark.ptc_strict(False)
def test_opts_out(ptc_emulator):
    ptc_emulator.add_scenario(SHOUT)
    ask(ptc_emulator, "goodbye")


@pytest.mark.ptc_strict(unmatched=False)
def test_opts_out_of_one_check(ptc_emulator):
    ptc_emulator.add_scenario(SHOUT)
    ask(ptc_emulator, "goodbye")
"""
FAILING = ("test_swallows_a_400", "test_leaves_a_scenario_unused", "test_does_both", "test_opts_out_of_one_check")


def test_strict_by_default_fails_the_test_at_teardown_with_every_check(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_strict=STRICT)

    result = run(pytester, "-v")

    result.assert_outcomes(passed=6, errors=4)
    errors = {line.split(" - ")[0].split("::")[1] for line in result.stdout.lines if line.startswith("ERROR ")}
    assert errors == set(FAILING)
    output = result.stdout.str()
    # The swallowed 400, numbered among this test's own requests (the server had seen 3 before it).
    swallowed = output[output.index("ERROR at teardown of test_swallows_a_400") :]
    swallowed = swallowed[: swallowed.index("ERROR at teardown of", 30)]
    assert swallowed.splitlines()[1] == "ptc-emulator strict mode: 1 of 2 requests matched no scenario."
    assert "ptc_strict(False)" in swallowed.splitlines()[2]
    assert "  #2 POST /v1/responses 'goodbye' -> no match (400; closest 'greet' (input): " in swallowed
    assert "#3" not in swallowed and "#4" not in swallowed
    # An unused scenario, with what answered instead.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_scenario_unused*",
            "ptc-emulator strict mode: 1 of this test's scenarios answered no request.",
            "*",
            "1 of this test's scenarios answered no request: 'shout'. The requests:",
            "  #1 POST /v1/responses 'hello' -> scenario 'greet' (200, message)",
        ]
    )
    # Both checks failed: both are reported, not only the first.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_does_both*",
            "ptc-emulator strict mode: 1 of 2 requests matched no scenario; 1 of this test's scenarios answered "
            "no request.",
            "*",
            "1 of 2 requests matched no scenario:",
            "  #1 POST /v1/responses 'goodbye' -> no match*",
            "*",
            "1 of this test's scenarios answered no request: 'shout'. The requests:",
            "  #1 POST /v1/responses 'goodbye' -> no match*",
            "  #2 POST /v1/responses 'hello' -> scenario 'greet' (200, message)",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_opts_out_of_one_check*", "ptc-emulator strict mode: 1 of this test's scenarios*"]
    )
    # The message alone: none of the plugin's source or frames.
    for frame in ("plugin.py", "def ptc_emulator", "strict_failure", "pytest.fail(", "Traceback"):
        assert frame not in output, frame


def test_strict_mode_is_turned_off_by_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_strict=STRICT)

    run(pytester, "--ptc-emulator-strict=no").assert_outcomes(passed=6)


@pytest.mark.timeout(260)  # 2 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_strict_mode_is_turned_off_by_the_ini_and_the_option_wins_over_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_strict=STRICT)
    pytester.makeini("[pytest]\nptc_emulator_strict = false\n")

    run(pytester).assert_outcomes(passed=6)
    run(pytester, "--ptc-emulator-strict").assert_outcomes(passed=6, errors=4)


def test_strict_mode_turned_off_by_the_ini_is_on_for_a_marked_test(pytester: pytest.Pytester) -> None:
    """Each of these tests runs pytest in a process of its own once or twice (one test running all
    four ran past the 120 s guard on a machine with a load of 10-17)."""
    pytester.makeini("[pytest]\nptc_emulator_strict = false\n")
    pytester.makepyfile(
        test_strict=STRICT.replace("def test_swallows_a_400", "@pytest.mark.ptc_strict\ndef test_swallows_a_400")
    )
    lenient = run(pytester)
    lenient.assert_outcomes(passed=6, errors=1)  # the marker turns it on for its test
    lenient.stdout.fnmatch_lines(["*ERROR at teardown of test_swallows_a_400*"])


def test_a_test_failed_by_strict_mode_at_teardown_leaves_its_trace(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_strict=STRICT)

    result = run(pytester, "-k", "swallows_a_400")

    result.assert_outcomes(passed=1, errors=1)
    [line] = [line for line in result.stdout.lines if line.startswith("journal: ")]
    journal = json.loads(Path(line.removeprefix("journal: ")).read_text(encoding="utf-8"))["journal"]
    assert [e["request"]["input"] for e in journal] == ["hello", "goodbye"], "the requests the strict check saw"
    assert [e["status"] for e in journal] == [200, 400]
