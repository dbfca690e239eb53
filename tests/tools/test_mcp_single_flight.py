"""An approved MCP call a program makes runs once, however its continuation is sent: the same
continuation sent several times at once (`previous_response_id`, a conversation, or `store: false`
replays) shares one call in the process; and a `store: false` replay that dropped the reasoning
item sealing a call's result, once the process's memo no longer holds it, is refused rather than
calling the server again (docs/tools-hosted.md). Through the official SDK against a real MCP
server that counts its calls."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from mcp.server.mcpserver import MCPServer

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import serve

TOGETHER = 6
HOLD_S = 3.0
PICK = {"type": "function", "name": "pick", "allowed_callers": ["programmatic"], "parameters": None, "strict": None}
PAUSING = "const x = await tools.h.echo({q: 'x'}); await tools.pick({}); text(JSON.stringify(x))"
CODE = "const x = await tools.h.echo({q: 'x'}); text(JSON.stringify(x))"


@dataclass
class Echo:
    url: str = ""
    calls: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    """Set once TOGETHER calls arrived: each call is answered then, or after HOLD_S."""


@pytest.fixture(scope="module")
def echo() -> Iterator[Echo]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    record = Echo()
    server = MCPServer("h")

    @server.tool(description="Echo q")
    async def echo(q: str) -> str:
        record.calls.append(q)
        if len(record.calls) >= TOGETHER:
            record.release.set()
        # Held so that the requests sent at once all reach the emulator while this call is in
        # flight (the code before made one call each); the fallback only bounds the test's time.
        await asyncio.to_thread(record.release.wait, HOLD_S)
        return f"echo {q}"

    @server.tool(description="Gate q")
    async def gate(q: str) -> str:
        record.calls.append(f"gate {q}")
        return f"gate {q}"

    with serve(server.streamable_http_app()) as served:
        record.url = served.url
        yield record


@pytest.fixture(autouse=True)
def fresh(echo: Echo) -> None:
    echo.calls.clear()
    echo.release.clear()


def tools(echo: Echo) -> list[dict[str, Any]]:
    mcp = {
        "type": "mcp",
        "server_label": "h",
        "server_url": echo.url,
        "require_approval": "always",
        "allowed_callers": ["programmatic"],
    }
    return [{"type": "programmatic_tool_calling"}, PICK, mcp]


def dumped(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


def approve(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "mcp_approval_response",
        "approval_request_id": request["id"],
        "approve": True,
        "caller": request["caller"],
    }


def at_once(send: Any) -> list[Any]:
    """`send()` from TOGETHER threads released together: each one's response, or the error raised."""
    barrier = threading.Barrier(TOGETHER)
    answers: list[Any] = [None] * TOGETHER

    def one(n: int) -> None:
        barrier.wait()
        try:
            answers[n] = send()
        except openai.APIStatusError as error:
            answers[n] = error

    threads = [threading.Thread(target=one, args=(n,)) for n in range(TOGETHER)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def succeeded(answers: list[Any]) -> list[Any]:
    for answer in answers:
        if isinstance(answer, openai.APIStatusError):
            assert answer.status_code == 400, answer
    return [a for a in answers if not isinstance(a, openai.APIStatusError)]


def test_a_continuation_sent_at_once_with_store_false_calls_the_server_once(
    ptc_emulator: PTCEmulator, echo: Echo
) -> None:
    user = {"role": "user", "content": js(CODE)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(echo), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        sent = [user, *first, approve(request)]
        answers = at_once(lambda: client.responses.create(model="gpt-test", tools=tools(echo), input=sent, store=False))
    assert [a.output_text for a in succeeded(answers)] == ['"echo x"'] * TOGETHER
    assert echo.calls == ["x"]


def test_a_continuation_sent_at_once_with_previous_response_id_calls_the_server_once(
    ptc_emulator: PTCEmulator, echo: Echo
) -> None:
    user = {"role": "user", "content": js(CODE)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        first = client.responses.create(model="gpt-test", tools=tools(echo), input=[user], store=True)
        [request] = [i for i in dumped(first) if i["type"] == "mcp_approval_request"]
        answers = at_once(
            lambda: client.responses.create(
                model="gpt-test", tools=tools(echo), input=[approve(request)], previous_response_id=first.id
            )
        )
    assert [a.output_text for a in succeeded(answers)] == ['"echo x"']
    assert echo.calls == ["x"]


def test_a_continuation_sent_at_once_in_a_conversation_calls_the_server_once(
    ptc_emulator: PTCEmulator, echo: Echo
) -> None:
    user = {"role": "user", "content": js(CODE)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        conversation = client.conversations.create()
        first = client.responses.create(model="gpt-test", tools=tools(echo), input=[user], conversation=conversation.id)
        [request] = [i for i in dumped(first) if i["type"] == "mcp_approval_request"]
        answers = at_once(
            lambda: client.responses.create(
                model="gpt-test", tools=tools(echo), input=[approve(request)], conversation=conversation.id
            )
        )
    assert [a.output_text for a in succeeded(answers)] == ['"echo x"']
    assert echo.calls == ["x"]


def test_a_replay_without_the_sealed_result_is_refused_not_called_again(ptc_emulator: PTCEmulator, echo: Echo) -> None:
    """The approved call ran and the program went on to `pick`; the client drops the reasoning item
    sealing the call's result, and the memo no longer has it (a reset stands in for a restart, or
    another replica): the replay is refused, not answered by calling the server a second time."""
    echo.release.set()
    user = {"role": "user", "content": js(PAUSING)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=tools(echo), input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        second = dumped(
            client.responses.create(
                model="gpt-test", tools=tools(echo), input=[user, *first, approve(request)], store=False
            )
        )
        [call] = [i for i in second if i["type"] == "function_call"]
        picked = {"type": "function_call_output", "call_id": call["call_id"], "output": "1", "caller": call["caller"]}
        ptc_emulator.reset()
        kept = [i for i in second if i["type"] != "reasoning"]
        dropped = [user, *first, approve(request), *kept, picked]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=tools(echo), input=dropped, store=False)
        whole = [user, *first, approve(request), *second, picked]
        final = client.responses.create(model="gpt-test", tools=tools(echo), input=whole, store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "missing_sealed_result"
    assert error["param"] == f"input[{1 + len(first)}]"
    assert "h.echo" in error["message"] and request["id"] in error["message"]
    assert "the reasoning item holding its sealed result is missing" in error["message"]
    assert final.output_text == '"echo x"'
    assert echo.calls == ["x"]


def test_a_replay_without_the_sealed_result_of_a_call_needing_no_approval_is_refused(
    ptc_emulator: PTCEmulator, echo: Echo
) -> None:
    """With `require_approval: "never"` the call ran and the program went on to `pick`; the client
    drops the reasoning item sealing the call's result and the memo no longer has it: the replay is
    refused (the code before made the call a second time: only approved calls were checked)."""
    echo.release.set()
    never = [*tools(echo)[:2], {**tools(echo)[2], "require_approval": "never"}]
    user = {"role": "user", "content": js(PAUSING)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=never, input=[user], store=False))
        [call] = [i for i in first if i["type"] == "function_call"]
        picked = {"type": "function_call_output", "call_id": call["call_id"], "output": "1", "caller": call["caller"]}
        ptc_emulator.reset()
        kept = [i for i in first if i["type"] != "reasoning"]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=never, input=[user, *kept, picked], store=False)
        final = client.responses.create(model="gpt-test", tools=never, input=[user, *first, picked], store=False)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "missing_sealed_result"
    program = next(n for n, i in enumerate(kept) if i["type"] == "program")
    assert error["param"] == f"input[{1 + program}]"
    assert "h.echo" in error["message"] and "approved by" not in error["message"]
    assert "the reasoning item holding its sealed result is missing" in error["message"]
    assert final.output_text == '"echo x"'
    assert echo.calls == ["x"]


def test_a_replay_dropping_a_call_needing_no_approval_before_a_later_approval_is_refused(
    ptc_emulator: PTCEmulator, echo: Echo
) -> None:
    """`echo` needs no approval, `gate` after it does: the program ran `echo` and paused on `gate`'s
    approval request. A replay approving it without the reasoning item sealing `echo`'s result,
    the memo emptied, is refused: the request for the later call shows the program went past."""
    echo.release.set()
    mcp = {**tools(echo)[2], "require_approval": {"never": {"tool_names": ["echo"]}}}
    both = [tools(echo)[0], mcp]
    code = "const x = await tools.h.echo({q: 'x'}); const g = await tools.h.gate({q: 'g'}); text(x + ' ' + g)"
    user = {"role": "user", "content": js(code)}
    with validating_client(ptc_emulator, max_retries=0) as client:
        first = dumped(client.responses.create(model="gpt-test", tools=both, input=[user], store=False))
        [request] = [i for i in first if i["type"] == "mcp_approval_request"]
        ptc_emulator.reset()
        kept = [i for i in first if i["type"] != "reasoning"]
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-test", tools=both, input=[user, *kept, approve(request)], store=False)
        final = client.responses.create(
            model="gpt-test", tools=both, input=[user, *first, approve(request)], store=False
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "missing_sealed_result", error
    assert "h.echo" in error["message"]
    assert final.output_text == "echo x gate g"
    assert echo.calls == ["x", "gate g"]


def direct(ptc_emulator: PTCEmulator, echo: Echo, words: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A scenario whose direct `mcp:` turn (no program) needs approval, then a message."""
    turns = [{"mcp": {"server_label": "h", "name": "echo", "arguments": {"q": "d"}}}, {"message": "done"}]
    ptc_emulator.add_scenario({"match": {"input": f"^{words}$"}, "turns": turns})
    mcp = {"type": "mcp", "server_label": "h", "server_url": echo.url, "require_approval": "always"}
    return {"role": "user", "content": words}, [mcp]


@pytest.mark.parametrize("how", ["store_false", "previous_response_id", "conversation"])
def test_a_direct_calls_approval_sent_at_once_calls_the_server_once(
    ptc_emulator: PTCEmulator, echo: Echo, how: str
) -> None:
    """A scenario's direct call, approved by requests sent together: one call for all of them
    (the code before called the server once per request, the ones then refused included), and a
    later retry of the approval reuses its result."""
    user, mcp = direct(ptc_emulator, echo, f"direct at once {how}")
    with validating_client(ptc_emulator, max_retries=0) as client:
        create = client.responses.create
        if how == "conversation":
            conversation = client.conversations.create().id
            first = create(model="gpt-test", tools=mcp, input=[user], conversation=conversation)
        else:
            first = create(model="gpt-test", tools=mcp, input=[user], store=how != "store_false")
        [request] = [i for i in dumped(first) if i["type"] == "mcp_approval_request"]
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        if how == "store_false":
            sent = [user, *dumped(first), answer]

            def send() -> Any:
                return create(model="gpt-test", tools=mcp, input=sent, store=False)
        elif how == "previous_response_id":

            def send() -> Any:
                return create(model="gpt-test", tools=mcp, input=[answer], previous_response_id=first.id)
        else:

            def send() -> Any:
                return create(model="gpt-test", tools=mcp, input=[answer], conversation=conversation)

        answered = succeeded(at_once(send))
        assert answered and all(a.output_text == "done" for a in answered)
        assert echo.calls == ["d"]
        if how != "conversation":  # (a conversation's approval, once answered, is answered)
            echo.release.set()
            assert send().output_text == "done"
            assert echo.calls == ["d"]
