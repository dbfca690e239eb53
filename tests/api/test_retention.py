"""Zero data retention: `store: false` traffic leaves nothing behind.

A served subprocess (SQLite store, info-level logs captured) gets `store: false` traffic whose
program code, user text, tool outputs, program output and error messages carry recognisable
marker strings: replayed multi-pause programs, a streamed one, failing and crashing ones, a
rejected tampered replay and a token count. Afterwards the database has no rows, the data
directory holds only the secret and the database files, no file there and nothing in the
server's log output (uvicorn's and the app's, stdout and stderr) contains a marker, and the
server wrote nothing to its temporary directory.

The in-memory request journal (`/_emulator/journal`) does keep request and response bodies, on
purpose: it is what tests assert on, it lives only in the server's memory, never on disk, and
it goes with `POST /_emulator/reset` or the process. It is checked here for exactly that.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.api.api_support import PTC_TOOLS, ProgramRun, assert_envelope, drive, program_message


@pytest.mark.timeout(120)
def test_store_false_traffic_leaves_no_trace(server_process: Callable[..., ServerProcess], tmp_path: Path) -> None:
    tag = secrets.token_hex(6)
    markers = {
        "code": f"CODE-MARKER-{tag}",
        "input": f"INPUT-MARKER-{tag}",
        "tool": f"TOOL-MARKER-{tag}",
        "output": f"OUTPUT-MARKER-{tag}",
        "error": f"ERROR-MARKER-{tag}",
        "crash": f"CRASH-MARKER-{tag}",
        "tampered": f"TAMPERED-MARKER-{tag}",
        "stream": f"STREAM-MARKER-{tag}",
        "count": f"COUNT-MARKER-{tag}",
    }
    data_dir = tmp_path / "data"
    temp_dir = tmp_path / "server-tmp"
    temp_dir.mkdir()
    server = server_process(
        data_dir,
        secret=None,  # the server makes and keeps its own: the one file it may leave
        args=("--timeout", "1.5"),
        env={"TMPDIR": str(temp_dir)},
    )
    server.start()

    def answer(name: str, arguments: dict[str, object]) -> str:
        return json.dumps({"value": f"{markers['tool']} {arguments}"})

    pausing = (
        f"// {markers['code']}\n"
        "const seen = [];\n"
        "for (let i = 0; i < 3; i++) {\n"
        f"  const r = await tools.echo({{text: '{markers['code']}-' + i}});\n"
        "  seen.push(r.value.length);\n"
        "}\n"
        f"text('{markers['output']} ' + seen.join(','));"
    )
    failing = f"await tools.echo({{text: 'x'}});\nthrow new Error('{markers['error']}');"
    crashing = f"// {markers['crash']}\n'x'.repeat(2**28).split('');"  # aborts V8 within a second
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60) as client:
        run = drive(client, ProgramRun(pausing, store=False, answer=answer))
        assert run.program_output.status == "completed"
        assert run.text.startswith(markers["output"])
        assert drive(client, ProgramRun(failing, store=False, answer=answer)).program_output.status == "incomplete"

        # A replay whose program was tampered with is refused; the refusal must not echo it.
        tampered = ProgramRun(pausing, store=False, answer=answer)
        request = tampered.next(client.responses.create(**tampered.first()))
        assert request is not None
        program = next(item for item in request["input"] if item["type"] == "program")
        program["code"] += f"\n// {markers['tampered']}"
        assert_envelope(httpx.post(f"{server.base_url}/responses", json=request, timeout=30), 400)

        with client.responses.stream(
            model="m",
            input=program_message(f"text('{markers['stream']}')"),
            tools=PTC_TOOLS,
            store=False,
        ) as stream:
            final = stream.get_final_response()
        assert final.output_text == markers["stream"]
        counted = client.responses.input_tokens.count(model="m", input=f"{markers['count']} hello")
        assert counted.input_tokens > 0

        # A user message of its own, and last a program that may take its worker down.
        said = client.responses.create(
            model="m", input=program_message("text('ok')") + f"\n{markers['input']}", tools=PTC_TOOLS, store=False
        )
        assert said.output_text == "ok"
        unmatched = httpx.post(
            f"{server.base_url}/responses", json={"model": "m", "input": markers["input"], "store": False}, timeout=30
        )
        assert_envelope(unmatched, 400, "No scenario matches")
        crashed = drive(client, ProgramRun(crashing, store=False))
        assert crashed.program_output.status == "incomplete"

        journal = httpx.get(f"{server.root}/_emulator/journal", timeout=30)
        assert markers["code"] in journal.text, "the journal keeps bodies in memory, by design"
        httpx.post(f"{server.root}/_emulator/reset", json={}, timeout=30).raise_for_status()
        assert markers["code"] not in httpx.get(f"{server.root}/_emulator/journal", timeout=30).text

    assert server.health()["stored_responses"] == 0
    server.stop()

    files = sorted(p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*"))
    allowed = {
        "secret",
        "responses.sqlite3",
        "responses.sqlite3-wal",
        "responses.sqlite3-shm",
        "responses.sqlite3.lock",
    }
    assert set(files) <= allowed, files
    assert "secret" in files and "responses.sqlite3" in files
    with sqlite3.connect(data_dir / "responses.sqlite3") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables, "the database has no tables: this test is not looking at the server's file"
        for table in tables:
            # `scenarios_version` is one counter row from the start (no request's data in it)
            kept = 1 if table == "scenarios_version" else 0
            assert db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone() == (kept,), table
    db.close()
    for name in files:
        content = (data_dir / name).read_bytes()
        for what, marker in markers.items():
            assert marker.encode() not in content, f"{what} marker in {name}"
    assert list(temp_dir.iterdir()) == []

    log = server.log()
    assert "POST /v1/responses HTTP/1.1" in log, "uvicorn's access log is not captured: " + log[-500:]
    assert "INFO" in log
    assert "ptc-emulator: serving on" in log, "the app's own stderr is not captured: " + log[:500]
    for what, marker in markers.items():
        assert marker not in log, f"the {what} marker is in the server's log output"
