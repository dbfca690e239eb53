"""Every response can be continued under the server's own limits, hidden MCP results included.

A program's MCP results travel sealed in the response that pauses after them, and a `store: false`
client sends every item back (the PTC guide). Each pause seals only the results new since the
last one, so n pauses carry each result once, not n*(n+1)/2 times; and what a conversation carries
is bounded by what `--max-body-bytes` leaves beside the rest of the conversation (`sealed_budget`):
a pause that would carry more ends the program `incomplete`, saying why, and the conversation goes
on (docs/limits.md, "MCP"). Before, the first two conversations below got a 413 on a continuation.

The model's own (direct) MCP calls show their results in `mcp_call` items, which the client sends
back too: they count against the same bound, and a call past it is a failed `mcp_call` saying so.
Before, a response of large direct results could not be continued (a 413) either."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings, sealed_budget
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import Served, misbehaving_server
from tests.tools.tools_support import emulator_from

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
    with emulator_from(replace(SETTINGS, data_dir=tmp_path_factory.mktemp("continuable"))) as found:
        yield found


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


VISIBLE = 12
"""Direct calls of `huge` in one response: their 420 KB of visible `mcp_call` output is more than the body holds."""


def visible_scenario(calls: int) -> dict[str, Any]:
    """`calls` direct calls of `huge`, for the input `{calls} visible calls`."""
    turns: list[dict[str, Any]] = [{"mcp": {"server_label": "big", "name": "huge"}} for _ in range(calls)]
    return {"match": {"input": f"^{calls} visible calls$"}, "turns": [*turns, {"message": "read them"}]}


def direct_tools(big: Served) -> list[dict[str, Any]]:
    return [PTC, {"type": "mcp", "server_label": "big", "server_url": big.url, "require_approval": "never"}]


def tools_both(big: Served) -> list[dict[str, Any]]:
    """The MCP server for the model's own calls and for programs'."""
    [ptc, mcp] = direct_tools(big)
    return [ptc, ADD, {**mcp, "allowed_callers": ["direct", "programmatic"]}]


def test_visible_mcp_results_are_bounded_so_the_response_can_be_continued(emulator: PTCEmulator, big: Served) -> None:
    """An MCP call the model makes itself returns its output visibly in an `mcp_call` item, which a
    store: false client sends back too: such results count with the sealed ones, and a call that
    would take the conversation past the budget is answered as a failed `mcp_call` naming the limit."""
    emulator.add_scenario(visible_scenario(VISIBLE))
    conversation: list[dict[str, Any]] = [{"role": "user", "content": f"{VISIBLE} visible calls"}]
    with validating_client(emulator) as client:
        first = client.responses.create(model="gpt-test", tools=direct_tools(big), input=conversation, store=False)
        output = items(first)
        # The store: false client sends every item back, and the conversation goes on (before, a 413).
        conversation += [*output, {"role": "user", "content": js("text('goes on')")}]
        after = client.responses.create(model="gpt-test", tools=direct_tools(big), input=conversation, store=False)
    [more] = [i for i in items(after) if i["type"] == "program_output"]
    assert (more["status"], more["result"]) == ("completed", "goes on")
    calls = [i for i in output if i["type"] == "mcp_call"]
    assert len(calls) == VISIBLE and first.output_text == "read them"
    done = [i for i in calls if i["status"] == "completed"]
    failed = [i for i in calls if i["status"] == "failed"]
    assert done and failed and calls == [*done, *failed]
    assert all(len(i["output"]) == RESULT for i in done) and all("output" not in i for i in failed)
    said = failed[0]["error"]["message"]
    assert said.startswith("limit: the result of the call to big.huge takes")
    assert f"the {BUDGET} bytes a store: false client can send back under --max-body-bytes" in said
    visible = [i for i in output if i["type"] in ("mcp_list_tools", "mcp_call")]
    assert sum(len(json.dumps(i, separators=(",", ":"))) for i in visible) <= BUDGET


def test_visible_results_and_sealed_ones_share_the_budget(emulator: PTCEmulator, big: Served) -> None:
    """One bound for both: after five visible 35 KB results, a program pausing after two more
    (about 94 KB sealed) would take the conversation past it, and ends `incomplete` saying so."""
    emulator.add_scenario(visible_scenario(5))
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "5 visible calls"}]
    code = "await tools.big.huge({}); await tools.big.huge({}); await tools.add({a: 1, b: 2}); text('paused');"
    with validating_client(emulator) as client:
        first = client.responses.create(model="gpt-test", tools=tools_both(big), input=conversation, store=False)
        output = items(first)
        assert [i["status"] for i in output if i["type"] == "mcp_call"] == ["completed"] * 5
        carried = sum(len(json.dumps(i, separators=(",", ":"))) for i in output if i["type"].startswith("mcp_"))
        conversation += [*output, {"role": "user", "content": js(code)}]
        second = client.responses.create(model="gpt-test", tools=tools_both(big), input=conversation, store=False)
    [ended] = [i for i in items(second) if i["type"] == "program_output"]
    assert ended["status"] == "incomplete" and not answers(items(second)) and not sealed(items(second))
    assert "limit: the results of the program's 2 server-run calls" in ended["result"]
    # What the conversation carries is counted as the client sends it back (within a few bytes of
    # field order and defaults).
    said = int(ended["result"].split("the conversation carries ")[1].split(" ")[0])
    assert abs(said - carried) < 200


def many_tools(count: int, width: int = 100) -> tuple[str, ...]:
    """`count` tool names of `width` characters: about `count * (width + 40)` bytes of listing."""
    return tuple(f"t{i:0{width - 1}d}" for i in range(count))


def listed_tools(server: Served, labels: int) -> list[dict[str, Any]]:
    """`labels` MCP tools h1.. naming one server, each listed to the model, and a function tool."""
    mcp = [
        {"type": "mcp", "server_label": f"h{n}", "server_url": server.url, "require_approval": "never"}
        for n in range(1, labels + 1)
    ]
    return [PTC, ADD, *mcp]


def refused_listing(emulator: PTCEmulator, server: Served, labels: int) -> str:
    """The message of the 424 a program's first response gets, with `labels` listings of `server`."""
    conversation = [{"role": "user", "content": js("await tools.add({a: 1, b: 2}); text('resumed');")}]
    with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="gpt-test", tools=listed_tools(server, labels), input=conversation, store=False)
    assert caught.value.status_code == 424
    error = caught.value.body
    assert isinstance(error, dict) and (error["type"], error["code"], error["param"]) == (
        "external_connector_error",
        "http_error",
        "tools",
    )
    return str(error["message"])


