"""The Agents SDK's `OpenAIResponsesCompactionSession` against the emulator, stateless (it sends the
stored items to `responses.compact`) and stored (it sends the last response id): the session's
history is replaced by the compacted window, and the next run replays it and plays on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesCompactionSession,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.version import __version__ as agents_version

from ptc_emulator.testing.server import PTCEmulator
from tests.support import ClientVersion

pytestmark = pytest.mark.sdk  # the Agents SDK's compaction session against what the server sends

SCENARIO = {
    "name": "session-weather",
    "match": {"input": "^weather in (?P<city>\\w+)$"},
    "turns": [
        {"call": {"name": "lookup", "arguments": {"city": "{{ city }}"}}},
        {"message": "It is {{ output.sky }} in {{ city }}."},
    ],
}


@function_tool
def lookup(city: str) -> str:
    """Return the weather of a city as an object with `sky`."""
    return json.dumps({"sky": "grey" if city == "Oslo" else "blue"})


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # nothing may leave this machine
    yield


@pytest.mark.anyio
@pytest.mark.parametrize("store", [False, True], ids=["stateless", "stored"])
async def test_the_compaction_session_compacts_and_the_next_run_plays_on(
    ptc_emulator: PTCEmulator, tmp_path: Path, store: bool, client_version: ClientVersion
) -> None:
    client_version("openai-agents", agents_version)
    ptc_emulator.add_scenario(SCENARIO)
    compacts: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/responses/compact"):
            compacts.append(json.loads(request.content))

    http = httpx.AsyncClient(
        event_hooks={"request": [record]}, limits=httpx.Limits(max_keepalive_connections=0), timeout=60
    )
    client = ptc_emulator.async_client(max_retries=0, http_client=http)
    agent = Agent(
        name="weather",
        instructions="Look the weather up.",
        model=OpenAIResponsesModel(model="gpt-5.4", openai_client=client),
        model_settings=ModelSettings(store=store),
        tools=[lookup],
    )
    session = OpenAIResponsesCompactionSession(
        "weather",
        SQLiteSession("weather", str(tmp_path / "session.db")),
        client=client,
        model="gpt-5.4",
        should_trigger_compaction=lambda context: True,
    )
    config = RunConfig(tracing_disabled=True)
    first = await Runner.run(agent, "weather in Oslo", session=session, run_config=config)
    assert first.final_output == "It is grey in Oslo."
    second = await Runner.run(agent, "weather in Bergen", session=session, run_config=config)
    assert second.final_output == "It is blue in Bergen."
    assert compacts, "the session never compacted"
    if store:
        assert all(set(body) == {"model", "previous_response_id"} for body in compacts), compacts
    else:
        assert all(set(body) == {"model", "input"} for body in compacts), compacts
    items = await session.get_items()
    kinds = [item.get("type") for item in items]
    assert kinds.count("compaction") == 1, kinds  # the history was replaced by the compacted window
    users = [item for item in items if item.get("role") == "user"]
    assert [u["content"][0]["text"] for u in users][:2] == ["weather in Oslo", "weather in Bergen"]
    await http.aclose()
