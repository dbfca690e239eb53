"""`ptc-emulator inspect FILE`: a saved trace (a failed test's .json or .html, or a journal's
JSON) served in the inspector on 127.0.0.1, with no emulator running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.inspector.serve import TraceError, TraceServer, load_trace
from ptc_emulator.api.inspector.trace import trace_html
from ptc_emulator.testing.server import PTCEmulator
from tests.cli.test_cli import CLI, run

PING = {"name": "ping", "match": {"input": "(?i)^ping"}, "turns": [{"message": "pong from the saved trace"}]}


def saved(emulator: PTCEmulator, folder: Path) -> Path:
    emulator.add_scenario(PING)
    emulator.client().responses.create(model="m", input="ping, then save the trace")
    path = folder / "trace.json"
    path.write_text(json.dumps({"object": "emulator.trace", "test": "t::ping", "journal": emulator.journal}))
    return path


def test_inspect_serves_a_saved_journal(ptc_emulator: PTCEmulator, tmp_path: Path) -> None:
    path = saved(ptc_emulator, tmp_path)
    server = subprocess.Popen([*CLI, "inspect", str(path)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        [url] = re.findall(r"in the inspector at (http://127\.0\.0\.1:\d+/_emulator/ui/)", line)
        root = url[: -len("/_emulator/ui/")]
        assert httpx.get(root + "/", timeout=30).headers["location"] == "/_emulator/ui/"
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "pong from the saved trace" in page.text and 'id="ptc-trace"' in page.text
        assert httpx.get(root + "/_emulator/journal", timeout=30).status_code == 404  # nothing else
        foreign = httpx.get(url, headers={"Host": "evil.example"}, timeout=30)
        assert foreign.status_code == 403 and "pong" not in foreign.text
        assert httpx.get(url, headers={"Origin": "http://evil.example"}, timeout=30).status_code == 403
    finally:
        server.terminate()  # the process this test started, by its handle
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def test_the_trace_html_itself_is_served_as_it_is(ptc_emulator: PTCEmulator, tmp_path: Path) -> None:
    page = trace_html(json.loads(saved(ptc_emulator, tmp_path).read_text())["journal"], title="t::ping")
    html = tmp_path / "trace.html"
    html.write_text(page, encoding="utf-8")
    server = TraceServer(load_trace(html)).start()
    try:
        assert httpx.get(server.url, timeout=30).text == page
    finally:
        server.stop()


def test_what_is_not_a_trace_is_one_line_and_status_2(tmp_path: Path) -> None:
    cases = {
        "missing.json": None,
        "broken.json": "{not json",
        "other.json": '{"hello": "world"}',
        "page.html": "<html><body>hello</body></html>",
        "deep.json": "[" * 100_000 + "]" * 100_000,
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text, encoding="utf-8")
        done = run("inspect", str(path), timeout=60)
        assert done.returncode == 2, (name, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith(f"ptc-emulator: {path}: "), line
    assert "not a journal" in run("inspect", str(tmp_path / "other.json")).stderr
    assert sys.executable  # the CLI ran under this interpreter


def test_a_crafted_page_is_never_served_only_its_trace_data_with_the_inspector_policy(tmp_path: Path) -> None:
    """A page that merely holds `id="ptc-trace"` used to be served verbatim, with no policy: its
    scripts ran on 127.0.0.1. Now only the trace data is taken from the file, into the emulator's
    own page, served with a Content-Security-Policy that allows only that page's scripts."""
    data = json.dumps({"title": "crafted", "conversations": []})
    crafted = tmp_path / "trace.html"
    crafted.write_text(
        f'<html><head>\n</head><body><script type="application/json" id="ptc-trace">{data}</script>'
        "<script>document.title = 'EVIL-' + document.cookie</script></body></html>",
        encoding="utf-8",
    )
    server = subprocess.Popen([*CLI, "inspect", str(crafted)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        [url] = re.findall(r"in the inspector at (http://127\.0\.0\.1:\d+/_emulator/ui/)", server.stderr.readline())
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and "EVIL-" not in page.text and 'id="ptc-trace"' in page.text
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "'unsafe-inline'" not in policy
        root = url[: -len("/_emulator/ui/")]
        for other in ("/_emulator/ui/../../etc/passwd", "/trace.html", "/_emulator/ui/inspector.js"):
            assert httpx.get(root + other, timeout=30).status_code == 404
    finally:
        server.terminate()  # the process this test started, by its handle
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def test_a_trace_holding_an_integer_python_will_not_read_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Python's parser refuses an integer of more than 4300 digits with a ValueError that is not a
    JSONDecodeError: `inspect` printed its traceback, for a journal's JSON and a trace page alike."""
    number = "9" * 5000
    journal = tmp_path / "journal.json"
    journal.write_text('{"journal": [{"x": ' + number + "}]}", encoding="utf-8")
    page = tmp_path / "trace.html"
    page.write_text(f'<script type="application/json" id="ptc-trace">{{"conversations": [{number}]}}</script>')
    for path, said in ((journal, "not JSON"), (page, "not a ptc-emulator trace (its data is not JSON")):
        done = run("inspect", str(path), timeout=60)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.strip() == f"ptc-emulator: {path}: {said}" + (
            " (an integer of more than 4300 digits)" if said == "not JSON" else ": an integer of more than 4300 digits)"
        )


def test_a_trace_holding_a_lone_surrogate_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A JSON escape such as `"\\ud800"` reads as a string no page can carry: `inspect` printed the
    UnicodeEncodeError's traceback, for a journal's JSON and a trace page alike."""
    journal = tmp_path / "journal.json"
    journal.write_text('{"journal": [{"id": "\\ud800"}]}', encoding="utf-8")
    page = tmp_path / "trace.html"
    page.write_text('<script type="application/json" id="ptc-trace">{"title": "\\udfff", "conversations": []}</script>')
    for path in (journal, page):
        done = run("inspect", str(path), timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.strip() == (
            f"ptc-emulator: {path}: not a ptc-emulator trace (a lone surrogate in a string: not valid Unicode)"
        )


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_trace_holding_a_non_finite_number_is_one_line_not_an_empty_page(tmp_path: Path, constant: str) -> None:
    """Python's parser reads `NaN` and `Infinity`; the page then carried them to the browser,
    whose `JSON.parse` refused its data: `inspect` served an empty inspector, saying nothing."""
    journal = tmp_path / "journal.json"
    journal.write_text('{"journal": [{"seq": ' + constant + "}]}", encoding="utf-8")
    page = tmp_path / "trace.html"
    page.write_text(
        '<script type="application/json" id="ptc-trace">{"conversations": [{"seq": ' + constant + "}]}</script>"
    )
    for path in (journal, page):
        done = run("inspect", str(path), timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.strip() == (
            f"ptc-emulator: {path}: not a ptc-emulator trace (it holds {constant}, which JSON does not have)"
        )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_device_is_refused_unread_in_one_line(tmp_path: Path) -> None:
    """A FIFO was waited on forever (`open` blocks for a writer) and `/dev/zero` read for 256 MiB:
    each is now one line naming the file, status 2, with nothing read."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for path in (fifo, Path(os.devnull), Path("/dev/zero")):
        if not path.exists():
            continue
        done = run("inspect", str(path), timeout=60)
        assert done.returncode == 2, (path, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line == f"ptc-emulator: {path}: not a regular file: not a trace", line


MISTYPED_ENTRIES = {
    "a status that is no number": {"status": "x"},
    "a status that is null": {"status": None},
    "figures that are no mapping": {"status": 200, "figures": 1.5},
    "a sequence that is a mapping": {"status": 200, "seq": {"a": 1}},
    "a scope that is a mapping": {"status": 200, "scope": {"a": 1}, "response_id": "resp_1"},
    "a time that is text": {"status": 200, "at": "noon"},
}


@pytest.mark.parametrize("entry", list(MISTYPED_ENTRIES.values()), ids=list(MISTYPED_ENTRIES))
def test_a_journal_entry_of_the_wrong_types_is_one_line_not_a_traceback(entry: dict[str, object]) -> None:
    """A journal's entries were read as the server writes them: a field of another type (a status
    that is text, usage that is a number) raised from deep in the inspector, and `inspect` printed
    the traceback. Each is now one line naming the file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "journal.json"
        path.write_text(json.dumps({"data": [{"id": 1, "seq": 1, "at": 1.0, **entry}, {"id": 2, "seq": 2, **entry}]}))
        with pytest.raises(TraceError) as refused:
            load_trace(path)
    [line] = str(refused.value).splitlines()
    assert line.startswith(f"{path}: not a ptc-emulator journal ("), line
