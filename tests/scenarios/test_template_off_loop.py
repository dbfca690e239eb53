"""A scenario template renders off the event loop: while one runs to its bounds, the server
answers other requests (health here) at once.

The render is held at a gate the test controls (an event, not a timer): the test opens the gate
only after health has answered. Were the render on the event loop, health could not answer while
the gate is shut, the test could not open it, and the render would find the gate still shut when
its long wait ends: that is the failure this test reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model.scripted import templating
from tests.api.api_support import assert_envelope

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio
# read from the request (`input[:0]`): a template that reads no name a request gives is rendered
# when added, and this one, which always runs out of steps, is then refused
LOOPS = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}{{ input[:0] }}done"


@contextlib.asynccontextmanager
async def app_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path, pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


async def test_a_long_template_render_does_not_hold_up_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started, gate = threading.Event(), threading.Event()
    opened_in_time: list[bool] = []
    real_render = templating.render

    def gated_render(template: Any, context: dict[str, Any]) -> str:
        if "range" in str(context.get("input", "")):
            started.set()
            opened_in_time.append(gate.wait(timeout=60))
        return real_render(template, context)

    monkeypatch.setattr(templating, "render", gated_render)
    async with app_client(tmp_path) as http:
        scenario = {"name": "loops", "match": {"input": "^range loops$"}, "turns": [{"message": LOOPS}]}
        assert (await http.post("/_emulator/scenarios", json=scenario, headers=JSON)).status_code == 201
        body = {"model": "m", "input": "range loops"}
        create = asyncio.ensure_future(http.post("/v1/responses", json=body, headers=JSON))
        assert await asyncio.to_thread(started.wait, 60), "the template never started rendering"
        health = await http.get("/_emulator/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert not create.done()  # the render is still held at the gate
        gate.set()
        reply = await create
    assert opened_in_time == [True], "the render blocked the event loop: health could not answer"
    # Then the render itself runs into its bounds: a 400 naming the scenario, not a hang.
    assert_envelope(reply, 400, "the template ran", code="scenario_error")


WORDS = "{% set s = (input ~ ' ') * 50000 %}{% set m = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}"


@pytest.mark.parametrize(
    "template",
    [
        WORDS + "{{ m|title|length }}",
        WORDS + "{{ m|pprint|length }}",
        WORDS + "{{ m|wordcount }}",
    ],
    ids=["title", "pprint", "wordcount"],
)
async def test_a_refused_filter_is_refused_before_it_builds(tmp_path: Path, template: str) -> None:
    """What the render built, seen by the memory it took at its peak: `title` of 900,000
    characters of words took 61 MB (a list of every word, and its copies), `pprint` 31 MB,
    `wordcount` a list of its 450,000 words, each counted as nothing. Each is now refused before
    it scans the text: the request's whole peak stays under 16 MB."""
    async with app_client(tmp_path) as http:
        scenario = {"name": "peak", "match": {"input": "^x$"}, "turns": [{"message": template}]}
        assert (await http.post("/_emulator/scenarios", json=scenario, headers=JSON)).status_code == 201
        body = {"model": "m", "input": "x"}
        await http.post("/v1/responses", json=body, headers=JSON)  # warm: the template compiled, the route ready
        tracemalloc.start()
        try:
            reply = await http.post("/v1/responses", json=body, headers=JSON)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert_envelope(reply, 400, "more than", code="scenario_error")
    assert peak < 16 * 2**20, f"the render built {peak / 2**20:.0f} MB before it was refused"
