"""The inspector does not mislead: a program that threw is a failed run everywhere (pill, list,
"errors only", the failing line marked, the error first); an output a 400 refused is shown as
refused; a store:false replay's repeated history is shown once; `/` leads to the page and
`/docs` needs nothing from another site."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from ptc_emulator.testing.server import PTCEmulator
from tests.inspector.inspector_support import browser, run_seed_loop, visible_text, wait_for_text, wait_until
from tests.inspector.test_api import inspector

__all__ = ["browser"]  # the fixture, imported for this module

ECHO: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "echo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "allowed_callers": ["programmatic"],
    },
    {"type": "programmatic_tool_calling"},
]
THROWS = "const said = await tools.echo({ text: 'x' });\nthrow new Error('the disk is full');"
QUESTION = f"Run this program.\n```js\n{THROWS}\n```"


def by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def root(emulator: PTCEmulator) -> str:
    return emulator.base_url[: -len("/v1")]


def post(emulator: PTCEmulator, body: dict[str, Any]) -> httpx.Response:
    headers = {"x-ptc-emulator-scope": emulator.scope}
    return httpx.post(f"{emulator.base_url}/responses", json=body, headers=headers, timeout=60)


def paused(emulator: PTCEmulator) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The program's first response (store:false) and the replay that answers its call."""
    first = post(emulator, {"model": "m", "input": QUESTION, "tools": ECHO, "store": False})
    assert first.status_code == 200, first.text
    output = first.json()["output"]
    answers = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": '"x"', "caller": c["caller"]}
        for c in output
        if c["type"] == "function_call"
    ]
    return [{"role": "user", "content": QUESTION}, *output], answers


def throw(emulator: PTCEmulator) -> None:
    history, answers = paused(emulator)
    second = post(emulator, {"model": "m", "input": history + answers, "tools": ECHO, "store": False})
    assert second.status_code == 200 and second.json()["status"] == "completed", second.text
    [result] = [i for i in second.json()["output"] if i["type"] == "program_output"]
    assert result["status"] == "incomplete" and "the disk is full" in result["result"]


def test_a_program_that_threw_is_a_failed_conversation(ptc_emulator: PTCEmulator) -> None:
    throw(ptc_emulator)
    run_seed_loop(ptc_emulator)  # a run that went well, beside it
    rows = inspector(ptc_emulator, "conversations")["data"]
    assert [r["state"] for r in rows] == ["completed", "failed"]
    failed = rows[1]
    assert failed["statuses"] == [200, 200] and failed["errors"] is True
    assert "ended incomplete" in failed["error"] and "Error: the disk is full (line 2)" in failed["error"]
    assert rows[0]["error"] is None
    assert inspector(ptc_emulator, "conversations", errors="1")["data"] == [failed]
    assert inspector(ptc_emulator, "conversations", status="failed")["data"] == [failed]
    [program] = inspector(ptc_emulator, f"conversations/{failed['id']}")["programs"]
    assert program["failure"]["line"] == 2 and program["failure"]["status"] == "incomplete"


def test_a_later_program_that_completed_supersedes_the_failure(ptc_emulator: PTCEmulator) -> None:
    history, answers = paused(ptc_emulator)
    second = post(ptc_emulator, {"model": "m", "input": history + answers, "tools": ECHO, "store": False})
    again = {"role": "user", "content": "Run this program.\n```js\ntext('fine now');\n```"}
    replay = history + answers + second.json()["output"] + [again]
    third = post(ptc_emulator, {"model": "m", "input": replay, "tools": ECHO, "store": False})
    assert third.status_code == 200 and third.json()["output"][-1]["content"][0]["text"] == "fine now", third.text
    [row] = inspector(ptc_emulator, "conversations")["data"]
    assert row["requests"] == 3 and row["state"] == "completed" and row["error"] is None
    assert row["errors"] is True  # the first program's failure is still there to find
    programs = inspector(ptc_emulator, f"conversations/{row['id']}")["programs"]
    assert [p["failure"] is not None for p in programs] == [True, False]


def test_an_output_a_400_refused_is_shown_as_refused(ptc_emulator: PTCEmulator) -> None:
    history, answers = paused(ptc_emulator)
    # The tools changed while the program was paused: the request, and the outputs in it, are refused.
    refused = post(ptc_emulator, {"model": "m", "input": history + answers, "tools": ECHO[1:], "store": False})
    assert refused.status_code == 400, refused.text
    [row] = inspector(ptc_emulator, "conversations")["data"]
    assert row["state"] == "failed" and row["error"].startswith(f"Request #{row['seqs'][-1]} was refused: 400")
    [call] = inspector(ptc_emulator, f"conversations/{row['id']}")["calls"]
    assert call["output"]["refused"] is True and call["output"]["seq"] == row["seqs"][-1]
    assert "tools a program may call changed" in call["output"]["error"]
    # Sent again with the tools it started with, the output is taken and shown as such.
    taken = post(ptc_emulator, {"model": "m", "input": history + answers, "tools": ECHO, "store": False})
    assert taken.status_code == 200, taken.text
    [row] = inspector(ptc_emulator, "conversations")["data"]
    [call] = inspector(ptc_emulator, f"conversations/{row['id']}")["calls"]
    assert "refused" not in call["output"] and call["output"]["seq"] == row["seqs"][-1]


