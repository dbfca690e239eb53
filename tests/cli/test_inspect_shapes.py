"""`ptc-emulator inspect FILE` refuses, in one line naming the file and exit status 2, a trace whose
entries have other shapes than the server writes and the page reads (`serve.shape_problem`): such
a trace was served, and the page then failed in the browser ("Could not read the journal")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.api.inspector.serve import load_trace, shape_problem
from ptc_emulator.api.inspector.trace import trace_html
from tests.cli.test_cli import run

ENTRY: dict[str, Any] = {
    "seq": 1,
    "at": 1.0,
    "scope": None,
    "method": "POST",
    "path": "/v1/responses",
    "status": 200,
    "request": {"model": "gpt-test", "input": "hi"},
    "response": {
        "id": "resp_1",
        "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": []}],
    },
    "route": ["scenario"],
    "contract": [],
}

# The four the page failed on: `entry.contract.map`, `entry.route.join` and `type.endsWith` were
# not functions; an `.html` trace's conversations were passed to the page unread.
MALFORMED = {
    "contract-text.json": ({**ENTRY, "contract": "x"}, "'contract' is not a list of objects"),
    "route-text.json": ({**ENTRY, "route": "scenario"}, "'route' is not a list of strings"),
    "output-items.json": (
        {**ENTRY, "response": {"output": [5, {"type": "program", "code": 5}]}},
        "the response's output item 0 is not an object",
    ),
    "output-code.json": (
        {**ENTRY, "response": {"output": [{"type": "program", "code": 5}]}},
        "the response's output item 0 has a 'code' that is not a string",
    ),
    "output-type.json": (
        {**ENTRY, "response": {"output": [{"type": 5}]}},
        "the response's output item 0 has no 'type' string",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_an_entry_the_page_cannot_read_is_one_line_and_status_2(tmp_path: Path, name: str) -> None:
    entry, problem = MALFORMED[name]
    path = tmp_path / name
    path.write_text(json.dumps({"object": "emulator.trace", "test": "t", "journal": [entry]}))
    done = run("inspect", str(path), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"ptc-emulator: {path}: not a ptc-emulator journal (entry 0 (seq 1): {problem})"


def test_an_html_trace_whose_conversations_are_not_objects_is_one_line_and_status_2(tmp_path: Path) -> None:
    path = tmp_path / "trace.html"
    data = json.dumps({"title": "t", "conversations": [5, "x", None]})
    path.write_text(f'<script type="application/json" id="ptc-trace">{data}</script>')
    done = run("inspect", str(path), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"ptc-emulator: {path}: not a ptc-emulator trace (conversation 0 is not an object with a list of entries)"
    )


def test_an_html_traces_entries_are_checked_as_a_journals_are(tmp_path: Path) -> None:
    """Only the entries of an `.html` trace are read: its summaries are made again from them."""
    path = tmp_path / "trace.html"
    data = json.dumps({"title": "t", "conversations": [{"summary": 7, "entries": [{**ENTRY, "route": 5}]}]})
    path.write_text(f'<script type="application/json" id="ptc-trace">{data}</script>')
    done = run("inspect", str(path), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"ptc-emulator: {path}: not a ptc-emulator journal (entry 0 (seq 1): 'route' is not a list of strings)"
    )


def test_what_the_server_writes_has_the_shapes_and_an_html_trace_is_served_as_written(tmp_path: Path) -> None:
    entries = [
        ENTRY,
        {**ENTRY, "seq": 2, "request": {"input": [5, {"type": 5}]}, "status": 400, "response": {"error": {}}},
        {**ENTRY, "seq": 3, "near_miss": {"near_misses": [{"scenario": "s"}]}, "figures": {"latency_ms": 1}},
    ]
    assert [shape_problem(e) for e in entries] == [None, None, None]  # a client's input is anything it sent
    page = trace_html(entries, title="t")
    path = tmp_path / "trace.html"
    path.write_text(page, encoding="utf-8")
    assert load_trace(path) == page.encode("utf-8")
