"""A background response in flight when the server is killed is marked failed at the restart,
not left `queued` forever."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from openai.types.responses import Response

from ptc_emulator.testing.process import ServerProcess
from tests.api.api_support import PTC_TOOLS, program_message


def test_a_background_response_cut_off_by_a_kill_is_failed_after_the_restart(
    server_process: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = server_process(tmp_path / "data", args=("--timeout", "120")).start()
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        queued = client.responses.create(
            model="m",
            input=program_message("while (true) {}"),
            tools=PTC_TOOLS,
            background=True,  # type: ignore[arg-type]
        )
        assert queued.status in ("queued", "in_progress")
        # The program spins until its 120 s deadline: the kill comes long before it ends.
        assert client.responses.retrieve(queued.id).status in ("queued", "in_progress")
    server.kill9()
    server.start()
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        after = client.responses.retrieve(queued.id)
    Response.model_validate(after.model_dump())
    assert after.status == "failed", after.status
    assert after.error is not None and after.error.code == "server_error"
    assert "stopped before this background response finished" in after.error.message


def test_a_second_server_on_the_data_dir_is_refused_and_the_first_ones_background_response_completes(
    server_process: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Before, the second server started and failed every queued or in-progress response in the
    file as a dead server's, the first one's running ones too: their results were thrown away."""
    data = tmp_path / "data"
    first = server_process(data, workers=2, args=("--timeout", "10")).start()
    with openai.OpenAI(base_url=first.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        running = client.responses.create(
            model="m",
            input=program_message("while (true) {}"),  # ends at its 10 s deadline, incomplete, not failed
            tools=PTC_TOOLS,
            background=True,  # type: ignore[arg-type]
        )
        second = server_process(data, workers=2)
        with pytest.raises(RuntimeError, match="the server exited with 1") as refused:
            second.start()
        lines = [line for line in str(refused.value).splitlines() if "held by another" in line]
        assert lines == [
            f"ptc-emulator: --store sqlite: the data dir {data.resolve()} is held by another ptc-emulator server "
            f"(process {first.proc.pid if first.proc else None}): stop it, or give this one its own --data-dir "
            "(or PTC_EMULATOR_DATA_DIR)"
        ], str(refused.value)
        assert "Traceback" not in str(refused.value)
        done = client.responses.retrieve(running.id)
        while done.status in ("queued", "in_progress"):
            time.sleep(0.2)
            done = client.responses.retrieve(running.id)
    assert done.status != "failed", done.error
    assert first.health()["status"] == "ok"

    first.kill9()  # the OS drops the lock with the process: none left behind
    after = server_process(data).start()
    assert after.health()["status"] == "ok"
    with openai.OpenAI(base_url=after.base_url, api_key="sk-test", max_retries=0, timeout=60) as client:
        assert client.responses.retrieve(running.id).status == done.status
