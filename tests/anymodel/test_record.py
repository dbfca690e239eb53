"""`--record DIR` with a model upstream: a finished conversation becomes a scenario file that
replays offline, with the upstream stopped, and gives the same final text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ptc_emulator.api.cli import main
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    INVENTORY_CODE,
    INVENTORY_TOOLS,
    answer_inventory,
    chat_completion,
    echo,
    fake_upstream,
    program,
    raw_body,
    say,
)

QUESTION = "Which SKUs are low on stock?"
KEY = "sk-recorded-never-0d3a"


def _loop(emulator: PTCEmulator) -> str:
    with emulator.client(max_retries=0) as sdk:
        first = sdk.responses.create(model="m", input=QUESTION, tools=INVENTORY_TOOLS)
        calls = [c for c in first.output if c.type == "function_call"]
        final = sdk.responses.create(
            model="m", previous_response_id=first.id, input=[answer_inventory(c) for c in calls], tools=INVENTORY_TOOLS
        )
    return str(final.output_text)


def test_a_recorded_session_replays_with_the_upstream_stopped(
    make_server: Callable[..., EmulatorServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANY30_RECORD_KEY", KEY)
    recordings = tmp_path / "recordings"
    with fake_upstream() as upstream:
        upstream.reply(program(INVENTORY_CODE), echo("Low: "))
        live = make_server(
            model_upstream=upstream.url, model_upstream_api_key_env="ANY30_RECORD_KEY", record_dir=recordings
        )
        recording = PTCEmulator(live.base_url)
        recorded_text = _loop(recording)
        recording.close()
        live.stop()
    assert recorded_text == 'Low: {"low":["A-1","C-3"]}'
    files = sorted(recordings.glob("*.yaml"))
    assert len(files) == 1
    text = files[0].read_text(encoding="utf-8")
    assert INVENTORY_CODE.splitlines()[1].strip() in text and KEY not in text

    offline = make_server(record_dir=recordings, record_mode="none")  # no model upstream at all
    emulator = PTCEmulator(offline.base_url)
    assert _loop(emulator) == recorded_text
    assert [e["scenario"] for e in emulator.journal] == [files[0].stem] * 2
    emulator.close()


def test_record_needs_an_upstream_of_either_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--store", "memory", "--port", "0", "--record", str(tmp_path / "r")])
    assert exited.value.code == 2
    assert "needs --upstream URL or --model-upstream URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model-upstream", "localhost:11434/v1"], "--model-upstream localhost:11434/v1: not an http:// or https://"),
        (
            ["--model-upstream", "http://127.0.0.1:9/v1", "--model-upstream-api-key-env", "PTC_NO_SUCH_VAR"],
            "--model-upstream-api-key-env PTC_NO_SUCH_VAR: the variable is not set",
        ),
        (
            ["--model-upstream", "http://127.0.0.1:9/v1", "--model-upstream-api-key-env", "HOME"],
            "must require a key of its own",
        ),
    ],
)
def test_model_upstream_settings_that_cannot_work_are_refused(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--store", "memory", "--port", "0", *argv])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_an_answer_the_content_filter_cut_is_incomplete_and_not_recorded(
    make_server: Callable[..., EmulatorServer], tmp_path: Path
) -> None:
    """Chat Completions' `finish_reason: "content_filter"` with part of the text: the response
    was `completed`, and `--record` wrote the cut text down as a finished conversation. It ends
    `incomplete` (`content_filter`, as the hosted API says it), and nothing is recorded."""
    recordings = tmp_path / "recordings"
    body = chat_completion(say("The answer was cut sho"))
    body["choices"][0]["finish_reason"] = "content_filter"
    with fake_upstream() as upstream:
        upstream.reply(raw_body(json.dumps(body)))
        live = make_server(model_upstream=upstream.url, record_dir=recordings)
        emulator = PTCEmulator(live.base_url)
        with emulator.client(max_retries=0) as sdk:
            response = sdk.responses.create(model="m", input=QUESTION)
        emulator.close()
        live.stop()
    assert response.status == "incomplete" and response.incomplete_details is not None
    assert response.incomplete_details.reason == "content_filter"
    assert response.output_text == "The answer was cut sho"
    assert not list(recordings.glob("*.yaml"))