def test_the_failed_program_as_a_person_sees_it(ptc_emulator: PTCEmulator, browser: Any) -> None:
    throw(ptc_emulator)
    browser.get(ptc_emulator.inspector_url)
    wait_for_text(browser, "WHAT FAILED", "the disk is full")
    head = browser.find_element(by("CSS_SELECTOR"), ".conv-head .badge").text
    assert head == "failed"
    assert browser.find_element(by("CSS_SELECTOR"), "#conversations li .badge").text == "failed"
    # The error comes first, before the figures and the program.
    top = browser.find_element(by("CSS_SELECTOR"), "#view > section.panel")
    assert top.get_attribute("id") == "error" and "Error: the disk is full (line 2)" in top.text
    marked = browser.find_elements(by("CSS_SELECTOR"), ".program pre.code .line.failing")
    assert [line.text for line in marked] == ["throw new Error('the disk is full');"]
    assert "Ended incomplete at line 2" in browser.find_element(by("CSS_SELECTOR"), ".program").text
    # The message that answers the failure is painted as failed, not as a success.
    final = browser.find_element(by("ID"), "final")
    assert "The program did not complete" in final.text and "AFTER THE FAILURE" in final.text.upper()
    assert final.find_element(by("CSS_SELECTOR"), ".final").get_attribute("class").split() == ["final", "failed"]
    colour = final.find_element(by("CSS_SELECTOR"), ".final").value_of_css_property("border-left-color")
    assert colour == "rgba(179, 38, 30, 1)", colour  # --bad, never --ok's green
    # One program, paused once and resumed: one program, two steps.
    numbers = {
        f.find_element(by("CSS_SELECTOR"), ".k").text: f.find_element(by("CSS_SELECTOR"), ".n").text
        for f in browser.find_elements(by("CSS_SELECTOR"), "#figures .figure")
    }
    assert numbers["programs"] == "1" and numbers["program steps (starts and resumes)"] == "2", numbers
    # "errors only" keeps it.
    browser.find_element(by("ID"), "f-errors").click()
    wait_until(lambda: "1 conversation" in visible_text(browser), "the filtered list")
    assert browser.find_element(by("CSS_SELECTOR"), "#conversations li .badge").text == "failed"
    browser.find_element(by("ID"), "f-errors").click()  # the filter is the page's state: leave it as found
    browser.get("about:blank")


def test_a_refused_output_in_the_page(ptc_emulator: PTCEmulator, browser: Any) -> None:
    history, answers = paused(ptc_emulator)
    refused = post(ptc_emulator, {"model": "m", "input": history + answers, "tools": [], "store": False})
    assert refused.status_code == 400
    browser.get(ptc_emulator.inspector_url)
    wait_for_text(browser, "refused: request #")
    row = browser.find_element(by("CSS_SELECTOR"), ".program tr.call").text
    assert "refused: request #" in row and "came back in request" not in row


def test_a_store_false_replay_shows_the_user_message_once(ptc_emulator: PTCEmulator, browser: Any) -> None:
    run_seed_loop(ptc_emulator)
    browser.get(ptc_emulator.inspector_url)
    wait_for_text(browser, "TIMELINE", "get_demand")
    timeline = browser.find_element(by("CSS_SELECTOR"), ".timeline").text
    assert timeline.count("Compare inventory with demand for sku_123.") == 1
    sent = browser.find_elements(by("CSS_SELECTOR"), ".timeline li.entry")[1].text
    assert "FUNCTION_CALL_OUTPUT" in sent.upper()  # what the replay added is still shown


def test_the_root_leads_to_the_inspector_and_docs_need_no_cdn(ptc_emulator: PTCEmulator) -> None:
    with httpx.Client(base_url=root(ptc_emulator), timeout=30) as http:
        home = http.get("/")
        assert home.status_code == 307 and home.headers["location"] == "/_emulator/ui/"
        assert http.get("/", follow_redirects=True).headers["content-type"].startswith("text/html")
        # Swagger UI would load its scripts from a CDN: it is off, the schema stays.
        assert http.get("/docs").status_code == 404 and http.get("/redoc").status_code == 404
        assert "/v1/responses" in json.dumps(http.get("/openapi.json").json()["paths"])


def test_the_root_redirect_needs_no_key(tmp_path: Path) -> None:
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    server = EmulatorServer(Settings(data_dir=tmp_path, store="memory", pool_size=1, api_key="sk-root")).start()
    try:
        reply = httpx.get(f"http://127.0.0.1:{server.port}/", timeout=30)
        assert reply.status_code == 307 and reply.headers["location"] == "/_emulator/ui/"
        denied = httpx.get(f"http://127.0.0.1:{server.port}/_emulator/inspector/conversations", timeout=30)
        assert denied.status_code == 401
    finally:
        server.stop()


def test_a_saved_traces_request_items_of_any_shape_are_shown(browser: Any, tmp_path: Path) -> None:
    """A request's items are the client's, and `inspect` serves a trace file whose requests hold
    anything: an item whose type is not text (or a reasoning item whose summary is) made the page
    fail (`type.endsWith is not a function`) for the whole conversation. It is now shown as its JSON."""
    from ptc_emulator.api.inspector.trace import trace_html

    items = [{"type": 5, "role": "user", "content": "typed 5"}, {"type": "reasoning", "summary": "a text"}, 7]
    entry = {"seq": 1, "at": 1.0, "method": "POST", "path": "/v1/responses", "status": 400, "request": {"input": items}}
    page = tmp_path / "trace.html"
    page.write_text(trace_html([entry], title="t"), encoding="utf-8")
    browser.get(page.as_uri())
    seen = wait_for_text(browser, "TIMELINE", '"type": 5')
    assert "Could not read" not in seen
