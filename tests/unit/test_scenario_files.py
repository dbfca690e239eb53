"""Scenario files on disk: JSON beside YAML, duplicate names refused naming both files, and
reloading (the watcher's check, `POST /_emulator/reset`, `--watch`) with the test controlling
when the files are looked at."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model import ScenarioError, ScenarioFiles, ScenarioRegistry, load_scenario
from tests.unit.fake_runner import FakeRunner

BASE_URL = "http://127.0.0.1"


def scenario_yaml(answer: str, name: str = "ping") -> str:
    return f"name: {name}\nmatch: {{input: '(?i)^ping'}}\nturns:\n  - message: {answer!r}\n"


def served(folder: Path, **settings: Any) -> TestClient:
    app = create_app(
        Settings(store="memory", secret="unit-tests", fixtures=(folder,), bundled_fixtures=False, **settings),
        runner=FakeRunner(),
    )
    return TestClient(app, base_url=BASE_URL, raise_server_exceptions=False)


def ask(http: TestClient, text: str = "ping") -> str:
    reply = http.post("/v1/responses", json={"model": "m", "input": text})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["output"][-1]["content"][0]["text"])


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "scenarios"
    path.mkdir()
    yield path


def test_a_json_scenario_file_loads_beside_yaml(folder: Path) -> None:
    (folder / "ping.yaml").write_text(scenario_yaml("pong from yaml"), encoding="utf-8")
    spec = {"match": {"input": "(?i)^hello"}, "turns": [{"message": "hi from json"}]}
    (folder / "greeting__hello.json").write_text(json.dumps(spec), encoding="utf-8")
    with served(folder) as http:
        assert ask(http) == "pong from yaml"
        assert ask(http, "hello there") == "hi from json"
        names = {s["name"]: s["source"] for s in http.get("/_emulator/scenarios").json()["data"]}
        assert names["greeting__hello"] == str(folder / "greeting__hello.json")  # named after the file


def test_a_broken_json_file_is_refused_naming_it(folder: Path) -> None:
    (folder / "broken.json").write_text('{"turns": [', encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"broken\.json: invalid JSON"):
        create_app(Settings(store="memory", fixtures=(folder,), bundled_fixtures=False), runner=FakeRunner())


def test_a_duplicate_name_is_refused_at_load_naming_both_files(folder: Path, tmp_path: Path) -> None:
    other = tmp_path / "more"
    other.mkdir()
    (folder / "a.yaml").write_text(scenario_yaml("first"), encoding="utf-8")
    (other / "b.yaml").write_text(scenario_yaml("second"), encoding="utf-8")  # the same `name: ping`
    with pytest.raises(ScenarioError) as refused:
        create_app(Settings(store="memory", fixtures=(folder, other), bundled_fixtures=False), runner=FakeRunner())
    message = str(refused.value)
    assert "duplicate scenario name 'ping'" in message
    assert str(folder / "a.yaml") in message and str(other / "b.yaml") in message


def test_the_watchers_check_picks_up_an_edit(folder: Path) -> None:
    path = folder / "ping.yaml"
    path.write_text(scenario_yaml("pong 1"), encoding="utf-8")
    registry = ScenarioRegistry()
    files = ScenarioFiles(registry, [folder]).load()
    assert files.check() is False  # nothing changed
    mine = load_scenario({"name": "mine", "turns": [{"message": "added at run time"}]})
    registry.add(mine)
    path.write_text(scenario_yaml("pong 2"), encoding="utf-8")  # the same size, perhaps the same mtime
    assert files.changed() is True and files.check() is True
    scenario = registry.get("ping")
    assert scenario is not None and scenario.turns[0].message == "pong 2"
    # Added and removed files count too.
    (folder / "extra.json").write_text(json.dumps({"turns": [{"message": "x"}]}), encoding="utf-8")
    assert files.check() is True and registry.get("extra") is not None
    (folder / "extra.json").unlink()
    assert files.check() is True and registry.get("extra") is None
    assert files.banner() == f"1 scenario loaded: 1 from {folder}"
    assert registry.get("mine") is mine  # what was added at run time stays through every reload


def test_an_edit_that_breaks_a_file_keeps_the_scenarios_and_says_why(folder: Path) -> None:
    path = folder / "ping.yaml"
    path.write_text(scenario_yaml("pong"), encoding="utf-8")
    registry = ScenarioRegistry()
    files = ScenarioFiles(registry, [folder]).load()
    path.write_text("turns: [\n", encoding="utf-8")
    assert files.check() is False
    assert files.error is not None and str(path) in files.error and "invalid YAML" in files.error
    scenario = registry.get("ping")
    assert scenario is not None and scenario.turns[0].message == "pong"
    assert files.check() is False  # the same broken file is not read again and again
    path.write_text(scenario_yaml("pong, fixed"), encoding="utf-8")
    assert files.check() is True and files.error is None


def test_reset_reloads_the_scenario_files(folder: Path) -> None:
    path = folder / "ping.yaml"
    path.write_text(scenario_yaml("before the edit"), encoding="utf-8")
    with served(folder) as http:
        assert ask(http) == "before the edit"
        path.write_text(scenario_yaml("after the edit"), encoding="utf-8")
        assert ask(http) == "before the edit"  # no --watch: nothing is read until asked
        added = {"name": "mine", "match": {"input": "^mine$"}, "turns": [{"message": "added at run time"}]}
        assert http.post("/_emulator/scenarios", json=added).status_code == 201
        assert http.post("/_emulator/reset", json={}).json() == {"scenarios_removed": 1, "journal_cleared": 2}
        assert ask(http) == "after the edit"


def test_watch_reloads_an_edited_file_while_serving(folder: Path) -> None:
    path = folder / "ping.yaml"
    path.write_text(scenario_yaml("before the edit"), encoding="utf-8")
    with served(folder, watch=True) as http:
        assert ask(http) == "before the edit"
        path.write_text(scenario_yaml("after the edit"), encoding="utf-8")
        deadline = time.monotonic() + 60  # generous: the watcher looks every WATCH_S (0.25 s)
        while ask(http) != "after the edit":
            assert time.monotonic() < deadline, "the edit was never picked up"
            time.sleep(0.05)
