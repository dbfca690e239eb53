"""The scenario files are read and parsed off the event loop when they are loaded again (`--watch`,
`POST /_emulator/reset`): a large file takes seconds to parse (300,000 small YAML values in the
1 MiB a file may hold: 14 s), and health and a small create are answered meanwhile.

The server runs in this process, so each test holds the reading of the new file on an event the
test sets. Nothing is timed: with the reload on the event loop, health got no answer until the
event was set (issue 38).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.model.scripted import files
from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import Held, others_answered_while_held, while_held

SCENARIO = "match: {input: '^{word}$'}\nturns:\n  - message: '{word} back'\n"


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """Holds the reading of any file named new.yaml."""
    holder = Held()
    real = files.read

    def read(path: Path) -> Any:
        if path.name == "new.yaml":
            holder.hold()
        return real(path)

    monkeypatch.setattr(files, "read", read)
    yield holder
    holder.release.set()


def _scenarios(tmp_path: Path) -> Path:
    directory = tmp_path / "scenarios"
    directory.mkdir()
    (directory / "old.yaml").write_text(SCENARIO.replace("{word}", "old"))
    return directory


def _answer(server: EmulatorServer, word: str) -> str:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        reply = http.post("/responses", json={"model": "m", "input": word})
    assert reply.status_code == 200, reply.text[:500]
    return str(reply.json()["output"][-1]["content"][0]["text"])


def test_a_reset_reads_the_scenario_files_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, tmp_path: Path
) -> None:
    directory = _scenarios(tmp_path)
    server = make_server(fixtures=(directory,))
    (directory / "new.yaml").write_text(SCENARIO.replace("{word}", "new"))
    admin = server.base_url.removesuffix("/v1") + "/_emulator/reset"
    while_held(server, held, lambda client: client.post(admin, json={}))
    assert _answer(server, "new") == "new back"


def test_watching_reads_the_scenario_files_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, tmp_path: Path
) -> None:
    directory = _scenarios(tmp_path)
    server = make_server(fixtures=(directory,), watch=True)
    assert _answer(server, "old") == "old back"
    (directory / "new.yaml").write_text(SCENARIO.replace("{word}", "new"))
    others_answered_while_held(server, held.entered, held.release, Future())


def test_a_reload_puts_only_the_files_scenarios_again(
    make_server: Callable[..., EmulatorServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every reload dropped and indexed again every scenario added at run time too, on the
    # event loop (10,000 of them: 0.07-0.32 s at each `--watch` reload): here 33 weighed, not 1.
    directory = _scenarios(tmp_path)
    server = make_server(fixtures=(directory,))
    admin = server.base_url.removesuffix("/v1") + "/_emulator"
    with httpx.Client(timeout=60) as http:
        for n in range(30):
            body = {"name": f"r{n}", "match": {"input": f"^r{n}$"}, "turns": [{"message": f"r{n} back"}]}
            assert http.post(f"{admin}/scenarios", json=body).status_code == 201
        body = {"name": "old", "match": {"input": "^old$"}, "turns": [{"message": "run-time old"}]}
        assert http.post(f"{admin}/scenarios", json=body).status_code == 201
        weighed: list[str] = []
        real = scenario_module._weight

        def counted(scenario: Any) -> int:
            weighed.append(scenario.name)
            return real(scenario)

        monkeypatch.setattr(scenario_module, "_weight", counted)
        (directory / "new.yaml").write_text(SCENARIO.replace("{word}", "new"))
        scoped = {"x-ptc-emulator-scope": "elsewhere"}  # its reset leaves the unscoped ones
        assert http.post(f"{admin}/reset", json={}, headers=scoped).status_code == 200
    assert sorted(weighed) == ["new"]  # the file `old` is shadowed by the run-time one
    assert _answer(server, "new") == "new back"
    assert _answer(server, "r7") == "r7 back"
    assert _answer(server, "old") == "run-time old"
