"""A program item's fingerprint stays small whatever the tool listing: a long list of the tools a
program may call is bound by its digest, not embedded, and the program still resumes; a request
that resumes it with other tools is refused as before."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js

pytestmark = pytest.mark.integration

PROGRAM = js("const r = await tools.t00007({n: 1});\ntext('r=' + JSON.stringify(r))")


def tools(count: int) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = [
        {
            "type": "function",
            "name": f"t{n:05d}",
            "parameters": None,
            "strict": None,
            "allowed_callers": ["programmatic"],
        }
        for n in range(count)
    ]
    return [*listed, {"type": "programmatic_tool_calling"}]


def started(client: openai.OpenAI, listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation after the program's first pause, its call answered."""
    first = client.responses.create(model="m", input=PROGRAM, tools=listing, store=False)  # type: ignore[arg-type]
    program = next(item for item in first.output if item.type == "program")
    assert len(program.fingerprint) < 1024, len(program.fingerprint)  # type: ignore[union-attr]
    call = next(item for item in first.output if item.type == "function_call")
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": '{"ok": 7}', "caller": call.caller}
    return [{"role": "user", "content": PROGRAM}, *(i.model_dump(exclude_none=True) for i in first.output), answer]


def test_a_long_tool_list_is_bound_by_digest_and_the_program_resumes(client: openai.OpenAI) -> None:
    # 2,000 names are about 20,000 characters, forty times what a fingerprint embeds
    # (EMBEDDED_TOOLS_CHARS); many more would time the SDK parsing the tools every response echoes.
    listing = tools(2_000)
    items = started(client, listing)
    done = client.responses.create(model="m", input=items, tools=listing, store=False)  # type: ignore[arg-type]
    assert done.output_text == 'r={"ok":7}'


def test_a_changed_long_tool_list_is_refused(client: openai.OpenAI) -> None:
    listing = tools(2_000)  # a list far past what a fingerprint embeds
    items = started(client, listing)
    for changed in (listing[1:], [*listing[:-1], {**listing[0], "name": "t99999"}, listing[-1]]):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input=items, tools=changed, store=False)  # type: ignore[arg-type]
        assert "The tools a program may call changed while program" in caught.value.message
        assert caught.value.body["param"] == "tools"  # type: ignore[index]


def test_a_long_mcp_listing_is_bound_by_digest_and_the_program_resumes(ptc_emulator: PTCEmulator) -> None:
    schema = {"type": "object", "properties": {"topic": {"type": "string"}}}
    listed = [{"name": f"page_tool_number_{n:03d}", "input_schema": schema} for n in range(60)]
    lookup = {
        "name": "lookup",
        "input_schema": schema,
        "results": [{"arguments": {"topic": "a"}, "output": '{"p": 3}'}],
    }
    code = (
        "const a = await tools.add({a: 1, b: 2});\n"
        "const r = await tools.docs.lookup({topic: 'a'});\n"
        "text(a + ' ' + r.p);"
    )
    ptc_emulator.add_scenario(
        {
            "name": "long-listing",
            "match": {"input": "long listing"},
            "hosted": {"mcp_servers": {"docs": {"tools": [lookup, *listed]}}},
            "turns": [{"program": code}, {"message": "{{ result }}"}],
        }
    )
    server = {
        "type": "mcp",
        "server_label": "docs",
        "server_url": "http://127.0.0.1:9/mcp",
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    listing: list[Any] = [*tools(1), server]
    listing[0] = {**listing[0], "name": "add"}
    client = ptc_emulator.client()
    first = client.responses.create(model="m", input="long listing", tools=listing, store=False)
    program = next(item for item in first.output if item.type == "program")
    assert len(program.fingerprint) < 1024, len(program.fingerprint)  # type: ignore[union-attr]
    call = next(item for item in first.output if item.type == "function_call")
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": "3", "caller": call.caller}
    items = [{"role": "user", "content": "long listing"}, *(i.model_dump(exclude_none=True) for i in first.output)]
    done = client.responses.create(model="m", input=[*items, answer], tools=listing, store=False)  # type: ignore[arg-type]
    assert done.output_text == "3 3"
    # With a function renamed, or without the MCP server (its listed tools), it is refused.
    for changed in ([{**listing[0], "name": "sub"}, *listing[1:]], listing[:2]):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="m", input=[*items, answer], tools=changed, store=False)  # type: ignore[arg-type]
        assert "The tools a program may call changed while program" in caught.value.message
