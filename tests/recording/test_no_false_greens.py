"""The bundled demos answer only when asked for (`--demo`, `make run`, the plugin's
`--ptc-emulator-demo`): never beside `--fixtures`, recordings or a replay, so a question that
nothing recorded is the 400 docs/record-replay.md promises, not a demo's 200."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from ptc_emulator.api.cli import main, parse
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.plugin.plugin_support import run

# The demo `inventory__sku_123` matches this for any SKU; nothing recorded sku_999.
UNRECORDED = "Compare inventory with demand for sku_999."
TOOLS = [
    {
        "type": "function",
        "name": name,
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "allowed_callers": ["programmatic"],
    }
    for name in ("get_inventory", "get_demand")
] + [{"type": "programmatic_tool_calling"}]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., openai.OpenAI]]:
    """`ptc-emulator serve ARGS...` as the CLI reads them, in this process; a client on it."""
    servers: list[EmulatorServer] = []
    clients: list[openai.OpenAI] = []

    def start(*argv: str) -> openai.OpenAI:
        settings, _ = parse(["serve", "--store", "memory", "--data-dir", str(tmp_path / "data"), *argv])
        servers.append(EmulatorServer(dataclasses.replace(settings, pool_size=1)).start())
        clients.append(PTCEmulator(servers[-1].base_url).client(max_retries=0))
        return clients[-1]

    yield start
    for client in clients:
        client.close()
    for server in servers:
        server.stop()


def ask(client: openai.OpenAI) -> int:
    try:
        client.responses.create(model="gpt-test", input=UNRECORDED, tools=TOOLS)  # type: ignore[arg-type]
    except openai.BadRequestError as e:
        assert e.code == "no_scenario_matched", e.body
        return 400
    return 200


def test_replay_of_an_unrecorded_conversation_is_a_400(serve: Callable[..., openai.OpenAI], tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    assert ask(serve("--record", str(cassettes), "--record-mode", "none")) == 400


def test_fixtures_alone_bring_no_demos(serve: Callable[..., openai.OpenAI], tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    assert ask(serve("--fixtures", str(mine))) == 400
    assert ask(serve()) == 400


def test_the_demos_when_asked_for(serve: Callable[..., openai.OpenAI]) -> None:
    assert ask(serve("--demo")) == 200


def test_demos_beside_recordings_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cassettes").mkdir()
    with pytest.raises(SystemExit) as exited:
        main(
            ["serve", "--store", "memory", "--port", "0", "--demo", "--record", str(tmp_path / "cassettes")]
            + [
                "--record-mode",
                "none",
            ]
        )
    assert exited.value.code == 2
    assert "--demo cannot go with --record" in capsys.readouterr().err


PLUGIN_TEST = f"""
import openai

TOOLS = {TOOLS!r}


def test_demo_question(ptc_emulator):
    client = ptc_emulator.client(max_retries=0)
    try:
        client.responses.create(model="gpt-test", input={UNRECORDED!r}, tools=TOOLS)
    except openai.BadRequestError as e:
        assert e.code == "no_scenario_matched"
        raise AssertionError("400 no_scenario_matched")
"""


@pytest.mark.timeout(360)  # 3 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_the_plugin_serves_no_demos_unless_asked(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_demo=PLUGIN_TEST)
    (tmp_path / "cassettes").mkdir()

    plain = run(pytester)
    plain.assert_outcomes(failed=1)
    assert "400 no_scenario_matched" in plain.stdout.str()
    run(pytester, "--ptc-emulator-demo").assert_outcomes(passed=1)
    replay = run(pytester, "--ptc-emulator-demo", f"--ptc-emulator-record={tmp_path / 'cassettes'}")
    replay.assert_outcomes(failed=1)  # replaying: the demos stay out, asked for or not
