"""Every response can be continued under the server's own limits, hidden MCP results included.

A program's MCP results travel sealed in the response that pauses after them, and a `store: false`
client sends every item back (the PTC guide). Each pause seals only the results new since the
last one, so n pauses carry each result once, not n*(n+1)/2 times; and what a conversation carries
is bounded by what `--max-body-bytes` leaves beside the rest of the conversation (`sealed_budget`):
a pause that would carry more ends the program `incomplete`, saying why, and the conversation goes
on (docs/limits.md, "MCP"). Before, both conversations below got a 413 on a continuation."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings, sealed_budget
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import Served, misbehaving_server

PTC = {"type": "programmatic_tool_calling"}
ADD = {"type": "function", "name": "add", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}
# Small limits, so that results of tens of kilobytes reach them: 160 KiB for the rest of the
# conversation (`resend_floor`), 390,000 bytes of body, about 230 KB left for sealed results.
LIMITS = Limits(max_output_bytes=16 * 1024, max_code_bytes=4 * 1024, max_argument_bytes=16 * 1024)
SETTINGS = Settings(store="memory", pool_size=1, mcp_allow_hosts=("127.0.0.1",), limits=LIMITS, max_body_bytes=390_000)
BUDGET = sealed_budget(SETTINGS)
RESULT = 35_000
"""One `huge` answer: four sealed once each fit the budget; sealed again at every pause, they do not fit the body."""


@pytest.fixture(scope="module")
def big() -> Iterator[Served]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with misbehaving_server(huge_bytes=RESULT) as server:
        yield server


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PTCEmulator]:
    server = EmulatorServer(replace(SETTINGS, data_dir=tmp_path_factory.mktemp("continuable"))).start()
    found = PTCEmulator(server.base_url)
    try:
        yield found
    finally:
        found.close()
        server.stop()


def tools(big: Served) -> list[dict[str, Any]]:
    mcp = {
        "type": "mcp",
        "server_label": "big",
        "server_url": big.url,
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    return [PTC, ADD, mcp]


def items(response: Any) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json", exclude_none=True) for i in response.output]


def answers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "function_call_output", "call_id": i["call_id"], "output": "1", "caller": i["caller"]}
        for i in output
        if i["type"] == "function_call"
    ]


def sealed(output: list[dict[str, Any]]) -> list[int]:
    """The sizes of the sealed results a response carries."""
    return [len(i["encrypted_content"]) for i in output if i["type"] == "reasoning" and i["id"].startswith("rs_rt")]


def test_a_program_pausing_after_each_large_result_is_continued_to_its_end(emulator: PTCEmulator, big: Served) -> None:
    """Four pauses, each after a 35 KB MCP result: every continuation sends everything back."""
    code = """
    let total = 0;
    for (let i = 0; i < 4; i++) {
      total += (await tools.big.huge({})).length;
      await tools.add({a: i, b: 1});
    }
    text(`read ${total}`);
    """
    conversation: list[dict[str, Any]] = [{"role": "user", "content": js(code)}]
    sizes: list[int] = []
    with validating_client(emulator) as client:
        response = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
        for _ in range(4):
            output = items(response)
            sizes += sealed(output)
            conversation += [*output, *answers(output)]
            response = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
        [done] = [i for i in items(response) if i["type"] == "program_output"]
        assert (done["status"], done["result"]) == ("completed", f"read {4 * RESULT}")
        # Each pause carried its own result alone: four items of one result's size, within the budget.
        assert len(sizes) == 4 and max(sizes) < RESULT * 3 // 2 and sum(sizes) <= BUDGET
        # The finished program's calls skip the positions of its MCP calls: the conversation goes on.
        conversation += [*items(response), {"role": "user", "content": js("text('goes on')")}]
        after = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
    [more] = [i for i in items(after) if i["type"] == "program_output"]
    assert (more["status"], more["result"]) == ("completed", "goes on")


def test_results_past_what_a_client_can_send_back_end_the_program(emulator: PTCEmulator, big: Served) -> None:
    """Nine 35 KB results before a pause: more than the body could carry back. The program ends
    `incomplete` saying so, and the conversation is continued as a store: false client does."""
    code = """
    let total = 0;
    for (let i = 0; i < 9; i++) total += (await tools.big.huge({})).length;
    text(`read ${total}`);
    await tools.add({a: 1, b: 2});
    text('after the pause');
    """
    conversation: list[dict[str, Any]] = [{"role": "user", "content": js(code)}]
    with validating_client(emulator) as client:
        first = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
        output = items(first)
        [ended] = [i for i in output if i["type"] == "program_output"]
        assert not sealed(output) and not answers(output)
        assert ended["status"] == "incomplete"
        assert ended["result"].startswith(f"read {9 * RESULT}\nlimit: the results of the program's 9 server-run calls")
        assert f"the {BUDGET} bytes a store: false client can send back under --max-body-bytes" in ended["result"]
        conversation += [*output, {"role": "user", "content": js("text('goes on')")}]
        after = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
    [done] = [i for i in items(after) if i["type"] == "program_output"]
    assert (done["status"], done["result"]) == ("completed", "goes on")


def test_the_budget_leaves_the_rest_of_the_conversation_its_room() -> None:
    """What sealed results may take is what the body limit leaves beside one program at its limits;
    with the defaults, 3 MiB."""
    assert BUDGET == 390_000 - (6 * 16 * 1024 + 12 * 4 * 1024 + 16 * 1024)
    assert sealed_budget(Settings()) == 3 * 2**20
    assert sealed_budget(Settings(max_body_bytes=2**20)) == 0


def test_a_continuation_past_the_body_limit_is_still_a_413(emulator: PTCEmulator) -> None:
    """The bound is on what the emulator sends; a client adding more than the body holds is refused."""
    with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="gpt-test", input="x" * 400_000, store=False)
    assert caught.value.status_code == 413


def test_what_earlier_programs_carry_counts_too(emulator: PTCEmulator, big: Served) -> None:
    """The bound is the conversation's: a second program's results are counted with the first's,
    which a store: false client sends back as well."""
    code = "for (let i = 0; i < 4; i++) await tools.big.huge({}); await tools.add({a: 1, b: 2}); text('paused once');"
    conversation: list[dict[str, Any]] = [{"role": "user", "content": js(code)}]
    with validating_client(emulator) as client:
        first = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
        output = items(first)
        [carried] = sealed(output)
        conversation += [*output, *answers(output)]
        done = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
        conversation += [*items(done), {"role": "user", "content": js(code.replace("once", "again"))}]
        second = client.responses.create(model="gpt-test", tools=tools(big), input=conversation, store=False)
    [ended] = [i for i in items(second) if i["type"] == "program_output"]
    assert ended["status"] == "incomplete" and not answers(items(second))
    assert f"the conversation carries {carried + 256} bytes of such results already" in ended["result"]
