"""Scenarios added at run time through the admin API are kept in the store: on the SQLite store
they are there again, in their scopes, after the server restarts (and play), unless they were
deleted or reset first; on the memory store they go with the process, as everything does."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings

pytestmark = pytest.mark.anyio

GREET: dict[str, Any] = {"name": "greet", "match": {"input": "^hello$"}, "turns": [{"message": "hi from greet"}]}
YAML = "match:\n  input: '^bye$'\nturns:\n  - message: bye from yaml\n"


class App:
    def __init__(self, data_dir: Path, store: Literal["sqlite", "memory"] = "sqlite") -> None:
        settings = Settings(data_dir=data_dir, store=store, secret="s", bundled_fixtures=False, pool_size=1)
        self.app = create_app(settings)

    async def __aenter__(self) -> httpx.AsyncClient:
        self.lifespan = self.app.router.lifespan_context(self.app)
        await self.lifespan.__aenter__()
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://127.0.0.1")
        return self.http

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.http.aclose()
        await self.lifespan.__aexit__(None, None, None)


async def listed(http: httpx.AsyncClient) -> list[tuple[str | None, str, str]]:
    reply = await http.get("/_emulator/scenarios")
    reply.raise_for_status()
    return [(s["scope"], s["name"], s["source"]) for s in reply.json()["data"]]


async def said(http: httpx.AsyncClient, text: str, scope: str | None = None) -> httpx.Response:
    headers = {"x-ptc-emulator-scope": scope} if scope else {}
    return await http.post("/v1/responses", json={"model": "m", "input": text}, headers=headers)


async def add(http: httpx.AsyncClient, body: dict[str, Any], scope: str | None = None) -> None:
    headers = {"x-ptc-emulator-scope": scope} if scope else {}
    reply = await http.post("/_emulator/scenarios", json=body, headers=headers)
    assert reply.status_code == 201, reply.text


async def test_added_scenarios_survive_a_restart_on_sqlite(tmp_path: Path) -> None:
    async with App(tmp_path) as http:
        await add(http, GREET, scope="test-a")
        await add(http, {"yaml": YAML, "name": "farewell"})
        await add(http, {**GREET, "name": "doomed"})
        await add(http, {**GREET, "name": "reset-me"}, scope="test-b")
        assert (await http.delete("/_emulator/scenarios/doomed")).status_code == 200
        assert (
            await http.post("/_emulator/reset", json={}, headers={"x-ptc-emulator-scope": "test-b"})
        ).status_code == 200
        before = await listed(http)

    async with App(tmp_path) as http:
        assert await listed(http) == before == [("test-a", "greet", "api"), (None, "farewell", "api")]
        greeted = await said(http, "hello", scope="test-a")
        assert greeted.status_code == 200, greeted.text
        assert greeted.json()["output"][-1]["content"][0]["text"] == "hi from greet"
        assert (await said(http, "hello")).status_code == 400, "another scope's scenario stays its own"
        farewell = await said(http, "bye")
        assert farewell.json()["output"][-1]["content"][0]["text"] == "bye from yaml"
        assert (await http.post("/_emulator/reset", json={})).status_code == 200

    async with App(tmp_path) as http:
        assert await listed(http) == [], "a reset is kept too"


async def test_added_scenarios_go_with_the_process_on_memory(tmp_path: Path) -> None:
    async with App(tmp_path, store="memory") as http:
        await add(http, GREET)
        assert await listed(http) == [(None, "greet", "api")]
    async with App(tmp_path, store="memory") as http:
        assert await listed(http) == []
