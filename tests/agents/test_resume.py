"""A turn that was running when the server stopped resumes when it starts again.

The crash is made exactly, not raced: a first app takes a session to `requires_action` and stops;
the stored session then gets its tool result the way `POST .../events` stores it (status back to
`in_progress`, the step not yet played), as if the server died right after the 202. A second app
on the same data directory must finish the turn by replaying the program from the transcript."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.agents.harness import SESSION
from ptc_emulator.emulator.agents.session import AgentSession
from ptc_emulator.emulator.agents.wire import ToolResult
from ptc_emulator.emulator.storage import open_store
from tests.agents.agents_support import GET_CUSTOMER, customer, get_customer_code, valid

pytestmark = pytest.mark.anyio


async def wait_for(client: openai.AsyncOpenAI, session_id: str, status: str) -> Any:
    """Poll (no event stream in process: the ASGI transport buffers whole bodies)."""
    deadline = time.monotonic() + 120  # generous: the machine may be busy
    while time.monotonic() < deadline:
        session = await client.beta.agents.sessions.retrieve(session_id)
        if session.status == status:
            return valid(session)
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {session_id} never reached {status}: {session.status}")


class App:
    def __init__(self, data_dir: Path) -> None:
        settings = Settings(
            data_dir=data_dir, store="sqlite", secret="resume-secret", bundled_fixtures=False, pool_size=1
        )
        self.app = create_app(settings)

    async def __aenter__(self) -> openai.AsyncOpenAI:
        self.lifespan = self.app.router.lifespan_context(self.app)
        await self.lifespan.__aenter__()
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://127.0.0.1")
        return openai.AsyncOpenAI(
            base_url="http://127.0.0.1/v1", api_key="sk-test", http_client=self.http, max_retries=0
        )

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        await self.lifespan.__aexit__(None, None, None)


async def test_a_running_turn_resumes_on_start(tmp_path: Path) -> None:
    async with App(tmp_path) as client:
        session = await client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [GET_CUSTOMER]}, input=get_customer_code()
        )
        (action,) = (await wait_for(client, session.id, "requires_action")).required_actions

    store = open_store("sqlite", tmp_path)
    records = store.sessions
    stored = records.get(SESSION, session.id)
    assert stored is not None
    crashed = AgentSession(stored, ids=lambda prefix: f"{prefix}_resumed", clock=lambda: 0.0)
    result = {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id}
    result.update(success=True, output=json.dumps(customer(action.arguments)))
    assert crashed.apply_result(ToolResult.model_validate(result), []) is True  # the last pending result
    records.put(SESSION, session.id, crashed.doc)
    store.close()

    async with App(tmp_path) as client:
        done = await wait_for(client, session.id, "idle")
        items = [valid(i) async for i in client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items][-2:] == ["function_call_output", "message"]
    assert json.loads(items[-1].content[0].text) == customer({"customer_id": "123"})
    assert done.usage is not None and done.usage.total_tokens > 0
