"""`serve` given hostile values says what is wrong in one line: never a traceback, never a read
without end (a secret file that is /dev/zero)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ptc_emulator.api.cli import parse


@pytest.mark.parametrize("option", ["--secret-file", "--api-key-file"])
def test_a_secret_file_that_is_no_regular_file_is_refused_unread(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["serve", option, "/dev/zero"])  # read whole, it never ends
    assert exited.value.code == 2
    assert f"{option} /dev/zero: not a regular file" in capsys.readouterr().err


def test_a_secret_file_too_large_or_not_text_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "big").write_bytes(b"x" * (1 << 20))
    with pytest.raises(SystemExit):
        parse(["serve", "--secret-file", str(tmp_path / "big")])
    assert "larger than" in capsys.readouterr().err
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(SystemExit):
        parse(["serve", "--secret-file", str(tmp_path / "bin")])
    assert "not UTF-8 text" in capsys.readouterr().err


def test_an_unknown_log_level_is_an_argument_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["serve", "--log-level", "loud"])
    assert exited.value.code == 2 and "--log-level: not a log level: 'loud'" in capsys.readouterr().err
    assert parse(["serve", "--log-level", "DEBUG"])[1] == "debug"


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ptc_emulator", "serve", "--port", "0", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = _serve("--data-dir", str(tmp_path / "file" / "under"))  # a file where a folder must be
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"cannot start: {tmp_path / 'file' / 'under'}: " in done.stderr
    assert f"(--data-dir {tmp_path / 'file' / 'under'})" in done.stderr


def test_fixtures_that_is_a_file_says_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("")
    done = _serve("--fixtures", str(tmp_path / "x.yaml"))
    assert done.returncode == 2 and "not a directory" in done.stderr and "no such directory" not in done.stderr


@pytest.mark.parametrize("upstream", ["--upstream", "--model-upstream"])
def test_a_record_dir_that_is_a_file_is_one_line(tmp_path: Path, upstream: str) -> None:
    """With --model-upstream the server started, then its startup failed with tracebacks (exit 3)."""
    (tmp_path / "afile").write_text("")
    done = _serve(upstream, "http://127.0.0.1:9/v1", "--record", str(tmp_path / "afile"), "--data-dir", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"--record {tmp_path / 'afile'}: cannot record into it (not a directory)" in done.stderr


def test_a_data_dir_sqlite_cannot_use_is_one_line() -> None:
    """A folder that exists but holds no SQLite file (`/proc/1`) was a traceback from the store."""
    done = _serve("--data-dir", "/proc/1")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "cannot start: /proc/1: the SQLite store cannot be opened there" in done.stderr


@pytest.mark.parametrize("option", ["--model-upstream", "--upstream"])
@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:abc/v1"])
def test_an_upstream_url_that_does_not_parse_is_refused_at_start(option: str, url: str, tmp_path: Path) -> None:
    """Such a URL started the server, and every request the upstream had to answer was a 500."""
    record = ("--record", str(tmp_path / "recordings")) if option == "--upstream" else ()
    done = _serve(option, url, *record)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{option} {url}: not an http:// or https:// base URL" in done.stderr


@pytest.mark.parametrize(
    "value", ["::::", "[::::]", "a b", "", "host:x", "host:70000", "[::1]:", "1.2.3.4.5", "a-.com"]
)
def test_an_mcp_allow_host_that_is_no_host_is_an_argument_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Anything was taken before (`::::` matched no host, silently).
    with pytest.raises(SystemExit) as exited:
        parse(["serve", "--mcp-allow-host", value])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--mcp-allow-host: not a host (" in err and repr(value) in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "value", ["localhost", "localhost:9000", "127.0.0.1:8765", "::1", "[::1]:9000", "fe80::1", "mcp.test.", "mcp_box"]
)
def test_an_mcp_allow_host_that_is_a_host_is_taken(value: str) -> None:
    assert parse(["serve", "--mcp-allow-host", value])[0].mcp_allow_hosts == (value,)


@pytest.mark.parametrize("option", ["--model-upstream", "--upstream"])
@pytest.mark.parametrize("url", ["http://admin:pw-s3cret@127.0.0.1:9/v1", "https://pw-s3cret@127.0.0.1:9/v1"])
def test_an_upstream_url_with_a_credential_is_refused_without_echoing_it(option: str, url: str, tmp_path: Path) -> None:
    """Before, the URL was taken: its user:password went upstream as Basic auth and was shown, never
    redacted, in the startup line, the log and the message of every 502 or 504 to a client."""
    record = ("--record", str(tmp_path / "recordings")) if option == "--upstream" else ()
    done = _serve(option, url, "--data-dir", str(tmp_path), *record)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{option}: the URL carries a user name or password" in done.stderr
    assert "pw-s3cret" not in done.stderr
