"""`POST /_emulator/reset` and `DELETE /_emulator/journal` free what they own: the token counts
cached for the texts the journal held go with them. Reset frees every cache and memo of the
process besides (docs/limits.md, "Memory"), and the conversation rules' kept passes are bounded
by the bytes their items retain, not only by their count."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.history import replayed
from ptc_emulator.emulator.responses import usage
from ptc_emulator.emulator.rules import contract
from ptc_emulator.emulator.wire.items import Message
from ptc_emulator.sandbox import _wire as sandbox_wire
from tests.support import ADD_TOOL, in_process_http, js

pytestmark = pytest.mark.anyio
JSON = {"content-type": "application/json"}
TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
PAUSING = js("const r = await tools.add({a: 1, b: 2});\ntext('r=' + r)")


@pytest.mark.parametrize(("method", "path"), [("POST", "/_emulator/reset"), ("DELETE", "/_emulator/journal")])
async def test_reset_and_clearing_the_journal_free_the_token_cache(tmp_path: Path, method: str, path: str) -> None:
    app = create_app(Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            usage.clear_cache()
            big = "word " * 20_000
            reply = await http.post("/v1/responses/input_tokens", json={"model": "m", "input": big}, headers=JSON)
            assert reply.status_code == 200, reply.text[:300]
            assert usage.cached_chars() >= len(big)
            cleared = await http.request(method, path, headers=JSON)
            assert cleared.status_code == 200, cleared.text[:300]
            assert usage.cached_chars() == 0


def _big_messages(marker: str) -> int:
    """Message models alive in this process whose text holds `marker`."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Message) and marker in o.text())


def text(response: dict[str, Any]) -> str:
    message = [o for o in response["output"] if o["type"] == "message"][-1]
    return str(message["content"][0]["text"])


async def _post(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post("/v1/responses", content=json.dumps(body), headers=JSON)
    assert reply.status_code == 200, reply.text[:300]
    result: dict[str, Any] = reply.json()
    return result


async def test_kept_passes_are_bounded_by_bytes_and_reset_frees_every_cache(tmp_path: Path) -> None:
    # With the live cache on whatever PTC_EMULATOR_LIVE_CACHE says: the program-key memo it
    # checks is filled only for the live cache.
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False, live_cache=64)
    async with in_process_http(settings) as (http, app):
        engine, signer = app.state.emulator.engine, app.state.emulator.signer
        folds = engine.folds
        folds.max_bytes = 4 * 2**20
        size, replayed.cache.max_bytes = replayed.cache.max_bytes, 0  # only the passes hold the items
        try:
            marker = "BIG-" * 250_000  # a megabyte of text in each request's first message
            for n in range(12):
                items = [{"role": "user", "content": f"{n} {marker}"}, {"role": "user", "content": js("text('ok')")}]
                await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
            # Twelve passes would fit the count bound (128); the bytes let at most four stay alive.
            alive = _big_messages(marker)
            assert 1 <= alive <= 4, alive
            assert folds.bytes <= folds.max_bytes
        finally:
            replayed.cache.max_bytes = size

        # Something in every cache: a paused program resumed (`store: false`, a body over the
        # replayed-body cache's minimum), a stored response continued, a counted text.
        padding = {"role": "user", "content": "pad " * 2000}
        history: list[Any] = [padding, {"role": "user", "content": PAUSING}]
        first = await _post(http, {"model": "m", "input": history, "tools": TOOLS, "store": False})
        call = next(o for o in first["output"] if o["type"] == "function_call")
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        history = [*history, *first["output"], answer]
        await _post(http, {"model": "m", "input": history, "tools": TOOLS, "store": False})
        stored = await _post(http, {"model": "m", "input": PAUSING, "tools": TOOLS})
        call = next(o for o in stored["output"] if o["type"] == "function_call")
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        after = stored["id"]
        done = await _post(http, {"model": "m", "input": [answer], "tools": TOOLS, "previous_response_id": after})
        await _post(http, {"model": "m", "input": js("text('again')"), "previous_response_id": done["id"]})
        assert len(folds) > 0 and len(engine.prompt_cache) > 0 and usage.cached_chars() > 0
        assert all(signer.memo_sizes()), signer.memo_sizes()
        assert replayed.cache.bytes > 0 and engine.history.validated.bytes > 0
        assert contract._schemas.bytes > 0 and contract._verdicts.bytes > 0
        assert sandbox_wire._key.cache_info().currsize > 0

        reply = await http.post("/_emulator/reset", headers=JSON)
        assert reply.status_code == 200, reply.text[:300]
        assert len(folds) == 0 and folds.bytes == 0 and folds.items == 0
        assert _big_messages(marker) == 0
        assert len(engine.prompt_cache) == 0 and usage.cached_chars() == 0
        assert signer.memo_sizes() == (0, 0)
        assert replayed.cache.bytes == 0 and engine.history.validated.bytes == 0
        assert contract._schemas.bytes == 0 and contract._verdicts.bytes == 0
        assert sandbox_wire._key.cache_info().currsize == 0


async def test_reset_closes_the_live_programs(tmp_path: Path) -> None:
    """A suspended program kept live in its worker holds its heap and its data: reset closes it,
    and its resume replays to the same result."""
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False, live_cache=64)
    async with in_process_http(settings) as (http, app):
        pool = app.state.emulator.pool

        async def paused() -> list[Any]:
            first = await _post(http, {"model": "m", "input": PAUSING, "tools": TOOLS, "store": False})
            call = next(o for o in first["output"] if o["type"] == "function_call")
            output = {"type": "function_call_output", "call_id": call["call_id"], "output": "3"}
            return [{"role": "user", "content": PAUSING}, *first["output"], {**output, "caller": call["caller"]}]

        hits = pool.live_hits
        done = await _post(http, {"model": "m", "input": await paused(), "tools": TOOLS, "store": False})
        assert pool.live_hits == hits + 1  # kept live: resumed without a replay
        items = await paused()
        reply = await http.post("/_emulator/reset", headers=JSON)
        assert reply.status_code == 200, reply.text[:300]
        again = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
        assert pool.live_hits == hits + 1  # closed by the reset: replayed
        assert text(again) == text(done) == "r=3"