def test_a_listing_past_the_bound_fails_as_a_listing_that_cannot_be_read(emulator: PTCEmulator) -> None:
    """An `mcp_list_tools` item a store: false client sends back too: one larger than the budget
    fails the response as a listing the server would not give (the 424), naming the server and the
    bound. Before, four such listings made a response no continuation could send back (a 413)."""
    with misbehaving_server("named_listing", names=many_tools(2_000)) as server:
        said = refused_listing(emulator, server, 4)
    assert said.startswith(
        "Error retrieving tool list from MCP server 'h1': limit: the listing of MCP server 'h1' takes"
    )
    assert f"the {BUDGET} bytes a store: false client can send back under --max-body-bytes" in said


def test_listings_past_the_bound_together_fail_at_the_one_that_goes_past(emulator: PTCEmulator) -> None:
    """Four listings of some 100 KB each: two fit the budget, the third would take the response
    past it and fails, saying what the first two carry. Before, the 200 of some 400 KB could not be
    sent back under the 390,000 bytes of body (a 413)."""
    with misbehaving_server("named_listing", names=many_tools(700)) as server:
        said = refused_listing(emulator, server, 4)
    assert said.startswith("Error retrieving tool list from MCP server 'h3': limit: the listing of MCP server 'h3'")
    carried = int(said.split("the conversation carries ")[1].split(" ")[0])
    assert BUDGET // 3 < carried <= BUDGET


def test_a_response_of_several_listings_under_the_bound_is_continued(emulator: PTCEmulator) -> None:
    """Three listings of some 50 KB each and a program paused on a function call: the store: false
    client sends everything back, and the program resumes to its end."""
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": js("await tools.add({a: 1, b: 2}); text('resumed');")}
    ]
    with misbehaving_server("named_listing", names=many_tools(350)) as server, validating_client(emulator) as client:
        first = client.responses.create(
            model="gpt-test", tools=listed_tools(server, 3), input=conversation, store=False
        )
        output = items(first)
        listings = [i for i in output if i["type"] == "mcp_list_tools"]
        assert [i["server_label"] for i in listings] == ["h1", "h2", "h3"]
        assert all(len(i["tools"]) == 350 for i in listings)
        assert sum(len(json.dumps(i, separators=(",", ":"))) for i in listings) <= BUDGET
        conversation += [*output, *answers(output)]
        after = client.responses.create(
            model="gpt-test", tools=listed_tools(server, 3), input=conversation, store=False
        )
    [done] = [i for i in items(after) if i["type"] == "program_output"]
    assert (done["status"], done["result"]) == ("completed", "resumed")
