"""What `ptc-emulator serve` writes where, and what its startup lines say, run as a process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

CLI = [sys.executable, "-m", "ptc_emulator"]
LAST_LINE = "trace inspector at"


@dataclass
class Started:
    lines: list[str]
    """The startup lines, up to the inspector's (the last)."""
    url: str
    """The `/v1` URL."""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def clean_env(home: Path) -> dict[str, str]:
    """The environment without the emulator's own variables, with a home directory of the test's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTC_EMULATOR_") and k != "XDG_DATA_HOME"}
    env["HOME"] = str(home)
    return env


@contextlib.contextmanager
def serving(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Iterator[Started]:
    """`serve --port 0 --workers 1 ARGS` in `cwd`, until its startup lines are out; stopped after."""
    server = subprocess.Popen(
        [*CLI, "serve", "--port", "0", "--workers", "1", *args],
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env if env is not None else clean_env(cwd / "home"),
    )
    try:
        assert server.stderr is not None
        lines: list[str] = []
        while not lines or LAST_LINE not in lines[-1]:
            line = server.stderr.readline()
            assert line, "the server stopped before its startup lines:\n" + "".join(lines)
            if line.startswith("ptc-emulator: "):
                lines.append(line.rstrip("\n"))
        url = next(line.split("serving on ")[1].split()[0] for line in lines if "serving on " in line)
        yield Started(lines, url)
    finally:
        server.terminate()
        server.wait(60)
        if server.stderr is not None:
            server.stderr.close()


def ask(url: str) -> None:
    """One stored response with a program: something a store would keep."""
    body = {"model": "m", "input": "```js\ntext('hi')\n```", "tools": [{"type": "programmatic_tool_calling"}]}
    reply = httpx.post(f"{url}/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["output"][-1]["content"][0]["text"] == "hi"


def files_under(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders if folder.exists() for p in folder.rglob("*") if p.is_file())


def test_serve_without_a_data_dir_keeps_everything_in_memory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with serving(cwd=tmp_path) as started:
        ask(started.url)
        assert "store=memory" in started.lines[0] and "nothing written to disk" in started.lines[0], started.text
    assert files_under(tmp_path) == [], "serve without --data-dir wrote files"


def test_a_data_dir_means_sqlite_there(tmp_path: Path) -> None:
    data = tmp_path / "state"
    with serving("--data-dir", str(data), cwd=tmp_path) as started:
        ask(started.url)
        assert f"store=sqlite, data dir {data}" in started.lines[0], started.text
    assert {p.name for p in files_under(data)} >= {"responses.sqlite3", "secret"}
    assert files_under(tmp_path / "home") == []


def test_sqlite_without_a_data_dir_writes_under_the_project_and_says_so(tmp_path: Path) -> None:
    with serving("--store", "sqlite", cwd=tmp_path) as started:
        ask(started.url)
        project = tmp_path / ".ptc-emulator" / "data"
        assert f"store=sqlite, data dir {project}" in started.lines[0], started.text
    assert (project / "responses.sqlite3").is_file()
    assert files_under(tmp_path / "home") == [], "nothing goes to the home directory"


def test_the_data_dir_variable_counts_as_the_flag(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home") | {"PTC_EMULATOR_DATA_DIR": str(tmp_path / "from-env")}
    with serving(cwd=tmp_path, env=env) as started:
        assert f"store=sqlite, data dir {tmp_path / 'from-env'}" in started.lines[0], started.text


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_an_explicit_store_wins_over_the_default(tmp_path: Path, store: str) -> None:
    with serving("--store", store, "--data-dir", str(tmp_path / "d"), cwd=tmp_path) as started:
        assert f"store={store}," in started.lines[0], started.text


def test_the_startup_lines_name_every_source(tmp_path: Path) -> None:
    """Scenario folders, the recording proxy and its folder, the model upstream, the store: each named."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "hi.yaml").write_text("match: {input: hi}\nturns:\n  - message: hello\n")
    record = tmp_path / "recorded"
    args = ["--fixtures", str(scenarios), "--upstream", "http://127.0.0.1:9/v1", "--record", str(record)]
    args += ["--model-upstream", "http://127.0.0.1:9/v1", "--model-upstream-model", "small-model"]
    with serving(*args, cwd=tmp_path) as started:
        text = started.text
    assert "store=memory" in text
    assert f"1 from {scenarios}" in text, text
    assert f"proxying /v1/responses to http://127.0.0.1:9/v1 (--record-mode new), recording into {record}" in text
    assert "model upstream http://127.0.0.1:9/v1 (chat, small-model) answers what no scenario matches" in text


def test_replayed_recordings_are_named(tmp_path: Path) -> None:
    record = tmp_path / "recorded"
    record.mkdir()
    with serving("--record", str(record), "--record-mode", "none", cwd=tmp_path) as started:
        assert f"recordings in {record} (--record-mode none)" in started.text, started.text
