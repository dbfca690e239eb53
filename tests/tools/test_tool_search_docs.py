"""docs/tool-search.md must not rot: its examples run against the emulator as written."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import openai
import yaml

from ptc_emulator.emulator.model.scripted.scenario import load_scenario
from ptc_emulator.testing.server import PTCEmulator
from tests.support import answer_all

DOC = (Path(__file__).resolve().parents[2] / "docs" / "tool-search.md").read_text(encoding="utf-8")


def blocks(tag: str) -> list[str]:
    return re.findall(rf"^```{tag}\n(.*?)^```$", DOC, flags=re.S | re.M)


def test_the_overview_example_prints_the_items(client: openai.OpenAI) -> None:
    example = blocks("python")[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "docs/tool-search.md", "exec"), {"client": client})
    assert printed.getvalue().split() == ["tool_search_call", "tool_search_output", "function_call"]


def test_the_scenario_and_the_inline_search_run(ptc_emulator: PTCEmulator, client: openai.OpenAI) -> None:
    [scenario] = blocks("yaml")
    load_scenario(scenario, default_name="docs__weather")
    ptc_emulator.add_scenario({**yaml.safe_load(scenario), "name": "docs__weather"})
    weather = {
        "type": "function",
        "name": "get_weather",
        "description": "Return the weather forecast for a city.",
        "defer_loading": True,
        "allowed_callers": ["programmatic"],
    }
    tools: list[dict[str, Any]] = [weather, {"type": "tool_search"}, {"type": "programmatic_tool_calling"}]

    def sky(name: str, args: dict[str, Any]) -> Any:
        return {"city": args["city"], "sky": "Sunny"}

    first = client.responses.create(model="m", input="weather in Lisbon", tools=tools)
    assert [i.type for i in first.output] == ["tool_search_call", "tool_search_output", "program", "function_call"]
    second = client.responses.create(
        model="m", input=answer_all(first, sky), tools=tools, previous_response_id=first.id
    )
    assert second.output_text == "Sunny in Lisbon."
    inline = re.search(r"^````text\n(.*?)^````$", DOC, flags=re.S | re.M)
    assert inline is not None
    third = client.responses.create(model="m", input=inline.group(1), tools=tools)
    assert json.loads(third.output[3].arguments) == {"city": "Lisbon"}  # type: ignore[union-attr]
