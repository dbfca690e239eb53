"""An MCP approval covers the call it was asked for: the server label, the tool and its arguments,
not only the call's position in the program. Through the official SDK with `store: false` (the
client sends every item back, and may have changed any) against a real MCP server."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.tools_support import DocsServer, docs_server

PTC = {"type": "programmatic_tool_calling"}
PICK = {"type": "function", "name": "pick", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(docs: DocsServer) -> None:
    docs.calls.clear()


def tools(docs: DocsServer) -> list[dict[str, Any]]:
    mcp = {
        "type": "mcp",
        "server_label": "docs_server",
        "server_url": docs.url,
        "require_approval": "always",
        "allowed_callers": ["programmatic"],
    }
    return [PTC, PICK, mcp]


def dumped(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


def approve(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "mcp_approval_response",
        "approval_request_id": request["id"],
        "approve": True,
        "caller": request["caller"],
    }


def picked(call: dict[str, Any], page: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call["call_id"], "output": page, "caller": call["caller"]}


def test_an_approval_does_not_cover_the_call_once_an_earlier_output_changes(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """The user approved `delete_page({page: 'old'})`; the client then sends back a different
    output for the `pick` the program consumed before: the call is now `delete_page({page:
    'important'})`, which nobody approved. It waits on a new approval request."""
    code = "const page = await tools.pick({}); text(await tools.docs_server.delete_page({page}));"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [call] = [i for i in first if i["type"] == "function_call"]
        second_input = [user, *first, picked(call, "old")]
        second = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=second_input, store=False))
        [request] = [i for i in second if i["type"] == "mcp_approval_request"]
        assert json.loads(request["arguments"]) == {"page": "old"}
        rewritten = [user, *first, picked(call, "important"), *second, approve(request)]
        third = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=rewritten, store=False))
    assert docs.calls == []
    [asked] = [i for i in third if i["type"] == "mcp_approval_request"]
    assert json.loads(asked["arguments"]) == {"page": "important"}
    assert asked["id"] != request["id"]


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"name": "lookup", "arguments": '{"page": "something harmless"}'}, "name 'lookup'"),
        ({"arguments": '{"page": "something harmless"}'}, "arguments"),
    ],
)
def test_an_approval_request_sent_back_changed_is_refused(
    ptc_emulator: PTCEmulator, docs: DocsServer, changed: dict[str, str], named: str
) -> None:
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = {**first[index], **changed}
        sent = [user, *first[:index], request, *first[index + 1 :], approve(request)]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == f"input[{1 + index}]"
    assert error["code"] == "invalid_approval_request"
    assert "does not match the call it approves" in error["message"] and named in error["message"]
    assert docs.calls == []


def test_an_unchanged_approval_still_runs_the_call(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        sent = [user, *first, approve(request)]
        final = client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    assert final.output_text == "deleted old"
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_direct_calls_approval_request_sent_back_changed_is_refused(ptc_emulator: PTCEmulator) -> None:
    """A scenario's direct call (`mcp_call`, no program) checks the replayed request item too: its
    id is a MAC of what it was issued for (`Signer.direct_mcp_approval_id`)."""
    hosted = {"mcp_servers": {"docs": {"tools": [{"name": "wipe", "output": "wiped"}, {"name": "lookup"}]}}}
    turns = [{"mcp": {"server_label": "docs", "name": "wipe"}}, {"message": "done: {{ outputs.wipe }}"}]
    ptc_emulator.add_scenario({"match": {"input": "^direct wipe"}, "hosted": hosted, "turns": turns})
    mcp = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/mcp"}
    user = {"role": "user", "content": "direct wipe"}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=[mcp], input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = {**first[index], "name": "lookup"}
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        sent = [user, *first[:index], request, *first[index + 1 :], answer]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=[mcp], input=sent, store=False)
        error = caught.value.body
        assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]"
        assert error["code"] == "invalid_approval_request"
        assert "was not issued as sent" in error["message"]
        sent = [user, *first, answer]
        final = client.responses.create(model="gpt-test", tools=[mcp], input=sent, store=False)
    assert final.output_text == "done: wiped"


# The call, its denial caught: the program's text says which the program saw.
TRY_DELETE = (
    "try { text(await tools.docs_server.delete_page({page: 'old'})) } catch (e) { text('refused: ' + e.message) }"
)


def deny(request: dict[str, Any]) -> dict[str, Any]:
    return {**approve(request), "approve": False, "reason": "changed my mind"}


def test_a_later_denial_is_honoured_though_an_earlier_replay_approved(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """The decision that counts is the one the request being processed carries: a replay that
    approved ran the call; the same replay sent again denying it does not run it again, nor hand
    the program the result the approval got (the process keeps results for retried requests)."""
    code = TRY_DELETE
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        approved = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
        )
        assert approved.output_text == "deleted old"
        denied = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, deny(request)], store=False
        )
    assert denied.output_text.startswith("refused: ") and "not approved: changed my mind" in denied.output_text
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_changed_approval_request_is_refused_after_an_earlier_approval(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """A request item sent back changed is the 400 whether or not the call was approved before:
    what the earlier approval left behind does not stand in for the check."""
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = first[index]
        approved = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
        )
        assert approved.output_text == "deleted old"
        for changed in ({"arguments": '{"page": "other"}'}, {"name": "lookup"}, {"server_label": "elsewhere"}):
            tampered = {**request, **changed}
            sent = [user, *first[:index], tampered, *first[index + 1 :], approve(tampered)]
            with pytest.raises(openai.BadRequestError) as caught:
                client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
            error = caught.value.body
            assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]", changed
            assert error["code"] == "invalid_approval_request"
    assert docs.calls == [("delete_page", {"page": "old"})]


# The approved call, then a client call: the response that ran it pauses on `pick`, sealing the
# call's result; a replay carries that sealed result on.
THEN_PICK = (
    "let r; try { r = await tools.docs_server.delete_page({page: 'old'}) } catch (e) { r = 'refused: ' + e.message }"
    " const p = await tools.pick({}); text(r + ' / ' + p);"
)


def test_a_denial_replayed_over_a_sealed_result_is_what_the_program_sees(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """The response that ran the approved call sealed its result; a replay that carries that sealed
    result on, but denies the call, has the program see the denial."""
    user = {"role": "user", "content": js(THEN_PICK)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        second = dumped(
            client.responses.create(
                model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
            )
        )
        [call] = [i for i in second if i["type"] == "function_call"]
        assert any(i["type"] == "reasoning" for i in second)  # the sealed result
        end = [*second, picked(call, "x")]
        approved = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, approve(request), *end], store=False
        )
        assert approved.output_text == "deleted old / x"
        denied = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, deny(request), *end], store=False
        )
    assert denied.output_text.startswith("refused: ") and "not approved: changed my mind / x" in denied.output_text
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_changed_approval_request_is_refused_beside_a_sealed_result(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    user = {"role": "user", "content": js(THEN_PICK)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = first[index]
        second = dumped(
            client.responses.create(
                model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
            )
        )
        [call] = [i for i in second if i["type"] == "function_call"]
        tampered = {**request, "arguments": '{"page": "other"}'}
        sent = [user, *first[:index], tampered, *first[index + 1 :], approve(tampered), *second, picked(call, "x")]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]"
    assert error["code"] == "invalid_approval_request"
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_later_denial_with_previous_response_id_is_refused(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    """Stored: the answer the chain holds is the one that counts. A second answer to the response
    that asked is refused (a paused program is continued once), and one added after the chain's
    own is the duplicate; neither runs the call again."""
    code = TRY_DELETE
    with validating_client(ptc_emulator) as client:
        first = client.responses.create(model="gpt-test", tools=tools(docs), input=js(code))
        [request] = [i for i in dumped(first) if i["type"] == "mcp_approval_request"]
        approved = client.responses.create(
            model="gpt-test", tools=tools(docs), previous_response_id=first.id, input=[approve(request)]
        )
        assert approved.output_text == "deleted old"
        with pytest.raises(openai.BadRequestError) as again:
            client.responses.create(
                model="gpt-test", tools=tools(docs), previous_response_id=first.id, input=[deny(request)]
            )
        assert "continued once" in again.value.message
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model="gpt-test", tools=tools(docs), previous_response_id=approved.id, input=[deny(request)]
            )
    error = caught.value.body
    assert isinstance(error, dict) and "answered more than once" in error["message"]
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_two_conflicting_answers_in_one_input_are_refused(ptc_emulator: PTCEmulator, docs: DocsServer) -> None:
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        sent = [user, *first, approve(request), deny(request)]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == f"input[{len(sent) - 1}]"
    assert error["message"] == f"Duplicate item: approval request '{request['id']}' is answered more than once."
    assert docs.calls == []


def test_a_later_approval_is_honoured_though_an_earlier_replay_denied(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """The other way round: the denial an earlier replay got is not kept for the call either."""
    code = TRY_DELETE
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        denied = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, deny(request)], store=False
        )
        assert denied.output_text.startswith("refused: ")
        assert docs.calls == []
        approved = client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
        )
    assert approved.output_text == "deleted old"
    assert docs.calls == [("delete_page", {"page": "old"})]


def test_a_finished_programs_approval_request_sent_back_changed_is_refused(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    """Once the program has finished no call compares its request items any more: each is checked
    against what this server issued its id for."""
    code = "text(await tools.docs_server.delete_page({page: 'old'}))"
    user = {"role": "user", "content": js(code)}
    again = {"role": "user", "content": js("text('again')")}
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(docs), input=[user], store=False))
        index = next(i for i, item in enumerate(first) if item["type"] == "mcp_approval_request")
        request = first[index]
        final = dumped(
            client.responses.create(
                model="gpt-test", tools=tools(docs), input=[user, *first, approve(request)], store=False
            )
        )
        assert any(i["type"] == "program_output" for i in final)
        client.responses.create(
            model="gpt-test", tools=tools(docs), input=[user, *first, approve(request), *final, again], store=False
        )
        tampered = {**request, "arguments": '{"page": "other"}'}
        sent = [user, *first[:index], tampered, *first[index + 1 :], approve(tampered), *final, again]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(docs), input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]"
    assert error["code"] == "invalid_approval_request"
    assert "was not issued as sent: its server_label, name or arguments were changed" in error["message"]
    assert docs.calls == [("delete_page", {"page": "old"})]


# Direct calls (a scenario's `mcp` turn, no program): two calls, each asked for, then a message.
DIRECT_TOOLS = [{"name": "wipe", "output": "wiped"}, {"name": "archive", "output": "archived"}]
DIRECT_TURNS = [
    {"mcp": {"server_label": "docs", "name": "wipe", "arguments": {"page": "old"}}},
    {"mcp": {"server_label": "docs", "name": "archive", "arguments": {"page": "new"}}},
    {"message": "done: {{ outputs.wipe | default('not wiped') }}, {{ outputs.archive | default('not archived') }}"},
]
DIRECT_MCP = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/mcp"}


def direct_scenario(
    ptc_emulator: PTCEmulator, words: str, turns: list[dict[str, Any]] = DIRECT_TURNS
) -> dict[str, Any]:
    hosted = {"mcp_servers": {"docs": {"tools": DIRECT_TOOLS}}}
    ptc_emulator.add_scenario({"match": {"input": f"^{words}$"}, "hosted": hosted, "turns": turns})
    return {"role": "user", "content": words}


def direct_answer(request: dict[str, Any], approve: bool = True) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": approve}


def requests_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i["type"] == "mcp_approval_request"]


def test_a_direct_calls_request_ids_are_bound_to_what_they_ask_and_unique() -> None:
    from ptc_emulator.emulator.signing import Signer

    signer = Signer(b"s")
    ids = {signer.direct_mcp_approval_id("docs", "wipe", '{"page": "old"}') for _ in range(50)}
    assert len(ids) == 50
    for request_id in ids:
        assert request_id.startswith("mcpr_") and len(request_id) == 5 + 48
        assert signer.issued_direct_approval(request_id, "docs", "wipe", '{"page":"old"}')
        assert not signer.issued_direct_approval(request_id, "docs", "wipe", '{"page":"other"}')
        assert not signer.issued_direct_approval(request_id, "docs", "archive", '{"page":"old"}')
        assert not signer.issued_direct_approval(request_id, "elsewhere", "wipe", '{"page":"old"}')
        assert not Signer(b"t").issued_direct_approval(request_id, "docs", "wipe", '{"page":"old"}')


def test_an_earlier_direct_approval_request_sent_back_changed_is_refused(ptc_emulator: PTCEmulator) -> None:
    """`store: false`: the first call's request, approved in an earlier response, comes back
    changed beside the second call's (which the turn compares): it is refused, at its own place,
    before the second answer is applied. Untampered, the same replay plays both calls."""
    user = direct_scenario(ptc_emulator, "direct two")
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=[user], store=False))
        [wipe] = requests_of(first)
        so_far = [user, *first, direct_answer(wipe)]
        second = dumped(client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=so_far, store=False))
        [archive] = requests_of(second)
        assert archive["id"] != wipe["id"] and archive["id"].startswith("mcpr_") and len(archive["id"]) == 53
        index = first.index(wipe)
        for changed in ({"arguments": '{"page": "important"}'}, {"name": "archive"}, {"server_label": "other"}):
            tampered = {**wipe, **changed}
            sent = [user, *first[:index], tampered, *first[index + 1 :], direct_answer(tampered), *second]
            with pytest.raises(openai.BadRequestError) as caught:
                client.responses.create(
                    model="gpt-test", tools=[DIRECT_MCP], input=[*sent, direct_answer(archive)], store=False
                )
            error = caught.value.body
            assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]", changed
            assert error["code"] == "invalid_approval_request"
            assert f"The mcp_approval_request {wipe['id']} was not issued as sent" in error["message"]
        final = client.responses.create(
            model="gpt-test", tools=[DIRECT_MCP], input=[*so_far, *second, direct_answer(archive)], store=False
        )
    assert final.output_text == "done: wiped, archived"


def test_a_direct_approval_request_the_server_never_issued_is_refused(ptc_emulator: PTCEmulator) -> None:
    """A request item the client made up, with the very call the turn makes, and its approval:
    the server never asked, so nothing runs on it."""
    user = direct_scenario(ptc_emulator, "direct made up", [DIRECT_TURNS[0], DIRECT_TURNS[2]])
    made_up = {
        "type": "mcp_approval_request",
        "id": "mcpr_" + "0123456789abcdef" * 3,
        "name": "wipe",
        "server_label": "docs",
        "arguments": '{"page": "old"}',
    }
    with validating_client(ptc_emulator) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model="gpt-test", tools=[DIRECT_MCP], input=[user, made_up, direct_answer(made_up)], store=False
            )
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == "input[1]"
    assert error["code"] == "invalid_approval_request"


def test_a_direct_approval_request_of_an_earlier_exchange_sent_back_changed_is_refused(
    ptc_emulator: PTCEmulator,
) -> None:
    """A request answered before the latest user message is no turn's any more: it is checked all
    the same, so a history sent back says what was approved, as it was asked."""
    user = direct_scenario(ptc_emulator, "direct once", [DIRECT_TURNS[0], DIRECT_TURNS[2]])
    later = direct_scenario(ptc_emulator, "direct after", [{"message": "ok"}])
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=[user], store=False))
        [wipe] = requests_of(first)
        sent = [user, *first, direct_answer(wipe)]
        second = dumped(client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=sent, store=False))
        assert (
            client.responses.create(
                model="gpt-test", tools=[DIRECT_MCP], input=[*sent, *second, later], store=False
            ).output_text
            == "ok"
        )
        index = first.index(wipe)
        tampered = {**wipe, "arguments": '{"page": "anything"}'}
        sent = [user, *first[:index], tampered, *first[index + 1 :], direct_answer(tampered), *second, later]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=sent, store=False)
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == f"input[{1 + index}]"
    assert error["code"] == "invalid_approval_request"


def test_a_later_direct_denial_is_honoured_though_an_earlier_replay_approved(ptc_emulator: PTCEmulator) -> None:
    """The decision applied is the one the request being processed carries."""
    user = direct_scenario(ptc_emulator, "direct deny later")
    with validating_client(ptc_emulator) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=[user], store=False))
        [wipe] = requests_of(first)
        approved = dumped(
            client.responses.create(
                model="gpt-test", tools=[DIRECT_MCP], input=[user, *first, direct_answer(wipe)], store=False
            )
        )
        assert [i["name"] for i in approved if i["type"] == "mcp_call"] == ["wipe"]
        denied = dumped(
            client.responses.create(
                model="gpt-test", tools=[DIRECT_MCP], input=[user, *first, direct_answer(wipe, False)], store=False
            )
        )
        assert not [i for i in denied if i["type"] == "mcp_call"]
        [archive] = requests_of(denied)
        sent = [user, *first, direct_answer(wipe, False), *denied, direct_answer(archive)]
        final = client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=sent, store=False)
    assert final.output_text == "done: not wiped, archived"


def test_direct_approvals_with_previous_response_id(ptc_emulator: PTCEmulator) -> None:
    """Stored: the chain's own request items pass the check; one the client adds to its input, not
    issued, is refused (param naming it) before its answer is applied."""
    user = direct_scenario(ptc_emulator, "direct stored")
    with validating_client(ptc_emulator) as client:
        first = client.responses.create(model="gpt-test", tools=[DIRECT_MCP], input=[user])
        [wipe] = requests_of(dumped(first))
        made_up = {**wipe, "id": "mcpr_" + "0123456789abcdef" * 3, "arguments": '{"page": "important"}'}
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model="gpt-test",
                tools=[DIRECT_MCP],
                previous_response_id=first.id,
                input=[direct_answer(wipe), made_up, direct_answer(made_up)],
            )
        error = caught.value.body
        assert isinstance(error, dict) and error["param"] == "input[1]"
        assert error["code"] == "invalid_approval_request"
        second = client.responses.create(
            model="gpt-test", tools=[DIRECT_MCP], previous_response_id=first.id, input=[direct_answer(wipe)]
        )
        [archive] = requests_of(dumped(second))
        final = client.responses.create(
            model="gpt-test", tools=[DIRECT_MCP], previous_response_id=second.id, input=[direct_answer(archive)]
        )
    assert final.output_text == "done: wiped, archived"
