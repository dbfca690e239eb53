"""A background response in flight when the server is killed is marked failed at the restart,
not left `queued` forever."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import openai
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
