"""The journal keeps a JSON reply's rendered bytes when they are its own compact text (api/journaling.py):
what it shows, and the bytes it counts against its bound, are what encoding the response again would
give, for ASCII replies and for replies with other characters (and DEL) alike."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.journal.entries import RawJSON
from tests.support import ADD_TOOL, in_process_http, js

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
JSON = {"content-type": "application/json"}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    settings = Settings(data_dir=tmp_path, store="memory", bundled_fixtures=False, pool_size=1)
    async with in_process_http(settings, base_url="http://127.0.0.1") as (client, app):
        yield client, app.state.emulator.journal


@pytest.mark.parametrize("said", ["plain ascii", "caf\u00e9 \u2603", "a \x7f b", 'quote " and \\ and \n'])
async def test_the_journal_keeps_what_encoding_the_response_again_gives(
    served: tuple[httpx.AsyncClient, Any], said: str
) -> None:
    http, journal = served
    body = {"model": "m", "input": [{"role": "user", "content": js(f"text({json.dumps(said)})")}], "tools": TOOLS}
    reply = await http.post("/v1/responses", json=body, headers=JSON)
    assert reply.status_code == 200, reply.text[:300]
    response = reply.json()
    assert response["output"][-1]["content"][0]["text"] == said

    entry = journal.entries()[-1]
    assert isinstance(entry.response, RawJSON)
    assert bytes(entry.response) == json.dumps(response, separators=(",", ":")).encode("utf-8")
    if said.isascii() and "\x7f" not in said:
        assert bytes(entry.response) == reply.content  # the very bytes the client was sent

    shown = (await http.get("/_emulator/journal")).json()["data"][-1]
    assert shown["response"] == response
