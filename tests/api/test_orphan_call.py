"""A function_call attached to a program that has finished (one the program never made) is a 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import ProgramRun, assert_envelope, drive, program_message

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("orphan")), pool_size=1, bundled_fixtures=False)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


def test_a_made_up_call_on_a_finished_program_is_refused(server: EmulatorServer) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client:
        run = drive(client, ProgramRun("const r = await tools.add({a: 1, b: 2});\ntext('r=' + r.value);", store=False))
    assert run.text == "r=3"
    items: list[Any] = [*run.items, *(i.model_dump(mode="json", exclude_none=True) for i in run.final.output)]
    program = next(i for i in items if i["type"] == "program")
    real = next(i for i in items if i["type"] == "function_call")
    at = next(n for n, i in enumerate(items) if i["type"] == "program_output")
    forged = {**real, "call_id": "call_forged_0001", "id": "fc_forged_0001", "arguments": '{"a":5,"b":5}'}
    answer = {"type": "function_call_output", "call_id": "call_forged_0001", "output": '{"value":10}'}
    answer["caller"] = real.get("caller")
    tampered = [*items[:at], forged, answer, *items[at:]]
    tampered.append({"type": "message", "role": "user", "content": program_message("text('again');")})
    body = {"model": "ptc-test", "input": tampered, "tools": run.tools, "store": False}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        reply = http.post("/responses", content=json.dumps(body), headers=JSON)
        assert_envelope(reply, 400, f"was not issued by program {program['call_id']}")
        # Without the forged call the same conversation goes on.
        body["input"] = [*items, tampered[-1]]
        assert http.post("/responses", content=json.dumps(body), headers=JSON).status_code == 200
