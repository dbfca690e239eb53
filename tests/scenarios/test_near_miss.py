"""An unmatched request: a 400 naming the closest scenarios and why each missed; the journal keeps
the whole report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator

# A near miss is a request no scenario matches, next to scenarios it does not reach: every test
# here leaves both, on purpose.
pytestmark = pytest.mark.ptc_strict(False)

WEATHER_TOOL = {"type": "function", "name": "lookup_weather", "parameters": {"type": "object", "properties": {}}}

SCENARIOS: list[dict[str, Any]] = [
    {"name": "wants-tool", "match": {"input": "weather", "tools": ["lookup_weather"]}, "turns": [{"message": "t"}]},
    {"name": "wants-model", "match": {"input": "weather", "model": "gpt-5.*"}, "turns": [{"message": "m"}]},
    {
        "name": "wants-metadata",
        "match": {"input": "weather", "metadata": {"tenant": "acme"}},
        "turns": [{"message": "d"}],
    },
    {"name": "wants-input", "match": {"input": "(?i)weather in (?P<city>\\w+)"}, "turns": [{"message": "{{ city }}"}]},
]

EXPECTED = [  # closest first: the further a scenario got through tools, model, metadata, input, the closer
    (
        "wants-input",
        "input",
        "the latest user message 'What is the weather like?' does not match /(?i)weather in (?P<city>\\w+)/",
    ),
    ("wants-metadata", "metadata.tenant", "metadata 'tenant' is not 'acme'"),
    ("wants-model", "model", "model 'gpt-4o' does not match /gpt-5.*/"),
    ("wants-tool", "tools", "the request does not declare the function tool 'lookup_weather'"),
]


def miss(emulator: PTCEmulator, **request: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        emulator.client(max_retries=0).responses.create(**request)
    return caught.value


def test_near_misses_name_the_first_field_that_did_not_match(ptc_emulator: PTCEmulator) -> None:
    for scenario in SCENARIOS:
        ptc_emulator.add_scenario(scenario)

    error = miss(
        ptc_emulator, model="gpt-4o", input="What is the weather like?", metadata={"tenant": "globex"}, tools=[]
    )

    assert error.status_code == 400
    assert error.code == "no_scenario_matched" and error.param == "input"
    assert error.type == "invalid_request_error"
    closest = "; ".join(f"'{name}' ({field}): {reason}" for name, field, reason in EXPECTED[:3])
    assert error.body is not None and isinstance(error.body, dict)
    assert error.body["message"].startswith(f"No scenario matches this request. Closest: {closest}.")
    assert "```js code block" in error.body["message"]

    [entry] = ptc_emulator.journal
    assert entry["status"] == 400
    assert entry["response"] == {"error": error.body}
    report = entry["near_miss"]
    assert report["input"] == "What is the weather like?" and report["inline_code"] is False
    ours = [m for m in report["near_misses"] if m["scenario"].startswith("wants-")]
    assert [(m["scenario"], m["field"], m["reason"]) for m in ours] == EXPECTED
    # The report keeps every scenario the request could see, not only the three the message names.
    assert len(report["near_misses"]) > 3


def test_each_field_alone(ptc_emulator: PTCEmulator) -> None:
    """With one scenario visible at a time (the others fixed), the report names that scenario's field."""
    for scenario in SCENARIOS:
        ptc_emulator.add_scenario(scenario)
    good = {"model": "gpt-5-mini", "input": "weather in Oslo", "metadata": {"tenant": "acme"}, "tools": [WEATHER_TOOL]}
    client = ptc_emulator.client(max_retries=0)
    # All four match this request; priority then name decides, so drop them one by one to see each.
    for name, field, request in [
        ("wants-metadata", "metadata.tenant", {**good, "metadata": {}}),
        ("wants-model", "model", {**good, "model": "gpt-4.1"}),
        ("wants-tool", "tools", {**good, "tools": []}),
        ("wants-input", "input", {**good, "input": "weather for Oslo"}),
    ]:
        client.responses.create(**request)  # matches some scenario
        entry = ptc_emulator.journal[-1]
        assert entry["status"] == 200 and entry["scenario"] != name
        for other in SCENARIOS:
            if other["name"] != name:
                ptc_emulator.admin.delete(f"/scenarios/{other['name']}")
        error = miss(ptc_emulator, **request)
        mine = [m for m in ptc_emulator.journal[-1]["near_miss"]["near_misses"] if m["scenario"] == name]
        assert [m["field"] for m in mine] == [field]
        assert f"'{name}' ({field}): {mine[0]['reason']}" in error.message
        for other in SCENARIOS:
            ptc_emulator.add_scenario(other)


def test_a_program_scenario_needs_the_ptc_tool(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"name": "needs-ptc", "match": {"input": "(?i)sum"}, "turns": [{"program": "text(String(1 + 1))"}]}
    )
    error = miss(ptc_emulator, model="m", input="sum please", tools=[WEATHER_TOOL])
    [found] = [m for m in ptc_emulator.journal[-1]["near_miss"]["near_misses"] if m["scenario"] == "needs-ptc"]
    assert found == {
        "scenario": "needs-ptc",
        "field": "tools",
        "reason": "the request does not declare the programmatic_tool_calling tool",
    }
    assert f"'needs-ptc' (tools): {found['reason']}" in error.message


def test_another_scopes_scenario_is_not_a_near_miss(ptc_emulator: PTCEmulator) -> None:
    from ptc_emulator.testing.server import PTCEmulator as View

    other = View(ptc_emulator.base_url)
    try:
        other.add_scenario({"name": "elsewhere", "match": {"input": "weather"}, "turns": [{"message": "x"}]})
        error = miss(ptc_emulator, model="m", input="weather")
        assert "elsewhere" not in error.message
        assert all(m["scenario"] != "elsewhere" for m in ptc_emulator.journal[-1]["near_miss"]["near_misses"])
    finally:
        other.reset()
        other.close()


def test_nothing_loaded(own_server: Callable[..., PTCEmulator]) -> None:
    server = own_server(bundled_fixtures=False)
    error = miss(server, model="m", input="hello")
    assert error.message.endswith(
        "No scenario matches this request (no scenario is loaded). The latest user message has no ```js code "
        "block to run inline either."
    )
    assert server.journal[-1]["near_miss"] == {"input": "hello", "near_misses": [], "inline_code": False}


def test_a_long_message_is_shortened_in_the_report(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"name": "short", "match": {"input": "^never$"}, "turns": [{"message": "x"}]})
    text = "word " * 60
    miss(ptc_emulator, model="m", input=text)
    report = ptc_emulator.journal[-1]["near_miss"]
    assert report["input"] == text[:117] + "..."
    [mine] = [m for m in report["near_misses"] if m["scenario"] == "short"]
    assert mine["reason"] == f"the latest user message '{text[:77]}...' does not match /^never$/"
