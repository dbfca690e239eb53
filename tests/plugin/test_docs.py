"""The pytest guide (docs/pytest.md) must not rot: its example test file runs, and its
tables name every journal field, every figure and every fault kind there is."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.emulator.journal.entries import Figures, JournalEntry
from ptc_emulator.emulator.model.scripted.scenario import Fault, load_scenario
from tests.plugin.plugin_support import run

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "pytest.md"


def doc() -> str:
    """The guide's "Testing your agent" section, to the next heading of its level or the end."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("\n## Testing your agent\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def python_blocks(text: str) -> list[str]:
    """The fenced python blocks, dedented (a block may sit in a list item)."""
    return [textwrap.dedent(b) for b in re.findall(r"^ *```python\n(.*?)^ *```$", text, flags=re.S | re.M)]


def test_the_example_test_file_passes(pytester: pytest.Pytester) -> None:
    [example] = [block for block in python_blocks(doc()) if "def test_the_agent_answers" in block]
    for part in ("ptc_emulator.add_scenario(", '"fault"', "ptc_emulator.journal", "ptc_emulator.client("):
        assert part in example, f"the example no longer shows {part}"
    tests = re.findall(r"^def (test_\w+)\(ptc_emulator\)", example, flags=re.M)
    assert len(tests) >= 3
    pytester.makepyfile(test_my_agent=example)

    result = run(pytester, "-v")

    result.assert_outcomes(passed=len(tests))


def test_the_environment_example_passes(pytester: pytest.Pytester) -> None:
    [example] = [block for block in python_blocks(doc()) if "use_env(monkeypatch)" in block]
    tests = re.findall(r"^def (test_\w+)\(", example, flags=re.M)
    pytester.makepyfile(test_env_agent=example)

    run(pytester, "-v").assert_outcomes(passed=len(tests))


def test_the_assertions_example_passes(pytester: pytest.Pytester) -> None:
    [example] = [block for block in python_blocks(doc()) if "def test_the_program_asked_for_the_right_sku" in block]
    pytester.makepyfile(test_assertions_example=example)

    run(pytester, "-v").assert_outcomes(passed=1)


def verification_example() -> str:
    [example] = [b for b in python_blocks(doc()) if "def test_the_agent_checks_the_stock_around_a_reservation" in b]
    return example


def test_the_verification_example_passes(pytester: pytest.Pytester) -> None:
    example = verification_example()
    for part in ("assert_called(", "args=", "route=", "assert_requests(", "instructions="):
        assert part in example, f"the example no longer shows {part}"
    pytester.makepyfile(test_verification_example=example)

    run(pytester, "-v").assert_outcomes(passed=1)


