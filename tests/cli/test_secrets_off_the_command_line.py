"""Nothing secret on the command line, where every local user reads it (ps, /proc/PID/cmdline): the
key and the secret come from the environment or a file, and a server given them as flags says so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.cli import parse
from ptc_emulator.testing.process import ServerProcess

KEY = "sk-not-for-ps-0123456789"
SECRET = "secret-not-for-ps-0123456789"


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_a_server_started_with_a_key_and_a_secret_shows_neither_in_ps(
    server_process: Callable[..., ServerProcess],
) -> None:
    server = server_process(api_key=KEY, secret=SECRET).start()
    assert server.proc is not None
    shown = " ".join(_cmdline(pid) for pid in [server.proc.pid, *server.worker_pids])
    assert KEY not in shown and SECRET not in shown
    assert httpx.get(f"{server.root}/_emulator/journal", timeout=10).status_code == 401  # the key is required
    assert httpx.get(f"{server.root}/_emulator/journal", headers=server.headers, timeout=10).status_code == 200


def test_keys_and_secrets_from_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "key").write_text(KEY + "\n")
    (tmp_path / "secret").write_text(SECRET + "\n")
    settings, _ = parse(["serve", "--api-key-file", str(tmp_path / "key"), "--secret-file", str(tmp_path / "secret")])
    assert settings.api_key == KEY and settings.secret == SECRET
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SystemExit) as exited:
        parse(["serve", "--api-key-file", str(tmp_path / "empty")])
    assert exited.value.code == 2 and "the file is empty" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["serve", "--secret-file", str(tmp_path / "missing")])
    assert "--secret-file" in capsys.readouterr().err


def test_a_key_given_as_a_flag_is_warned_about(server_process: Callable[..., ServerProcess]) -> None:
    server = server_process(args=("--api-key", KEY))
    server.api_key = KEY
    server.start()
    assert "--api-key on the command line is visible to every local user" in server.log()
