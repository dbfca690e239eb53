"""The pytest plugin's record options, as a user's suite meets them (pytest in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ptc_emulator.testing.process import ServerProcess
from tests.plugin.plugin_support import run
from tests.recording.test_record_replay import PARCELS

SUITE = """
import json

TOOLS = [
    {"type": "function", "name": "get_parcel", "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]


def test_parcels(ptc_emulator):
    client = ptc_emulator.client(max_retries=0)
    response = client.responses.create(model="m", input="Where are my parcels?", tools=TOOLS)
    while calls := [item for item in response.output if item.type == "function_call"]:
        outputs = [
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": json.dumps({"status": "at the depot"}),
                "caller": call.caller.model_dump(),
            }
            for call in calls
        ]
        response = client.responses.create(
            model="m", input=outputs, previous_response_id=response.id, tools=TOOLS
        )
    assert response.output_text == "3 parcels: P1 at the depot; P2 at the depot; P3 at the depot."
"""


@pytest.mark.timeout(460)  # 4 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_record_with_the_plugin_then_replay_without_the_upstream(pytester: pytest.Pytester, tmp_path: Path) -> None:
    scenarios = tmp_path / "upstream-scenarios"
    scenarios.mkdir()
    (scenarios / "parcels.yaml").write_text(yaml.safe_dump(PARCELS), encoding="utf-8")
    pytester.makepyfile(test_agent=SUITE)
    pytester.makeini("[pytest]\nptc_emulator_record_dir = cassettes\n")
    # The upstream runs in a process of its own: pytester drops the modules a test imports when it
    # ends, and a server started in this process would import uvicorn's protocol modules here.
    with ServerProcess(tmp_path / "up", store="memory", args=("--fixtures", str(scenarios))) as up:
        recording = run(pytester, "--ptc-emulator-upstream", up.base_url)
        recording.assert_outcomes(passed=1)
    [cassette] = (pytester.path / "cassettes").glob("*.yaml")
    assert "{{ data.summary }}" in cassette.read_text(encoding="utf-8")
    # The upstream is stopped: the default mode, none, replays from the same directory.
    run(pytester).assert_outcomes(passed=1)
    # `none` fails what nothing matches, and `new` without an upstream is refused.
    cassette.unlink()
    failed = run(pytester)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*No scenario matches*"])
    refused = run(pytester, "--ptc-emulator-record-mode", "new")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    said = refused.stdout.str() + refused.stderr.str()
    assert "--ptc-emulator-record-mode new needs --ptc-emulator-upstream URL" in said
