"""`@pytest.mark.ptc_record`: a test's conversations recorded against an upstream into a cassette
named after the test, replayed from it with the upstream gone, and (mode `once`) only what is
missing recorded later."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.plugin.plugin_support import run

UPSTREAM = [
    {"name": "eta", "match": {"input": "(?i)when does (?P<p>P\\d) arrive"}, "turns": [{"message": "{{ p }}: Friday."}]},
    {"name": "where", "match": {"input": "(?i)where is (?P<p>P\\d)"}, "turns": [{"message": "{{ p }}: in Oslo."}]},
]

ONE = """
import pytest


@pytest.mark.ptc_record
def test_parcels(ptc_emulator):
    client = ptc_emulator.client(max_retries=0)
    assert client.responses.create(model="gpt-test", input="When does P1 arrive?").output_text == "P1: Friday."
"""
TWO = (
    ONE
    + """    assert client.responses.create(model="gpt-test", input="Where is P1?").output_text == "P1: in Oslo."
"""
)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[EmulatorServer]:
    scenarios = tmp_path / "upstream-scenarios"
    scenarios.mkdir()
    for scenario in UPSTREAM:
        (scenarios / f"{scenario['name']}.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    server = EmulatorServer(Settings(data_dir=tmp_path / "up", store="memory", pool_size=1, fixtures=(scenarios,)))
    yield server.start()
    server.stop()


def upstream_requests(server: EmulatorServer) -> int:
    return len(httpx.get(server.base_url.removesuffix("/v1") + "/_emulator/journal", timeout=30).json()["data"])


def test_record_then_replay_then_record_only_what_is_missing(
    pytester: pytest.Pytester, upstream: EmulatorServer
) -> None:
    staging = pytester.path / "staging"
    staging.mkdir()
    recording = (f"--ptc-emulator-upstream={upstream.base_url}", f"--ptc-emulator-record={staging}")
    cassette = pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml"
    pytester.makepyfile(test_parcels=ONE)

    run(pytester, *recording).assert_outcomes(passed=1)  # recorded against the upstream

    assert upstream_requests(upstream) == 1
    [first] = yaml.safe_load(cassette.read_text(encoding="utf-8"))["scenarios"]
    assert first["turns"] == [{"message": "P1: Friday."}] and "When does P1 arrive" in first["match"]["input"]
    assert list(staging.iterdir()) == []  # moved into the cassette

    run(pytester).assert_outcomes(passed=1)  # replayed: no upstream at all

    pytester.makepyfile(test_parcels=TWO)
    run(pytester, *recording).assert_outcomes(passed=1)  # once: the first from the cassette, the second recorded

    assert upstream_requests(upstream) == 2
    names = [s["name"] for s in yaml.safe_load(cassette.read_text(encoding="utf-8"))["scenarios"]]
    assert len(names) == 2 and names[0] == first["name"]
    run(pytester).assert_outcomes(passed=1)  # both replay offline


def test_a_conversation_the_cassette_lacks_is_a_400_without_an_upstream(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_parcels=ONE)

    result = run(pytester)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*400 - No scenario matches this request*"])
