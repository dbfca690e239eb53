"""Agent code that builds its own client lands in its test's scope through the scoped base URL
(`ptc_emulator.base_url`, `ptc_emulator.env`, `ptc_emulator.use_env(monkeypatch)`): no header code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator

QUESTION = "Which warehouse ships sku_7?"


def answer(emulator: PTCEmulator, text: str) -> None:
    emulator.add_scenario({"name": "warehouse", "match": {"input": "(?i)warehouse"}, "turns": [{"message": text}]})


@pytest.fixture
def neighbour(ptc_emulator: PTCEmulator) -> Iterator[PTCEmulator]:
    """Another test's scope on the same server, with a scenario of the same name and input."""
    other = PTCEmulator(ptc_emulator.server_url, api_key=ptc_emulator.api_key)
    answer(other, "the neighbour's answer")
    yield other
    other.reset()
    other.close()


def test_base_url_is_the_scoped_url(ptc_emulator: PTCEmulator) -> None:
    assert ptc_emulator.base_url == ptc_emulator.server_url.removesuffix("/v1") + f"/scopes/{ptc_emulator.scope}/v1"
    assert ptc_emulator.env["OPENAI_BASE_URL"] == ptc_emulator.base_url
    assert ptc_emulator.env["OPENAI_API_KEY"] == ptc_emulator.api_key


def test_code_that_builds_its_own_client(
    ptc_emulator: PTCEmulator, neighbour: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer(ptc_emulator, "Oslo ships it.")
    ptc_emulator.use_env(monkeypatch)

    with openai.OpenAI(max_retries=0) as client:  # what agent code does: everything from the environment
        assert client.responses.create(model="gpt-test", input=QUESTION).output_text == "Oslo ships it."
    assert [e["scenario"] for e in ptc_emulator.journal] == ["warehouse"]
    assert neighbour.journal == []


@pytest.mark.anyio
async def test_the_agents_sdk_default_client(
    ptc_emulator: PTCEmulator, neighbour: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import Agent, RunConfig, Runner

    answer(ptc_emulator, "Bergen ships it.")
    ptc_emulator.use_env(monkeypatch)

    # No client, no model provider: the SDK's default OpenAI client reads OPENAI_BASE_URL.
    agent = Agent(name="warehouse", instructions="Answer.", model="gpt-test")
    result = await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))

    assert result.final_output == "Bergen ships it."
    assert [e["scenario"] for e in ptc_emulator.journal] == ["warehouse"]
    assert neighbour.journal == []


def test_a_subprocess_agent(ptc_emulator: PTCEmulator, neighbour: PTCEmulator) -> None:
    answer(ptc_emulator, "Trondheim ships it.")
    agent = textwrap.dedent(
        f"""
        import openai
        print(openai.OpenAI(max_retries=0).responses.create(model="gpt-test", input={QUESTION!r}).output_text)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", agent],
        env={**os.environ, **ptc_emulator.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Trondheim ships it."
    assert neighbour.journal == []


@pytest.mark.ptc_strict(False)  # its scenario is one the unscoped request must not reach
def test_an_unscoped_request_is_told_it_has_no_scope(ptc_emulator: PTCEmulator) -> None:
    answer(ptc_emulator, "Oslo ships it.")
    with openai.OpenAI(base_url=ptc_emulator.server_url, api_key=ptc_emulator.api_key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", input=QUESTION)

    body = caught.value.body
    assert body["code"] == "no_scenario_matched"  # type: ignore[index]
    assert body["message"].startswith(  # type: ignore[index]
        "This request has no scope, and 1 scenario of a scope would match it: send it in the test's scope, with "
        "the base URL http://HOST:PORT/scopes/<scope>/v1"
    )
    assert ptc_emulator.scope not in body["message"]  # type: ignore[index]  # another caller's names stay hidden
