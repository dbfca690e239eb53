"""`on_program_error`: a scenario scripts what the model answers after a failed program, played as
the hosted model would (the incomplete program_output with its error, then that message); the
example is docs/scenarios.md's own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptc_emulator.emulator.model import ScenarioError, load_scenario
from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.scenarios_support import inventory_tools, run_agent

PAGE = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


def page_scenario() -> dict[str, Any]:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## What the model answers after a failed program") :]
    [block] = re.findall(r"^```yaml\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    scenario = yaml.safe_load(block)
    assert isinstance(scenario, dict) and "on_program_error" in scenario["turns"][1]
    return scenario


def test_a_failed_program_gets_the_scenarios_own_answer(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(page_scenario())

    def negative(arguments: dict[str, Any], name: str) -> dict[str, Any]:
        return {"sku": arguments["sku"], "available_units": -3}

    responses = run_agent(ptc_emulator.client(), "What is the stock of sku_7?", inventory_tools(), negative)
    last = responses[-1]
    assert [item.type for item in last.output] == ["program_output", "message"]
    output = last.output[0]
    assert output.status == "incomplete"
    assert output.result.startswith("runtime: Error: negative stock for sku_7"), output.result
    assert last.output_text == f"I could not read the stock of sku_7: {output.result}"


def test_a_program_that_completes_gets_the_message(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(page_scenario())

    responses = run_agent(ptc_emulator.client(), "What is the stock of sku_7?", inventory_tools())
    last = responses[-1]
    assert last.output[0].type == "program_output" and last.output[0].status == "completed"
    assert last.output_text == "42 units of sku_7"


def test_on_program_error_goes_with_a_message_turn_only() -> None:
    with pytest.raises(ScenarioError, match="on_program_error goes with a message turn"):
        load_scenario({"name": "x", "turns": [{"refusal": "no", "on_program_error": "sorry"}]})
    with pytest.raises(ScenarioError, match=r"turns\.1\.on_program_error: invalid template"):
        load_scenario({"name": "x", "turns": [{"program": "1"}, {"message": "ok", "on_program_error": "{{ x"}]})
