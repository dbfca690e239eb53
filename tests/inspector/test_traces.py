"""Trace artifacts: a failed test leaves a self-contained HTML trace (the inspector's view of its
conversations) and its JSON journal, their paths in the failure report; the HTML opens in
headless Chromium with no server running and shows the program, its calls and the error."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.inspector.inspector_support import browser, png_colours, visible_text, wait_for_text
from tests.plugin.plugin_support import run

__all__ = ["browser"]  # the fixture, imported for this module

AGENT = """
import httpx

ECHO = [
    {"type": "function", "name": "echo", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
     "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]
CODE = "const said = await tools.echo({ text: 'ping' });\\nthrow new Error('the disk is full');"
QUESTION = "Run this program.\\n```js\\n" + CODE + "\\n```"


def test_agent_fails(ptc_emulator):
    print("SERVER", ptc_emulator.base_url)
    client = ptc_emulator.client(max_retries=0)
    first = client.responses.create(model="m", input=QUESTION, tools=ECHO, store=False)
    [call] = [item for item in first.output if item.type == "function_call"]
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": '"pong"',
              "caller": call.caller.model_dump()}
    history = [{"role": "user", "content": QUESTION}] + [i.model_dump(exclude_none=True) for i in first.output]
    second = client.responses.create(model="m", input=history + [answer], tools=ECHO, store=False)
    assert second.output_text == "all good", "the agent's answer"


def test_passes(ptc_emulator):
    assert ptc_emulator.journal == []
"""


def paths(output: str) -> tuple[Path, Path]:
    [html] = re.findall(r"^trace: (\S+\.html)$", output, re.M)
    [data] = re.findall(r"^journal: (\S+\.json)$", output, re.M)
    return Path(html), Path(data)


def test_a_failed_test_leaves_a_trace_that_opens_with_no_server(
    pytester: pytest.Pytester, browser: Any, tmp_path: Path
) -> None:
    pytester.makepyfile(test_agent=AGENT)
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    result.stdout.fnmatch_lines(["*- ptc-emulator trace -*", "trace: *.html", "journal: *.json"])
    html, data = paths(output)
    assert html.parent == pytester.path / ".ptc-emulator" / "traces"  # the default, under the rootdir
    assert html.name.startswith("test_agent.py_test_agent_fails-")
    assert sorted(p.name for p in html.parent.iterdir()) == sorted([html.name, data.name])  # none for the pass
    record = json.loads(data.read_text(encoding="utf-8"))
    assert record["test"] == "test_agent.py::test_agent_fails" and len(record["journal"]) == 2

    # The session's server is gone: the trace needs none.
    [port] = re.findall(r"^SERVER http://127\.0\.0\.1:(\d+)/\S*v1$", output, re.M)  # the scoped URL
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close()

    browser.get(html.as_uri())
    seen = wait_for_text(browser, "the disk is full", "echo", "saved trace")
    assert "const said = await tools.echo({ text: 'ping' });" in seen  # the program
    calls = browser.find_elements("css selector", ".program tr.call")
    assert [row.find_element("tag name", "strong").text for row in calls] == ["echo"]  # its calls
    assert '"text": "ping"' in calls[0].text and '"pong"' in calls[0].text
    error = browser.find_element("id", "error").text  # the error, first
    assert "Error: the disk is full (line 2)" in error
    marked = browser.find_elements("css selector", ".program .line.failing")
    assert [line.text for line in marked] == ["throw new Error('the disk is full');"]
    assert browser.find_element("css selector", ".conv-head .badge").text == "failed"
    assert "test_agent.py::test_agent_fails" in browser.title
    shot = browser.get_screenshot_as_png()
    (tmp_path / "trace.png").write_bytes(shot)
    assert len(png_colours(shot)) > 20  # a rendered, styled page, not a blank one
    assert visible_text(browser).count("Run this program.") >= 1


@pytest.mark.timeout(360)  # 3 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_where_traces_go_is_configurable(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_agent=AGENT)
    pytester.makeini("[pytest]\nptc_emulator_traces_dir = build/traces\n")
    result = run(pytester, "-p", "no:randomly", "-k", "fails")
    html, data = paths(result.stdout.str())
    assert html.parent == pytester.path / "build" / "traces" and data.is_file()

    result = run(pytester, "-p", "no:randomly", "-k", "fails", f"--ptc-emulator-traces={pytester.path / 'elsewhere'}")
    html, _ = paths(result.stdout.str())
    assert html.parent == pytester.path / "elsewhere" and html.is_file()

    result = run(pytester, "-p", "no:randomly", "-k", "fails", "--ptc-emulator-traces=off")
    result.assert_outcomes(failed=1, deselected=1)
    assert "ptc-emulator trace" not in result.stdout.str()
    assert not (pytester.path / ".ptc-emulator").exists()


def test_nothing_in_the_journal_becomes_markup_in_a_trace() -> None:
    from ptc_emulator.api.inspector.trace import trace_html

    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    entry = {
        "seq": 1,
        "at": 1.0,
        "scope": "s",
        "method": "POST",
        "path": "/v1/responses",
        "status": 200,
        "request": {"model": "m", "input": hostile},
        "response": {"status": "completed", "output": [{"type": "message", "content": [{"text": hostile}]}]},
    }
    page = trace_html([entry], title=hostile)
    assert "alert(1)" in page and "<script>alert" not in page and "</script><script>alert" not in page
    data = page.split('<script type="application/json" id="ptc-trace">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data
    parsed = json.loads(data)
    assert parsed["title"] == hostile and parsed["conversations"][0]["summary"]["final"] == hostile
    # Only the page's own scripts run: the policy names them by hash and allows no connection.
    policy = page.split('http-equiv="Content-Security-Policy" content="', 1)[1].split('"', 1)[0]
    assert "'unsafe-inline'" not in policy and "connect-src 'none'" in policy and policy.count("'sha256-") == 3


def test_the_server_serves_a_scopes_trace_as_the_plugin_writes_it(ptc_emulator: PTCEmulator, tmp_path: Path) -> None:
    """`GET /_emulator/inspector/trace.{json,html}` is the text of the files the plugin writes (the
    JS helper writes its traces from them), of the caller's scope alone."""
    from ptc_emulator.names import SCOPE_HEADER
    from ptc_emulator.testing.traces import write_trace

    ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "hi \u2028 <b>"}]})
    ptc_emulator.client(max_retries=0).responses.create(model="m", input="hello")
    test_id = "test/agent.test.js::the agent > answers"
    html, data = write_trace(tmp_path, test_id, ptc_emulator)
    root, key = ptc_emulator.server_url[: -len("/v1")], {"Authorization": f"Bearer {ptc_emulator.api_key}"}
    own = f"{root}/scopes/{ptc_emulator.scope}/_emulator/inspector"
    with httpx.Client(headers=key, timeout=30) as http:
        served = http.get(f"{own}/trace.json", params={"test": test_id})
        assert served.status_code == 200 and served.headers["content-type"] == "application/json"
        assert served.text == data.read_text(encoding="utf-8")
        page = http.get(f"{own}/trace.html", params={"test": test_id})
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.text == html.read_text(encoding="utf-8")
        assert "connect-src 'none'" in page.headers["content-security-policy"]

        other = ptc_emulator.scope + "-other"
        for reply in (
            http.get(f"{root}/scopes/{other}/_emulator/inspector/trace.json"),
            # naming this scope as a filter does not take a caller out of its own
            http.get(
                f"{root}/_emulator/inspector/trace.json?scope={ptc_emulator.scope}", headers={SCOPE_HEADER: other}
            ),
        ):
            assert reply.status_code == 200 and reply.json() == {
                "object": "emulator.trace",
                "test": "",
                "scope": other,
                "journal": [],
            }
        assert "hi \u2028" not in http.get(f"{root}/scopes/{other}/_emulator/inspector/trace.html").text
