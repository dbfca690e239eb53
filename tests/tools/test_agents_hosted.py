"""The Agents SDK 0.24 Runner with `HostedMCPTool` (allowed_callers inside tool_config) and a real
MCP server: a program's approval requests surface as interruptions, resolved through `RunState`,
and the run completes with the program's result. Also `CodeInterpreterTool`, scripted."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    CodeInterpreterTool,
    HostedMCPTool,
    ModelSettings,
    ProgrammaticToolCallingTool,
    Runner,
    set_tracing_disabled,
)

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, runner_model
from tests.tools.tools_support import DocsServer, docs_server

pytestmark = pytest.mark.sdk  # the Agents SDK's Runner accepts hosted MCP items and their approvals

CODE = """
let out = [];
try { out.push(await tools.docs_server.delete_page({page: 'old'})); }
catch (e) { out.push('caught: ' + e.message); }
out.push(await tools.docs_server.lookup({topic: 'ptc'}));
text(out.join(' | '));
"""


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(autouse=True)
def no_tracing(docs: DocsServer) -> Iterator[None]:
    set_tracing_disabled(True)  # nothing may leave this machine
    docs.calls.clear()
    yield


def agent(ptc_emulator: PTCEmulator, tools: list[Any], store: bool | None) -> Agent:
    model = runner_model(ptc_emulator)
    return Agent(
        name="docs",
        model=model,
        model_settings=ModelSettings(store=store),
        tools=[ProgrammaticToolCallingTool(), *tools],
    )


def mcp(docs: DocsServer) -> HostedMCPTool:
    return HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "docs_server",
            "server_url": docs.url,
            "require_approval": "always",
            "allowed_callers": ["programmatic"],
        }
    )


@pytest.mark.anyio
@pytest.mark.parametrize("store", [None, False])
async def test_runner_approves_and_denies_a_programs_mcp_calls(
    ptc_emulator: PTCEmulator, docs: DocsServer, store: bool | None
) -> None:
    runner_agent = agent(ptc_emulator, [mcp(docs)], store)
    result = await Runner.run(runner_agent, js(CODE))
    seen = []
    for _ in range(4):
        if not result.interruptions:
            break
        state = result.to_state()
        for interruption in result.interruptions:
            raw = interruption.raw_item
            name = raw.name if not isinstance(raw, dict) else raw["name"]
            caller = raw.caller if not isinstance(raw, dict) else raw.get("caller")  # type: ignore[union-attr]
            assert caller is not None and caller["type"] == "program"
            seen.append(name)
            if name == "delete_page":
                state.reject(interruption, rejection_message="not in production")
            else:
                state.approve(interruption)
        result = await Runner.run(runner_agent, state)
    assert seen == ["delete_page", "lookup"]
    assert result.final_output == (
        "caught: The call to docs_server.delete_page was not approved: not in production | The docs say ptc is fine."
    )
    assert docs.calls == [("lookup", {"topic": "ptc"})]


@pytest.mark.anyio
async def test_runner_with_a_scripted_code_interpreter(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.set_hosted({"code_interpreter": [{"logs": "4\n"}]})
    ci = CodeInterpreterTool(
        tool_config={"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
    )
    result = await Runner.run(
        agent(ptc_emulator, [ci], None),
        js("const r = await tools.code_interpreter({code: 'print(2 + 2)'}); text('got ' + r.logs.trim());"),
    )
    assert result.final_output == "got 4"
