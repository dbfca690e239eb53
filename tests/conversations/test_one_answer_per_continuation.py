"""One answer per continuation: the same continuation of a paused program sent hundreds of times
at once is kept once, whenever each copy reaches the server.

A client's copies all leave before any answer comes back, but a busy server takes some of them up
only after the first was answered and stored (they wait in its socket backlog, or behind other
work on its event loop). Both kinds are controlled here, with no timing: the app sits behind a
door that lets the first half in at once and holds the rest until every one of the first half
was answered; inside, the engine's model holds every response that plays until all of the first
half play together. Then:

- exactly one continuation is stored (the paused response and it: two stored responses);
- the first half's other copies get the lost race's 400 (`previous_response_continued`);
- the late half get the very response that was kept (the same request sent again is answered
  with its one answer), and nothing of theirs plays or is stored.

On the store counting continuations in flight (before the one-continuation constraint), the late
half were new continuations: each played, and one more was stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from tests.conversations.test_concurrent_continuations import PROGRAM, Gate, create
from tests.support import add_answers

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

COPIES = 300
"""How many times the one continuation is sent; half get in at once, half after the first answers."""

Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class Door:
    """In front of an app: the first `first` creates go in at once, the others wait until `open`."""

    def __init__(self, app: ASGI, first: int) -> None:
        self.app = app
        self.first = first
        self.entered = 0
        self.open = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/v1/responses":
            self.entered += 1
            if self.entered > self.first:
                await self.open.wait()
        await self.app(scope, receive, send)


Replica = tuple[httpx.AsyncClient, Any, Door]


async def replica(settings: Settings, first: int) -> AsyncIterator[Replica]:
    """The app of `settings` behind a door, through httpx's ASGI transport (lifespan included)."""
    app = create_app(settings)
    door = Door(app, first)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=door)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http, app, door


async def send_copies(
    replicas: list[Replica], body: dict[str, Any], copies: int
) -> tuple[list[httpx.Response], list[int]]:
    """`copies` of one create, spread over the replicas in turn and all sent at once; each replica
    lets its first half in and holds the rest until every one of the first half was answered. The
    replies, and how many responses each replica's model played."""
    gates = []
    for _, app, door in replicas:
        engine = app.state.emulator.engine
        gates.append(Gate(engine.model, expected=door.first))
        engine.model = gates[-1]
    try:
        sent = [asyncio.ensure_future(create(replicas[n % len(replicas)][0], **body)) for n in range(copies)]
        await asyncio.wait_for(asyncio.gather(*(g.all_in.wait() for g in gates)), 120)  # (a guard)
        for gate in gates:
            gate.open.set()  # the first halves play together; one of them is stored first
        first = [task for n, task in enumerate(sent) if n // len(replicas) < replicas[n % len(replicas)][2].first]
        await asyncio.gather(*first)
        for _, _, door in replicas:
            door.open.set()  # the late halves come in: the first answer is out, and stored
        return list(await asyncio.gather(*sent)), [gate.waiting for gate in gates]
    finally:
        for (_, app, _), gate in zip(replicas, gates, strict=True):
            app.state.emulator.engine.model = gate.model


def one_answer(replies: list[httpx.Response], paused: str, late: int) -> dict[str, Any]:
    """The one continuation kept, once every reply is checked to be it or the lost race's 400."""
    answers = [r.json() for r in replies if r.status_code == 200]
    refused = [r.json()["error"] for r in replies if r.status_code != 200]
    assert {a["id"] for a in answers} == {answers[0]["id"]}, "one answer, however often it was given"
    assert len(answers) == 1 + late, [r.text[:200] for r in replies if r.status_code != 400][:3]
    assert len(refused) == len(replies) - 1 - late
    for error in refused:
        assert (error["type"], error["code"], error["param"]) == (
            "invalid_request_error",
            "previous_response_continued",
            "previous_response_id",
        )
        assert error["message"].startswith(f"Another request continued the program paused in response '{paused}'")
    won = answers[0]
    assert [i["type"] for i in won["output"]] == ["program_output", "message"]
    return won


@pytest.fixture(params=["memory", "sqlite"])
async def one(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Replica]:
    settings = Settings(data_dir=tmp_path, store=request.param, bundled_fixtures=False, pool_size=1)
    async for made in replica(settings, COPIES // 2):
        yield made


async def test_hundreds_of_copies_of_one_continuation_keep_one(one: Replica) -> None:
    http, _, door = one
    door.open.set()
    paused = (await create(http, input=PROGRAM)).json()
    assert [i["type"] for i in paused["output"]] == ["program", "function_call"]
    door.open.clear()
    door.entered = 0
    body = {"previous_response_id": paused["id"], "input": add_answers(paused["output"])}

    replies, played = await send_copies([one], body, COPIES)
    won = one_answer(replies, paused["id"], late=COPIES - door.first)
    assert played == [door.first], "the late ones played nothing"
    assert (await http.get("/_emulator/health")).json()["stored_responses"] == 2, "the paused one and the one kept"
    assert (await http.get(f"/v1/responses/{won['id']}")).json() == won
    statuses = [e["status"] for e in (await http.get("/_emulator/journal")).json()["data"]]
    assert sorted(statuses) == [200] * (2 + COPIES - door.first) + [400] * (door.first - 1)
    after = await create(http, previous_response_id=won["id"], input=PROGRAM)
    assert after.status_code == 200, after.text