def test_the_verification_failure_is_the_one_shown(ptc_emulator: Any) -> None:
    """The guide's failed `assert_called` message, word for word, after its own example's agent."""
    section = doc()[doc().index("A failed verification shows what happened instead") :]
    [shown] = re.findall(r"^```text\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    [call] = re.findall(r"`(assert_called\(.*?\))`", section.split("\n\n")[0].replace("\n", " "))
    names: dict[str, Any] = {}
    exec(compile(verification_example(), "pytest.md", "exec"), names)  # noqa: S102 (the guide's own example)
    ptc_emulator.add_scenario(names["RESERVE"])
    names["run_agent"](ptc_emulator.client(), "Please reserve 3 of sku_123")

    with pytest.raises(AssertionError) as caught:
        eval(f"ptc_emulator.{call}", {"ptc_emulator": ptc_emulator})  # noqa: S307 (the guide's own call)

    assert str(caught.value) == shown.rstrip("\n")


def test_the_strict_example_fails_as_documented(pytester: pytest.Pytester) -> None:
    """The guide's swallowed 400 fails its test at teardown with the report the guide shows; the
    test that opts out passes."""
    [example] = [block for block in python_blocks(doc()) if "def test_the_agent_greets" in block]
    section = doc()[doc().index("### Strict by default") :]
    [report] = re.findall(r"^```text\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    pytester.makepyfile(test_strict_example=example)

    result = run(pytester, "-v")

    result.assert_outcomes(passed=2, errors=1)
    banner, *lines = report.splitlines()
    assert "ERROR at teardown of test_the_agent_greets" in banner
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_the_agent_greets*", *(line.replace("...", "*") for line in lines)]
    )


def test_the_agents_sdk_example_passes(pytester: pytest.Pytester) -> None:
    """docs/agents-sdk.md's test file: three async Agents SDK tests with PTC and faults, in one session."""
    page = (GUIDE.parent / "agents-sdk.md").read_text(encoding="utf-8")
    [example] = [block for block in python_blocks(page) if "ProgrammaticToolCallingTool()" in block]
    for part in ('allowed_callers=["programmatic"]', "ptc_emulator.use_env(monkeypatch)", '"http_error": 429'):
        assert part in example, f"the example no longer shows {part}"
    tests = re.findall(r"^async def (test_\w+)\(", example, flags=re.M)
    assert len(tests) >= 3
    pytester.makepyfile(test_planner=example)

    run(pytester, "-v").assert_outcomes(passed=len(tests))


def test_the_two_agents_pages_name_each_other() -> None:
    sdk = (GUIDE.parent / "agents-sdk.md").read_text(encoding="utf-8")
    api = (GUIDE.parent / "agents.md").read_text(encoding="utf-8")
    assert "**OpenAI Agents SDK**" in sdk.split("\n\n")[1] and "[agents.md](agents.md)" in sdk.split("\n\n")[1]
    assert "[agents-sdk.md](agents-sdk.md)" in api.split("\n## ")[0]


def test_the_settings_snippet_compiles() -> None:
    [snippet] = [block for block in python_blocks(doc()) if "def ptc_emulator_settings" in block]
    compile(snippet, "snippet", "exec")


def test_the_yaml_scenarios_load() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", doc(), flags=re.S | re.M)
    assert blocks
    for block in blocks:
        load_scenario(block)


def table_keys(text: str, heading: str) -> set[str]:
    """The backticked first cells of the table whose header row starts with `heading`."""
    table = text[text.index(f"| {heading} |") :].split("\n\n", 1)[0]
    return {m for row in table.splitlines()[2:] for m in re.findall(r"`([a-z_]+)", row.split("|")[1])}


def test_the_tables_are_complete() -> None:
    text = doc()
    assert table_keys(text, "field") == {f.name for f in dataclasses.fields(JournalEntry)}
    assert table_keys(text, "`figures.`") == {f.name for f in dataclasses.fields(Figures)}
    assert table_keys(text, "fault") == set(Fault.model_fields)


def test_the_readme_pytest_example_passes(pytester: pytest.Pytester) -> None:
    """The README's pytest example runs as written, with nothing but the installed package."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Test your agent with pytest\n") :]
    [example] = python_blocks(section[: section.index("\n## ", 1)])
    assert len(example.splitlines()) <= 16
    pytester.makepyfile(test_readme=example)
    run(pytester, "-v").assert_outcomes(passed=1)


def test_the_readme_scoped_url_example_passes(pytester: pytest.Pytester) -> None:
    """The README's example of agent code that builds its own client runs as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Testing agent code that builds its own client\n") :]
    [example] = python_blocks(section[: section.index("\n## ", 1)])
    assert "/scopes/<scope>/v1" in section and "use_env(monkeypatch)" in example
    pytester.makepyfile(test_readme_env=example)
    run(pytester, "-v").assert_outcomes(passed=1)


# ---- docs/scenarios.md: what `match` asks ----------------------------------------------------------

SCENARIOS_PAGE = GUIDE.parent / "scenarios.md"


def scenarios_example() -> str:
    [example] = [b for b in python_blocks(SCENARIOS_PAGE.read_text(encoding="utf-8")) if "LOOKUP_FAILED" in b]
    return example


def test_the_scenarios_page_example_passes(pytester: pytest.Pytester) -> None:
    """The page's test file: a scenario chosen by each of outputs, instructions, history and tool_choice."""
    example = scenarios_example()
    for part in ("outputs:", '"instructions":', '"history":', '"tool_choice":'):
        assert part in example, f"the example no longer shows {part}"
    pytester.makepyfile(test_matchers=example)

    run(pytester, "-v").assert_outcomes(passed=5)  # one of them twice, once per branch


@pytest.mark.ptc_strict(False)  # the 400 is the point, and the scenarios are the page's
def test_the_scenarios_page_near_miss_is_the_servers(ptc_emulator: Any) -> None:
    """The near miss the page shows is what the server says for its example's scenarios."""
    text = SCENARIOS_PAGE.read_text(encoding="utf-8")
    section = text[text.index("**A near miss names the matcher that missed.**") :]
    [shown] = re.findall(r"^```text\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    names: dict[str, Any] = {}
    exec(compile(scenarios_example(), "scenarios.md", "exec"), names)  # noqa: S102 (the page's own example)
    for scenario in (names["LOOKUP_FAILED"], names["RECALL"], names["FORCED"]):
        ptc_emulator.add_scenario(scenario)

    with pytest.raises(openai.BadRequestError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(
            model="gpt-test",
            instructions="You are a pirate.",
            input="What is the stock of sku_7?",
            tools=[names["INVENTORY"]],
        )

    expected = " ".join(shown.split("\n")).strip()
    assert expected.endswith(" ...")
    message = caught.value.body["message"]  # type: ignore[index]
    assert message.startswith(expected.removesuffix(" ...")), message


def test_the_scenarios_page_refusals_are_the_loaders() -> None:
    text = SCENARIOS_PAGE.read_text(encoding="utf-8")
    section = text[text.index("`ptc-emulator validate` and `add_scenario` refuse a matcher") :]
    [shown] = re.findall(r"^```text\n(.*?)^```$", section, flags=re.S | re.M)[:1]
    refused = []
    for match in ({"history": [{"text": "(?=sku)"}]}, {"outputs": [{}]}, {"tool_choice": "always"}):
        with pytest.raises(ValueError) as caught:
            load_scenario({"name": "x", "match": match, "turns": [{"message": "x"}]})
        refused.append(str(caught.value).removeprefix("scenario: "))
    assert shown.splitlines() == refused
