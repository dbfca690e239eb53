"""The memo of hidden call results: a retried request finds a result there instead of calling the
MCP server again, within the memo's bounds (entries and bytes), and `POST /_emulator/reset`
empties it (docs/limits.md, "MCP"). Seen through the server's own record of its calls and the
health figures `hidden_results` and `hidden_result_bytes`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.tools_support import DocsServer, docs_server, emulator_from

PTC = {"type": "programmatic_tool_calling"}
ADD = {"type": "function", "name": "add", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}
MEMO_BYTES = 2000

# An `add`, then the hidden lookup, then another `add`: the second request runs the lookup and
# pauses; retried as it was sent, it has no runtime record of the lookup, only the memo.
CODE = """
await tools.add({a: 1, b: 2});
const found = await tools.docs_server.lookup({topic: TOPIC});
await tools.add({a: 3, b: 4});
text(found);
"""


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PTCEmulator]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("memo"),
        store="memory",
        pool_size=1,
        mcp_allow_hosts=("127.0.0.1",),
        mcp_memo_bytes=MEMO_BYTES,
    )
    with emulator_from(settings) as found:
        yield found


def health(emulator: PTCEmulator) -> dict[str, Any]:
    base = emulator.base_url.removesuffix("/v1")
    reply = httpx.get(f"{base}/_emulator/health")
    reply.raise_for_status()
    return dict(reply.json())


def lookups(emulator: PTCEmulator, docs: DocsServer, topic: str, *, reset: bool = False) -> int:
    """Send the second request twice (with a reset between when asked); how often the server was called."""
    docs.calls.clear()
    tools = [
        PTC,
        ADD,
        {
            "type": "mcp",
            "server_label": "docs_server",
            "server_url": docs.url,
            "require_approval": "never",
            "allowed_callers": ["programmatic"],
        },
    ]
    user = {"role": "user", "content": js(CODE.replace("TOPIC", repr(topic)))}
    with validating_client(emulator) as client:
        first = client.responses.create(model="gpt-test", tools=tools, input=[user], store=False)
        out = [i.model_dump(mode="json", exclude_none=True) for i in first.output]
        [call] = [i for i in out if i["type"] == "function_call"]
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        second = [user, *out, answer]
        client.responses.create(model="gpt-test", tools=tools, input=second, store=False)
        if reset:
            emulator.reset()
        retried = client.responses.create(model="gpt-test", tools=tools, input=second, store=False)
    assert [i.type for i in retried.output][-1] == "function_call"
    return len(docs.calls)


def test_a_retried_request_calls_the_server_once(emulator: PTCEmulator, docs: DocsServer) -> None:
    assert lookups(emulator, docs, "small") == 1
    assert 0 < health(emulator)["hidden_result_bytes"] <= MEMO_BYTES


def test_a_result_larger_than_the_memo_is_not_kept(emulator: PTCEmulator, docs: DocsServer) -> None:
    assert lookups(emulator, docs, "y" * MEMO_BYTES) == 2
    assert health(emulator)["hidden_result_bytes"] <= MEMO_BYTES


def test_the_memo_keeps_within_its_bytes(emulator: PTCEmulator, docs: DocsServer) -> None:
    """Results that fit one by one, but not all together: the oldest go."""
    for n in range(6):
        lookups(emulator, docs, f"{n}" * (MEMO_BYTES // 4))
        assert health(emulator)["hidden_result_bytes"] <= MEMO_BYTES
    assert health(emulator)["hidden_results"] < 6


def test_reset_empties_the_memo(emulator: PTCEmulator, docs: DocsServer) -> None:
    assert lookups(emulator, docs, "after reset", reset=True) == 2


def test_reset_frees_what_the_memo_held(emulator: PTCEmulator, docs: DocsServer) -> None:
    lookups(emulator, docs, "held")
    assert health(emulator)["hidden_result_bytes"] > 0
    emulator.reset()
    assert (health(emulator)["hidden_results"], health(emulator)["hidden_result_bytes"]) == (0, 0)


def test_another_scopes_large_results_do_not_evict_a_scopes_entry(emulator: PTCEmulator, docs: DocsServer) -> None:
    """The memo's room is shared by scope: a scope filling it with large results evicts its own,
    oldest first, not the small entry of a scope holding less (the code before evicted the oldest
    of all, so the victim's retry called the server a second time)."""
    docs.calls.clear()
    tools = [
        PTC,
        ADD,
        {
            "type": "mcp",
            "server_label": "docs_server",
            "server_url": docs.url,
            "require_approval": "never",
            "allowed_callers": ["programmatic"],
        },
    ]

    def second_request(client: Any, topic: str) -> list[dict[str, Any]]:
        user = {"role": "user", "content": js(CODE.replace("TOPIC", repr(topic)))}
        first = client.responses.create(model="gpt-test", tools=tools, input=[user], store=False)
        out = [i.model_dump(mode="json", exclude_none=True) for i in first.output]
        [call] = [i for i in out if i["type"] == "function_call"]
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        sent = [user, *out, answer]
        client.responses.create(model="gpt-test", tools=tools, input=sent, store=False)
        return sent

    other = PTCEmulator(emulator.server_url)
    try:
        with validating_client(emulator) as client, validating_client(other) as filler:
            victim = second_request(client, "victim")
            for n in range(8):  # each about a third of the memo's bytes: together four times it
                second_request(filler, f"{n}" * (MEMO_BYTES // 6))
                assert health(emulator)["hidden_result_bytes"] <= MEMO_BYTES
            retried = client.responses.create(model="gpt-test", tools=tools, input=victim, store=False)
    finally:
        other.close()
    assert [i.type for i in retried.output][-1] == "function_call"
    assert [args["topic"] for _, args in docs.calls].count("victim") == 1
