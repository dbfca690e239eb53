"""Every number `ptc-emulator serve` takes is checked once, by one rule (`api/bounds.py`).

Before, the head and write-pause deadlines took `inf` (a deadline that never comes), every other
seconds flag took `nan`, nought or a negative (`--timeout nan`: every program timed out at once or
never), a count took nought or a negative (`--workers 0`, `--heap-mb -1`), a port past 65535 was a
traceback, and `--upstream-timeout` alone was checked, with a rule of its own. Now each is one line
naming the flag and the value, and exit status 2, before anything starts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from ptc_emulator.api import cli
from ptc_emulator.api.bounds import Bound

BAD_SECONDS = ("nan", "inf", "-inf", "0", "-1", "1e400", "1e9", "soon")
BAD_WHOLE = ("nan", "inf", "-1", "1.5", "2e3", str(2**40 + 1), "many")


def _serve_parser() -> argparse.ArgumentParser:
    parser = cli._parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices["serve"]


def _numeric_flags() -> list[tuple[str, Bound]]:
    flags = []
    for action in _serve_parser()._actions:
        if isinstance(action.type, Bound):
            flags.append((action.option_strings[-1], action.type))
    return flags


def test_every_numeric_flag_of_serve_is_checked_by_the_one_rule() -> None:
    """No flag takes a bare `int` or `float`: a new one must say which rule holds for it."""
    unchecked = [
        action.option_strings[-1]
        for action in _serve_parser()._actions
        if action.type in (int, float)
        or (
            isinstance(action.default, (int, float))
            and not isinstance(action.type, Bound)
            and not isinstance(action.default, bool)
        )
    ]
    assert unchecked == []
    names = {flag for flag, _ in _numeric_flags()}
    for expected in (
        "--head-timeout",
        "--body-timeout",
        "--write-pause-timeout",
        "--upstream-timeout",
        "--port",
        "--workers",
        "--timeout",
        "--max-body-bytes",
        "--model-upstream-retries",
        "--live-cache",
    ):
        assert expected in names, expected
    assert len(names) >= 20


@pytest.mark.parametrize(("flag", "bound"), _numeric_flags())
def test_each_numeric_flag_refuses_what_it_cannot_mean(
    flag: str, bound: Bound, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = BAD_SECONDS if bound.seconds else (*BAD_WHOLE, *(() if bound.minimum == 0 else ("0",)))
    for value in bad:
        with pytest.raises(SystemExit) as exited:
            cli.main(["serve", f"{flag}={value}"])
        assert exited.value.code == 2, (flag, value)
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err  # one line, not argparse's forty of usage first
        assert err.startswith(f"ptc-emulator serve: error: argument {flag}: not "), err
        assert repr(value) in err, err


@pytest.mark.parametrize(("flag", "bound"), _numeric_flags())
def test_each_numeric_flag_takes_its_default(flag: str, bound: Bound) -> None:
    action = next(a for a in _serve_parser()._actions if flag in a.option_strings)
    assert bound.problem(action.default) is None, (flag, action.default)


def test_nought_is_taken_where_the_help_says_what_it_means() -> None:
    settings, _ = cli.parse(["serve", "--live-cache", "0", "--model-upstream-retries", "0", "--port", "0"])
    assert (settings.live_cache, settings.model_upstream_retries, settings.port) == (0, 0, 0)
    settings, _ = cli.parse(["serve", "--body-timeout", "0.5", "--head-timeout", "2"])
    assert (settings.body_timeout_s, settings.head_timeout_s) == (0.5, 2.0)


def test_the_command_line_says_a_bad_number_in_one_line_and_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ptc_emulator", "serve", "--head-timeout", "inf"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "ptc-emulator serve: error: argument --head-timeout: not a positive, finite number of seconds "
        "(at most 604800, a week): 'inf' (`ptc-emulator serve --help` lists the options)\n"
    )


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--lease-seconds", "0.0001", "not a number of seconds from 1 to 604800 (a week)"),
        ("--lease-seconds", "0.5", "not a number of seconds from 1 to 604800 (a week)"),
        ("--workers", "1024", "not a whole number from 1 to 64"),
        ("--workers", "65", "not a whole number from 1 to 64"),
    ],
)
def test_what_would_cost_the_machine_too_much_is_refused(
    flag: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: `--lease-seconds 0.0001` was taken, and an idle PostgreSQL replica renewed and
    scanned its leases some 9,000 times a second against the shared database; `--workers 1024`
    (then the documented maximum) started some 800 V8 processes of ~75 MB each and ran a 24 GB
    machine out of memory. Only the refusal is checked here (`parse`, which starts nothing)."""
    with pytest.raises(SystemExit) as exited:
        cli.parse(["serve", flag, value])  # never serves, so the old code is never run with them
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"ptc-emulator serve: error: argument {flag}: {said}: {value!r}"), err


def test_the_floor_and_the_ceiling_themselves_are_taken() -> None:
    settings, _ = cli.parse(["serve", "--lease-seconds", "1", "--workers", "64"])
    assert (settings.lease_s, settings.pool_size) == (1.0, 64)


def test_settings_built_in_code_are_held_to_the_same_bounds() -> None:
    from ptc_emulator.api.settings import Settings

    with pytest.raises(ValueError, match="--lease-seconds"):
        Settings(lease_s=0.0001)
    with pytest.raises(ValueError, match="--workers"):
        Settings(pool_size=1024)
