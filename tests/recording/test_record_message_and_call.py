"""A response that says a message and makes a call: a message said before the call (a preamble,
then a tool call: the usual model pattern) records as the call turn's `preamble` and replays as it
went live (docs/record-replay.md); what a turn cannot say so (a call and then a message, two
messages, reasoning between the message and the call, a refusal before it) is not recorded, and
the log says why. A response of calls alone is, and replays as it went live."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import client, recorder, replayer
from tests.recording.test_record_hostile_upstream import _request, raw_upstream
from tests.recording.test_record_two_messages import message

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    }
]
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": '{"q": "x"}',
    "status": "completed",
}


def answers(*outputs: list[dict[str, Any]]) -> Any:
    """An upstream answering its n-th request with the n-th output (the last one after)."""
    count = [0]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        n = min(count[0], len(outputs) - 1)
        count[0] += 1
        body = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "gpt-test",
            "output": outputs[n],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": TOOLS,
        }
        data = json.dumps(body).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    return answer


def tool_loop(sdk: Any) -> list[tuple[list[str], str]]:
    """The SDK's tool loop, as an app runs it: each call answered, until an answer makes none."""
    given: list[Any] = [{"role": "user", "content": "Look it up."}]
    trace = []
    for _ in range(4):
        got = sdk.responses.create(model="gpt-test", input=given, tools=TOOLS)
        trace.append(([o.type for o in got.output], got.output_text))
        calls = [o for o in got.output if o.type == "function_call"]
        if not calls:
            break
        given += [o.model_dump(exclude_none=True) for o in got.output]
        given += [{"type": "function_call_output", "call_id": c.call_id, "output": "42"} for c in calls]
    return trace


REFUSAL = {
    "type": "message",
    "id": "msg_r",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "refusal", "refusal": "I would rather not. "}],
}
THOUGHT = {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "then call"}]}


@pytest.mark.parametrize(
    ("first", "why"),
    [
        ([message("msg_1", "A "), CALL, message("msg_2", "B")], "a response makes a call (lookup) and then says"),
        ([CALL, message("msg_1", "after")], "a response makes a call (lookup) and then says a message"),
        ([message("msg_1", "A "), message("msg_2", "B "), CALL], "a response says 2 messages and then calls lookup"),
        ([message("msg_1", "A "), THOUGHT, CALL], "a response says a message, reasons, and then calls lookup"),
        ([REFUSAL, CALL], "a response says a message that is not text alone (a refusal) and then calls lookup"),
    ],
    ids=["around", "after", "two-messages", "message-reasoning-call", "refusal-call"],
)
def test_a_message_with_a_call_a_turn_cannot_say_so_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, first: list[dict[str, Any]], why: str
) -> None:
    """Before, the preamble and the call were recorded as turns message, call, message: the replay
    said 'A ' and completed, and the tool was never called (a test passing on less than the client
    saw live); [call, message 'after'] replayed as the call and then 'afterdone'. A preamble is one
    text message, its reasoning before it: anything else is still refused."""
    directory = tmp_path / "recordings"
    upstream = answers(first, [message("msg_9", "done")])
    with caplog.at_level("INFO"), raw_upstream(upstream) as url, recorder(tmp_path, url, directory) as rec:
        live = tool_loop(client(rec))
    assert live[-1] == (["message"], "done") and "function_call" in live[0][0]
    assert not list(directory.glob("*.yaml"))
    said = [r.getMessage() for r in caplog.records]
    assert any(s.startswith(f"a finished conversation was not recorded: {why}") for s in said), said


def test_a_preamble_and_its_call_replay_as_they_went_live(tmp_path: Path) -> None:
    """Before, this conversation was passed on but not recorded (a turn was one kind)."""
    directory = tmp_path / "recordings"
    first = [message("msg_1", "Let me check. "), CALL]
    with raw_upstream(answers(first, [message("msg_9", "done")])) as url, recorder(tmp_path, url, directory) as rec:
        live = tool_loop(client(rec))
    assert live == [(["message", "function_call"], "Let me check. "), (["message"], "done")]
    assert len(list(directory.glob("*.yaml"))) == 1
    with replayer(tmp_path, directory) as play:
        assert tool_loop(client(play)) == live


def test_calls_alone_replay_as_they_went_live(tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    with raw_upstream(answers([CALL], [message("msg_9", "done")])) as url, recorder(tmp_path, url, directory) as rec:
        live = tool_loop(client(rec))
    assert live == [(["function_call"], ""), (["message"], "done")]
    assert len(list(directory.glob("*.yaml"))) == 1
    with replayer(tmp_path, directory) as play:
        assert tool_loop(client(play)) == live


CUSTOM = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply", "input": "patch"}
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "and b"}]}
CALL_B = {**CALL, "id": "fc_2", "call_id": "call_2", "arguments": '{"q": "b"}'}


@pytest.mark.parametrize(
    ("first", "why"),
    [
        ([message("msg_1", "Let me patch. "), CUSTOM], "its item at 1 after the user message is a 'custom_tool_call'"),
        (
            [message("msg_1", "Let me check. "), SEARCH, CALL],
            "its item at 1 after the user message is a 'web_search_call'",
        ),
        ([CALL, SEARCH, message("msg_1", "after")], "its item at 1 after the user message is a 'web_search_call'"),
        ([CALL, REASONING, CALL_B], "a response makes a call, reasons, and calls lookup"),
    ],
    ids=["message-custom-call", "message-search-call", "call-search-message", "call-reasoning-call"],
)
def test_an_answer_the_format_cannot_replay_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, first: list[dict[str, Any]], why: str
) -> None:
    """Before, items other than messages, calls and programs were left out: [message, custom_tool_call]
    was recorded and replayed as [message]; a hosted call between a preamble and a call hid the pair
    (the replay said 'Let me check. ' and never called the tool); and [call, reasoning, call] in one
    response replayed as two responses (the reasoning began a turn of its own). Each is refused now."""
    directory = tmp_path / "recordings"
    upstream = answers(first, [message("msg_9", "done")])
    with caplog.at_level("INFO"), raw_upstream(upstream) as url, recorder(tmp_path, url, directory) as rec:
        live = tool_loop(client(rec))
    assert live[0][0] == [item["type"] for item in first]
    assert not list(directory.glob("*.yaml"))
    said = [r.getMessage() for r in caplog.records]
    assert any(s.startswith(f"a finished conversation was not recorded: {why}") for s in said), said
