"""A second continuation of a paused program, sent after the first one finished (a fork, not a
race), is refused with a message that says so. Before, it said the other request continued the
program "while this one was running", which no request did: the first had finished before this
one was sent."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.unit.fake_runner import FakeProgram, FakeRunner

CODE = "text(String(await tools.add({a: 5, b: 6})))"
ADD = FakeProgram(batches=[[("add", {"a": 5, "b": 6})]], finish=lambda out: out[-1])
TOOLS = [
    {"type": "function", "name": "add", "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]


@pytest.fixture(autouse=True)
def _programs(fake_runner: FakeRunner) -> None:
    fake_runner.define(CODE, ADD)


def _continue(unit_http: TestClient, paused: dict[str, Any], output: str, **more: Any) -> Any:
    call = paused["output"][-1]
    answer = {"type": "function_call_output", "call_id": call["call_id"], "caller": call["caller"], "output": output}
    body = {"model": "m", "tools": TOOLS, "previous_response_id": paused["id"], "input": [answer], **more}
    return unit_http.post("/v1/responses", json=body)


DEFAULTS = {
    "background": False,
    "store": True,
    "metadata": {},
    "temperature": 1,
    "top_p": 1.0,
    "parallel_tool_calls": True,
    "truncation": "disabled",
}


def test_a_continuation_resent_with_its_defaults_spelt_out_gets_the_kept_answer(unit_http: TestClient) -> None:
    """The same continuation sent again, with the values leaving them out means written in (or
    the reverse): the same request, answered with the response kept. Before, the 400 of a fork."""
    paused = unit_http.post("/v1/responses", json={"model": "m", "tools": TOOLS, "input": f"```js\n{CODE}\n```"}).json()
    first = _continue(unit_http, paused, "11")
    assert first.status_code == 200, first.text[:300]
    again = _continue(unit_http, paused, "11", **DEFAULTS)
    assert again.status_code == 200, again.text[:300]
    assert again.json() == first.json()
    other = unit_http.post("/v1/responses", json={"model": "m", "tools": TOOLS, "input": f"```js\n{CODE}\n```"}).json()
    spelt = _continue(unit_http, other, "11", **DEFAULTS)
    assert spelt.status_code == 200, spelt.text[:300]
    assert _continue(unit_http, other, "11").json() == spelt.json()
    hotter = _continue(unit_http, other, "11", temperature=0.5)
    assert hotter.status_code == 400, "another value is another request"
    assert hotter.json()["error"]["code"] == "previous_response_continued"


def test_a_later_fork_of_a_paused_program_is_told_it_came_second(unit_http: TestClient) -> None:
    paused = unit_http.post("/v1/responses", json={"model": "m", "tools": TOOLS, "input": f"```js\n{CODE}\n```"}).json()
    assert [i["type"] for i in paused["output"]] == ["program", "function_call"]
    assert _continue(unit_http, paused, "11").status_code == 200
    reply = _continue(unit_http, paused, "12")
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "previous_response_continued" and error["param"] == "previous_response_id"
    assert error["message"] == (
        f"Another request continued the program paused in response '{paused['id']}' first: a paused program "
        "is continued once, and only the first continuation is kept. Continue from the response that was kept."
    )
