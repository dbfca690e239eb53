"""100 tests under pytest-xdist, each with its own scenario of the same name and the same match
pattern but its own answer: every test must get its own answer and see only its own journal.

Run twice: with a server per xdist worker (`--ptc-emulator-shared=no`; two workers), and with four
workers on ONE server through --ptc-emulator-url, where only the per-test scopes keep the tests
apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.plugin.plugin_support import run

COUNT = 100

SAME_NAME_SAME_PATTERN = f"""
import random
import time

import pytest


@pytest.mark.parametrize("n", range({COUNT}))
def test_own_answer(ptc_emulator, n):
    ptc_emulator.add_scenario(
        {{"name": "answer", "match": {{"input": "(?i)which answer"}}, "turns": [{{"message": f"answer {{n}}"}}]}}
    )
    client = ptc_emulator.client(max_retries=0)
    for _ in range(2):
        time.sleep(random.random() / 50)  # let the other workers' tests interleave
        assert client.responses.create(model="m", input="Which answer is mine?").output_text == f"answer {{n}}"
    journal = ptc_emulator.journal
    assert [e["scenario"] for e in journal] == ["answer", "answer"]
    assert {{e["scope"] for e in journal}} == {{ptc_emulator.scope}}
    listed = [s for s in ptc_emulator.admin.get("/scenarios").json()["data"] if s["name"] == "answer"]
    assert [s["scope"] for s in listed] == [ptc_emulator.scope]
"""


def test_a_server_per_worker(pytester: pytest.Pytester) -> None:
    # Two workers show a server per worker as well as four would (the four are shown sharing one
    # server below); each worker is a process that starts its own server and sandbox workers.
    pytester.makepyfile(test_many=SAME_NAME_SAME_PATTERN)
    result = run(pytester, "-n", "2", "--ptc-emulator-shared=no")
    result.assert_outcomes(passed=COUNT)
    result.stdout.fnmatch_lines(["*2 workers*"])


@pytest.fixture
def shared_server(tmp_path: Path) -> Iterator[EmulatorServer]:
    server = EmulatorServer(
        Settings(data_dir=tmp_path / "shared", store="memory", pool_size=1, bundled_fixtures=False)
    ).start()
    yield server
    server.stop()


def test_four_workers_on_one_server(pytester: pytest.Pytester, shared_server: EmulatorServer) -> None:
    pytester.makepyfile(test_many=SAME_NAME_SAME_PATTERN)

    result = run(pytester, "-n", "4", f"--ptc-emulator-url={shared_server.base_url}")

    result.assert_outcomes(passed=COUNT)
    result.stdout.fnmatch_lines(["*4 workers*"])
    admin = f"http://127.0.0.1:{shared_server.port}/_emulator"
    assert httpx.get(f"{admin}/health", timeout=30).json()["stored_responses"] == 2 * COUNT  # all on this server
    assert httpx.get(f"{admin}/scenarios", timeout=30).json()["data"] == []  # and every test cleaned up
