"""`ptc-emulator` as a user meets it: the command line, run as a process."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import ptc_emulator

CLI = [sys.executable, "-m", "ptc_emulator"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def busy_port() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ptc-emulator {ptc_emulator.__version__}"


def test_serve_help_shows_the_defaults() -> None:
    done = run("serve", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for default in ("default 127.0.0.1", "(default: 8000)", "default: sqlite with"):
        assert default in text, default
    assert "(default: 64)" in text


def test_serve_help_states_each_default_once() -> None:
    """No flag's help says its default twice (its own words and argparse's), nor "None"/"False"."""
    done = run("serve", "--help")
    flags = re.split(r"\n  (?=-)", done.stdout)
    assert len(flags) > 30
    for flag in flags:
        text = " ".join(flag.split())
        assert text.count("default") <= 1, text
        assert "(default: None)" not in text and "(default: False)" not in text and "(default: [])" not in text, text


def test_a_port_in_use_is_one_clear_line_and_a_failure(busy_port: int, tmp_path: Path) -> None:
    done = run("serve", "--port", str(busy_port), "--store", "memory", "--workers", "1")
    assert done.returncode == 1
    assert f"ptc-emulator: cannot listen on 127.0.0.1:{busy_port}" in done.stderr
    assert "serving on" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_fixtures_directory_is_an_error(tmp_path: Path) -> None:
    done = run("serve", "--fixtures", str(tmp_path / "nowhere"), "--store", "memory")
    assert done.returncode == 2
    assert done.stderr.strip() == f"ptc-emulator: --fixtures {tmp_path / 'nowhere'}: no such directory"


def test_memory_store_writes_nothing_and_says_where_it_serves(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "PTC_EMULATOR_SECRET"}
    server = subprocess.Popen(
        [*CLI, "serve", "--port", "0", "--store", "memory", "--data-dir", str(data_dir), "--workers", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # printed once the port is bound
        assert "nothing written to disk" in line, line
        url = line.split("serving on ")[1].split()[0]
        body = {"model": "m", "input": "```js\ntext('hi')\n```", "tools": [{"type": "programmatic_tool_calling"}]}
        reply = httpx.post(f"{url}/responses", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        assert reply.json()["output"][-1]["content"][0]["text"] == "hi"
    finally:
        server.terminate()
        server.wait(60)
        if server.stderr is not None:
            server.stderr.close()
    assert not data_dir.exists()
