"""Trace artifacts: for each failed test that used the `ptc_emulator` fixture, the inspector's view
of the test's conversations as one self-contained HTML file (it opens from disk, no server
needed) and the test's journal as JSON, their paths printed in the failure report.

    pytest                                      # writes under .ptc-emulator/traces/ (of the rootdir)
    pytest --ptc-emulator-traces=ci-artifacts   # or the ini option ptc_emulator_traces_dir
    pytest --ptc-emulator-traces=off            # writes none

Each run starts by removing the traces an earlier run left there (the plugin's own files only).

`ptc-emulator inspect FILE` serves either file in the inspector. Loaded by the plugin
(`testing/plugin.py`); like it, this imports only pytest and the standard library until a trace is
written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["DEFAULT_DIR", "keep_trace", "trace_paths", "write_trace"]

DEFAULT_DIR = ".ptc-emulator/traces"
_written = pytest.StashKey[bool]()
_section = pytest.StashKey[str]()
_reported = pytest.StashKey[bool]()
OFF = ("off", "none", "no", "false", "0")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ptc-emulator")
    group.addoption(
        "--ptc-emulator-traces",
        default=None,
        metavar="DIR",
        help="where a failed test's trace (HTML and JSON journal) is written, relative to the rootdir; "
        f"'off' writes none (default: the ini option ptc_emulator_traces_dir, else {DEFAULT_DIR})",
    )
    parser.addini(
        "ptc_emulator_traces_dir",
        default=DEFAULT_DIR,
        help=f"where failed tests' traces are written (relative to the rootdir; 'off' for none; default {DEFAULT_DIR})",
    )


def traces_dir(config: pytest.Config) -> Path | None:
    """The directory traces go to, or None when they are off."""
    value = config.getoption("--ptc-emulator-traces") or str(config.getini("ptc_emulator_traces_dir") or "")
    if not value or value.strip().lower() in OFF:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(config.rootpath) / path


_OWN_NAME = re.compile(r"^[A-Za-z0-9._-]*-[0-9a-f]{8}\.json$")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Clear the traces of earlier runs (their tests may pass now), once per run: not in an xdist
    worker, whose siblings write theirs. Only the plugin's own files go: a JSON whose name is a
    trace's and whose content says `emulator.trace`, and the HTML of the same name."""
    config = session.config
    directory = traces_dir(config)
    if hasattr(config, "workerinput") or directory is None or not directory.is_dir():
        return
    for data in directory.glob("*.json"):
        if not _OWN_NAME.match(data.name):
            continue
        try:
            own = json.loads(data.read_text(encoding="utf-8")).get("object") == "emulator.trace"
        except (OSError, ValueError, AttributeError):
            continue
        if own:
            data.with_suffix(".html").unlink(missing_ok=True)
            data.unlink(missing_ok=True)


def trace_paths(directory: Path, nodeid: str) -> tuple[Path, Path]:
    """The HTML and JSON files of one test: named after its node id (readable, and unique by a
    short hash of the whole id)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")[:120] or "test"
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:8]
    stem = f"{readable}-{digest}"
    return directory / f"{stem}.html", directory / f"{stem}.json"


def write_trace(directory: Path, nodeid: str, emulator: Any) -> tuple[Path, Path]:
    """Write the trace of `emulator`'s scope (a `PTCEmulator`) for test `nodeid`."""
    from ptc_emulator.api.inspector.trace import trace_html, trace_json

    entries = emulator.journal
    html, data = trace_paths(directory, nodeid)
    directory.mkdir(parents=True, exist_ok=True)
    data.write_text(trace_json(entries, test=nodeid, scope=emulator.scope), encoding="utf-8")
    html.write_text(trace_html(entries, title=nodeid), encoding="utf-8")
    return html, data


def keep_trace(item: pytest.Item, emulator: Any) -> None:
    """Write `item`'s trace now (the fixture calls this when the test fails in its teardown, before
    the emulator's client is closed); the report of that phase then says where it is."""
    directory = traces_dir(item.config)
    if directory is None or item.stash.get(_written, False):
        return
    item.stash[_written] = True
    item.stash[_section] = _write(directory, item.nodeid, emulator)


def _write(directory: Path, nodeid: str, emulator: Any) -> str:
    try:
        html, data = write_trace(directory, nodeid, emulator)
    except Exception as error:  # a trace that cannot be written must not hide the failure
        return f"no trace written: {type(error).__name__}: {error}"
    return f"trace: {html}\njournal: {data}\n(open the HTML in a browser, or: ptc-emulator inspect {data})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test that used the emulator leaves its trace, and its report says where."""
    report: pytest.TestReport = yield
    if not report.failed:
        return report
    section = item.stash.get(_section, None)
    if section is None:
        funcargs = getattr(item, "funcargs", None) or {}
        emulator = funcargs.get("ptc_emulator")
        directory = traces_dir(item.config)
        if emulator is None or directory is None or item.stash.get(_written, False):
            return report
        item.stash[_written] = True
        section = item.stash[_section] = _write(directory, item.nodeid, emulator)
    if not item.stash.get(_reported, False):
        item.stash[_reported] = True
        report.sections.append(("ptc-emulator trace", section))
    return report
