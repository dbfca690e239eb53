"""`POST /_emulator/reset` and `DELETE /_emulator/journal` free what they own: the token counts
cached for the texts the journal held go with them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.responses import usage

pytestmark = pytest.mark.anyio
JSON = {"content-type": "application/json"}


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
