"""Two continuations of one thing in flight at once (an SDK retry after a client timeout sends
exactly that): one wins, the other is refused, and nothing is kept twice.

- Of one conversation: the first to finish appends its items; the other gets the hosted API's
  `conversation_locked` 400 and appends nothing, so the conversation holds each item once and
  the next request on it works.
- Of one paused program by `previous_response_id` (`store: true`): the first stored is kept; the
  other gets a 400 and is not stored. A paused program has one continuation: the same request
  sent after it finished (a client resending what a broken connection cut off) is answered with
  it; another continuation of it is the same 400.

The store decides (a check-and-append; a primary key of the paused response's continuation), so
the tests run on both stores. The app runs in this process; the engine's model is wrapped in a gate that holds
each response once it has read its history, until both are in flight (no sleep, no race)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from tests.support import ADD_TOOL, add_answers, in_process_http, js

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
PROGRAM = js("const x = await tools.add({a: 2, b: 3}); text('x=' + x);")


class Gate:
    """The engine's model, holding every response in `play` (after its history was read and its
    plan made) until `open` is set; `all_in` is set once `expected` responses wait."""

    def __init__(self, model: Any, expected: int) -> None:
        self.model = model
        self.expected = expected
        self.waiting = 0
        self.all_in = asyncio.Event()
        self.open = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def plan(self, *args: Any, **kwargs: Any) -> Any:
        return self.model.plan(*args, **kwargs)

    async def play(self, prepared: Any, runner: Any) -> Any:
        self.waiting += 1
        if self.waiting == self.expected:
            self.all_in.set()
        await self.open.wait()
        return await self.model.play(prepared, runner)


@pytest.fixture(params=["memory", "sqlite"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    settings = Settings(data_dir=tmp_path, store=request.param, bundled_fixtures=False, pool_size=1)
    async with in_process_http(settings) as (client, app):
        yield client, app


async def create(http: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await http.post("/v1/responses", json={"model": "m", "tools": TOOLS, **body})


async def both_at_once(http: httpx.AsyncClient, app: Any, **body: Any) -> list[httpx.Response]:
    """Send the same continuation twice, both held in flight together, then let both finish."""
    engine = app.state.emulator.engine
    gate = Gate(engine.model, expected=2)
    engine.model = gate
    try:
        sent = [asyncio.ensure_future(create(http, **body)) for _ in range(2)]
        await asyncio.wait_for(gate.all_in.wait(), 60)  # (a guard: both arrive long before)
        assert not any(task.done() for task in sent)
        gate.open.set()
        return list(await asyncio.gather(*sent))
    finally:
        engine.model = gate.model


def one_wins(replies: list[httpx.Response], code: str, param: str) -> dict[str, Any]:
    """The winner's response, once the other is checked to be the expected 400."""
    assert sorted(r.status_code for r in replies) == [200, 400], [r.text for r in replies]
    [won] = [r.json() for r in replies if r.status_code == 200]
    [lost] = [r.json()["error"] for r in replies if r.status_code == 400]
    assert (lost["type"], lost["code"], lost["param"]) == ("invalid_request_error", code, param)
    return won


async def test_two_continuations_of_a_conversation_one_appends(app: tuple[httpx.AsyncClient, Any]) -> None:
    http, state = app
    conv = (await http.post("/v1/conversations", json={})).json()["id"]
    paused = await create(http, conversation=conv, input=PROGRAM)
    assert [i["type"] for i in paused.json()["output"]] == ["program", "function_call"]

    replies = await both_at_once(http, state, conversation=conv, input=add_answers(paused.json()["output"]))
    won = one_wins(replies, "conversation_locked", "conversation")
    assert [i["type"] for i in won["output"]] == ["program_output", "message"]
    [lost] = [r.json()["error"]["message"] for r in replies if r.status_code == 400]
    assert lost == "Another process is currently operating on this conversation. Please retry in a few seconds."

    listed = (await http.get(f"/v1/conversations/{conv}/items", params={"order": "asc", "limit": 100})).json()
    ids = [item["id"] for item in listed["data"]]
    assert len(ids) == len(set(ids)), "no item twice"
    kinds = [item["type"] for item in listed["data"]]
    assert kinds == ["message", "program", "function_call", "function_call_output", "program_output", "message"]
    assert {item["id"] for item in won["output"]} <= set(ids)
    assert (await http.get("/_emulator/health")).json()["stored_responses"] == 2, "the refused one is not stored"

    # The conversation goes on: no "Duplicate item" for the next request on it.
    after = await create(http, conversation=conv, input=js("text('next');"))
    assert after.status_code == 200, after.text


async def test_two_continuations_of_a_paused_program_one_wins(app: tuple[httpx.AsyncClient, Any]) -> None:
    http, state = app
    paused = (await create(http, input=PROGRAM)).json()
    assert [i["type"] for i in paused["output"]] == ["program", "function_call"]
    body = {"previous_response_id": paused["id"], "input": add_answers(paused["output"])}

    replies = await both_at_once(http, state, **body)
    won = one_wins(replies, "previous_response_continued", "previous_response_id")
    assert [i["type"] for i in won["output"]] == ["program_output", "message"]
    assert (await http.get(f"/v1/responses/{won['id']}")).status_code == 200
    [lost] = [r.json()["error"]["message"] for r in replies if r.status_code == 400]
    assert lost.startswith(f"Another request continued the program paused in response '{paused['id']}'")
    assert sorted(e["status"] for e in (await http.get("/_emulator/journal")).json()["data"]) == [200, 200, 400]
    assert (await http.get("/_emulator/health")).json()["stored_responses"] == 2, "the paused one and the winner"

    # The same request sent after the first finished (a client resending what a broken connection
    # cut off) gets the one answer the continuation has; another continuation of it, the 400.
    again = await create(http, **body)
    assert again.status_code == 200, again.text
    assert again.json() == (await http.get(f"/v1/responses/{won['id']}")).json()
    other = [{**output, "output": "6"} for output in body["input"]]
    forked = await create(http, previous_response_id=paused["id"], input=other)
    assert forked.status_code == 400 and forked.json()["error"]["code"] == "previous_response_continued"
    assert (await http.get("/_emulator/health")).json()["stored_responses"] == 2, "neither was stored"
    after = await create(http, previous_response_id=won["id"], input=js("text('next');"))
    assert after.status_code == 200, after.text


async def test_a_background_continuation_in_flight_wins_over_a_later_one(app: tuple[httpx.AsyncClient, Any]) -> None:
    """A background continuation is stored as it is queued: one that starts while it still runs
    finds the pause taken and is refused before anything plays, however the two finish."""
    http, state = app
    paused = (await create(http, input=PROGRAM)).json()
    body = {"previous_response_id": paused["id"], "input": add_answers(paused["output"])}
    engine = state.state.emulator.engine
    gate = Gate(engine.model, expected=1)
    engine.model = gate
    try:
        queued = await create(http, background=True, **body)
        assert queued.status_code == 200 and queued.json()["status"] == "queued", queued.text
        await asyncio.wait_for(gate.all_in.wait(), 60)  # (a guard: it plays long before)
        refused = await create(http, **body)  # the very same request, while the first runs
        assert gate.waiting == 1, "refused before it played"
        gate.open.set()
    finally:
        engine.model = gate.model
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "previous_response_continued"
    kept = queued.json()["id"]
    while (current := (await http.get(f"/v1/responses/{kept}")).json())["status"] in ("queued", "in_progress"):
        await asyncio.sleep(0.01)  # (the background task finishes on this loop)
    assert current["status"] == "completed"
    assert [i["type"] for i in current["output"]] == ["program_output", "message"]
