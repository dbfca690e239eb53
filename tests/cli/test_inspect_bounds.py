"""`ptc-emulator inspect FILE` reads no more than a trace the server wrote can hold: as many journal
entries as its journal keeps, a file no larger than those entries make; and says what it refuses
in one line naming the file."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.inspector import UI_PATH, serve
from ptc_emulator.api.inspector.serve import (
    MAX_TRACE_BYTES,
    MAX_TRACE_ENTRIES,
    MAX_TRACE_VALUES,
    TraceError,
    TraceServer,
    load_trace,
)
from ptc_emulator.emulator.journal.entries import Journal
from tests.cli.test_cli import run


def _entries(count: int) -> str:
    return ",".join(['{"status": 200}'] * count)


def test_the_entry_bound_is_what_the_servers_journal_keeps() -> None:
    assert MAX_TRACE_ENTRIES == Journal().limit == 10_000
    assert MAX_TRACE_BYTES == 2 * Journal().max_bytes


def test_a_journal_of_more_entries_than_the_server_keeps_is_one_line_before_the_rest_is_read(tmp_path: Path) -> None:
    """A list of 87,000 `{}` entries (256 KiB) took 16 s and 485 MB before it was served, and 4 MiB
    of them was not served after 100 s: each entry costs the page a conversation. A file with more
    entries than the server's journal holds is now refused at the first entry past the bound: what
    follows it (here, text that is not JSON at all) is never parsed, and no page is made."""
    past = _entries(MAX_TRACE_ENTRIES + 1)
    files = {
        "list.json": "[" + past + ", this is never read",
        "body.json": '{"object": "list", "data": [' + past + ", this is never read",
        "trace.json": '{"object": "emulator.trace", "test": "t", "journal": [\n' + past + ", this is never read",
        "trace.html": '<script type="application/json" id="ptc-trace">{"conversations": ['
        + ",".join(['{"entries": []}'] * (MAX_TRACE_ENTRIES + 1))
        + ", never read</script>",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        done = run("inspect", str(path), timeout=120)
        assert done.returncode == 2, (name, done.stderr)
        what = "conversations" if name.endswith(".html") else "journal entries"
        assert done.stderr.strip() == (
            f"ptc-emulator: {path}: more than {MAX_TRACE_ENTRIES} {what}, more than the server's journal "
            "holds: not a trace (refused there, the rest unread)"
        ), done.stderr


def test_the_refusal_comes_before_any_page_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []

    def page(entries: list[object], **_: object) -> str:
        made.append(len(entries))
        return ""

    monkeypatch.setattr(serve, "trace_html", page)
    path = tmp_path / "journal.json"
    path.write_text("[" + _entries(MAX_TRACE_ENTRIES + 1) + "]")
    with pytest.raises(TraceError, match="more than 10000 journal entries"):
        load_trace(path)
    assert made == []
    path.write_text("[" + _entries(MAX_TRACE_ENTRIES) + "]")  # a full journal is a trace
    load_trace(path)
    assert made == [MAX_TRACE_ENTRIES]


def test_the_counting_parser_reads_what_json_reads(tmp_path: Path) -> None:
    cases = {
        "spaced.json": ' \n{ "data" : [ {"status": 200} , {"status": 201} ] , "data2": [1] }\n',
        "twice.json": '{"journal": [{"status": 500}], "journal": [{"status": 200}]}',
        "empty.json": "[ ]",
        "empty-object.json": '{"journal": []}',
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        assert serve._counted(path, text, ("journal", "data")) == json.loads(text), name
    refused = {
        "trailing.json": "[] []",
        "no-comma.json": '[{"status": 200} {"status": 200}]',
        "no-colon.json": '{"data" [1]}',
        "bare-key.json": "{data: []}",
    }
    for name, text in refused.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(TraceError, match=r"not JSON \("):
            load_trace(path)


def test_a_file_past_the_byte_bound_is_refused_unread(tmp_path: Path) -> None:
    """The bound was 256 MiB, four times the journal's bytes; it is now what the journal's 64 MiB
    of bodies make in a trace's indented JSON (twice that)."""
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(MAX_TRACE_BYTES + 1)  # sparse: nothing written, nothing read
    done = run("inspect", str(path), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"ptc-emulator: {path}: larger than {MAX_TRACE_BYTES} bytes ({MAX_TRACE_BYTES + 1} bytes): not a trace"
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="no /proc/self/pagemap here")
def test_a_file_whose_size_says_nothing_is_read_to_one_byte_past_the_bound() -> None:
    """`/proc/self/pagemap` says its size is 0: it was read for 256 MiB, then called "not JSON"."""
    done = run("inspect", "/proc/self/pagemap", timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"ptc-emulator: /proc/self/pagemap: larger than {MAX_TRACE_BYTES} bytes: not a trace"


def test_a_directory_is_said_as_validate_says_it(tmp_path: Path) -> None:
    """It was `cannot read it ([Errno 21] Is a directory: 3)`: the 3 a descriptor's number."""
    done = run("inspect", str(tmp_path), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"ptc-emulator: {tmp_path}: a directory, not a trace"


def test_a_file_that_cannot_be_opened_names_the_reason_only(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    done = run("inspect", str(missing), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"ptc-emulator: {missing}: cannot read it (No such file or directory)"


def test_the_served_page_may_be_framed_by_no_page(tmp_path: Path) -> None:
    """The server's own trace page says `frame-ancestors 'none'`; the one `inspect` served did not."""
    path = tmp_path / "journal.json"
    path.write_text('[{"seq": 1, "status": 200}]')
    server = TraceServer(load_trace(path)).start()
    try:
        page = httpx.get(server.url, timeout=30)
    finally:
        server.stop()
    assert page.status_code == 200
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_a_file_of_more_values_than_the_bound_is_refused_in_one_line_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 MiB of `{"journal": [{"seq": 1, "request": {"input": [[], [], ...]}}]}` (5.6 million lists,
    under the byte bound) took 606 MB and 13 s before it was served. The values and keys are now
    counted before anything is parsed: past `MAX_TRACE_VALUES` the file is one line, exit status 2."""
    lists = MAX_TRACE_VALUES // 2 + 1  # each `[],` is an opening bracket and a comma
    path = tmp_path / "tiny.json"
    path.write_text('{"journal": [{"seq": 1, "request": {"input": [' + ",".join(["[]"] * lists) + "]}}]}")
    done = run("inspect", str(path), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"ptc-emulator: {path}: more than {MAX_TRACE_VALUES} JSON values and keys, more than inspect reads: "
        "not a trace (refused unparsed)"
    )
    parsed: list[str] = []
    monkeypatch.setattr(serve, "_counted", lambda *args: parsed.append("parsed"))
    with pytest.raises(TraceError, match="JSON values and keys"):
        load_trace(path)
    assert parsed == []


def test_what_strings_hold_is_not_counted_as_values(tmp_path: Path) -> None:
    """The count is of `[`, `{`, `,` and `:` outside strings: a message full of commas is one value."""
    path = tmp_path / "commas.json"
    text = ",:[{" * (MAX_TRACE_VALUES // 2) + '\\"'
    path.write_text(json.dumps({"journal": [{"seq": 1, "status": 200, "request": {"input": text}}]}))
    assert b'id="ptc-trace"' in load_trace(path)


def test_other_methods_and_malformed_requests_are_refused_with_the_same_headers(tmp_path: Path) -> None:
    """They were the standard library's HTML error page (501, 400), without the policy and nosniff
    headers every other answer of this server carries."""
    path = tmp_path / "journal.json"
    path.write_text('[{"seq": 1, "status": 200}]')
    server = TraceServer(load_trace(path)).start()
    try:
        answers = [httpx.request(method, server.url, timeout=30) for method in ("POST", "PUT", "HEAD", "OPTIONS")]
        raws = []
        for line in (b"GARBAGE\r\n\r\n", b"GET / HTTP/x.y\r\n\r\n", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
                sock.sendall(line)
                raw = b""
                while chunk := sock.recv(65536):
                    raw += chunk
            raws.append(raw)
    finally:
        server.stop()
    for answer in answers:
        assert answer.status_code == 501, answer
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answers[0].text == f"501 Not Implemented: this server serves one trace, at {UI_PATH}, to GET requests.\n"
    assert answers[2].text == ""  # (HEAD)
    for raw, code in zip(raws, (b"400", b"400", b"414"), strict=True):
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 " + code + b" "), head
        assert b"X-Content-Type-Options: nosniff" in head and b"Content-Security-Policy: " in head
        assert b"Content-Type: text/plain; charset=utf-8" in head
        assert body.startswith(code + b" "), body
