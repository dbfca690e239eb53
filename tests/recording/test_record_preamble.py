"""A response that says a message and then makes a call or runs a program (a preamble, `'Let me
check. '`, then the call: the usual model answer) is recorded as one turn, its `preamble` said
before its call(s), and replays to the same items (docs/record-replay.md). Before, such a
conversation was passed on but not recorded.

The upstreams: a small server on loopback speaking the SSE protocol itself, as the hosted API
streams such an answer, and an upstream emulator whose scenario says a preamble before a program."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from tests.recording.recording_support import chain_loop, client, recorder, replay_loop, replayer, upstream
from tests.recording.test_record_hostile_upstream import _request, raw_upstream

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    }
]
QUESTION = "Look up the weather."


def _message(item_id: str, text: str, phase: str | None = None) -> dict[str, Any]:
    item = {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }
    return {**item, "phase": phase} if phase else item


PREAMBLE = _message("msg_1", "Let me look that up. ", phase="commentary")
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "One lookup."}]}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": '{"q":"weather"}',
    "status": "completed",
}


def _item_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """One output item as the hosted API streams it: added (empty), its parts' or arguments'
    deltas in two pieces, done."""
    kind = item["type"]
    where = {"item_id": item["id"], "output_index": index}
    if kind == "message":
        added = {**item, "status": "in_progress", "content": []}
        middle: list[dict[str, Any]] = []
        for n, part in enumerate(item["content"]):
            at = {**where, "content_index": n}
            text = part["text"]
            empty = {**part, "text": "", "annotations": []}
            middle.append({"type": "response.content_part.added", **at, "part": empty})
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                middle.append({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []})
            middle.append({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
            middle.append({"type": "response.content_part.done", **at, "part": part})
    elif kind == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        arguments = item["arguments"]
        middle = [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in (arguments[:5], arguments[5:])
        ]
        middle.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments})
    else:  # reasoning: told whole
        added, middle = item, []
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *middle,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def _stream(response_id: str, output: list[dict[str, Any]]) -> bytes:
    response = {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": TOOLS,
        "output": [],
        "status": "in_progress",
        "usage": None,
    }
    said = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        *(event for index, item in enumerate(output) for event in _item_events(item, index)),
        {"type": "response.completed", "response": {**response, "status": "completed", "output": output}},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(said)
    )


def sse_answers(*outputs: list[dict[str, Any]]) -> Any:
    """An upstream streaming its n-th answer's output (the last one after)."""
    count = [0]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        n = min(count[0], len(outputs) - 1)
        count[0] += 1
        body = _stream(f"resp_{count[0]}", outputs[n])
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    return answer


def lookup(name: str, arguments: dict[str, Any]) -> Any:
    return {"q": arguments["q"], "answer": "sunny"}


def seen(responses: list[Any]) -> list[tuple[list[str], str, list[str | None]]]:
    """Each response as a client reads it: its items' types, its output_text, its messages' phases."""
    return [
        ([o.type for o in r.output], r.output_text, [o.phase for o in r.output if o.type == "message"])
        for r in responses
    ]


def test_a_streamed_preamble_and_call_are_recorded_and_replay_to_the_same_items(tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    upstream_sse = sse_answers([REASONING, PREAMBLE, CALL], [_message("msg_9", "It is sunny.")])
    with raw_upstream(upstream_sse) as url, recorder(tmp_path, url, directory) as rec:
        live = chain_loop(client(rec), QUESTION, TOOLS, lookup, stream=True)
    assert seen(live) == [
        (["reasoning", "message", "function_call"], "Let me look that up. ", ["commentary"]),
        (["message"], "It is sunny.", [None]),
    ]
    [path] = directory.glob("*.yaml")
    turns = yaml.safe_load(path.read_text(encoding="utf-8"))["turns"]
    assert turns == [
        {
            "reasoning": "One lookup.",
            "preamble": "Let me look that up. ",
            "call": {"name": "lookup", "arguments": {"q": "weather"}},
        },
        {"message": "It is {{ outputs.lookup.answer }}."},
    ]
    with replayer(tmp_path, directory) as play:
        sdk = client(play)
        assert seen(chain_loop(sdk, QUESTION, TOOLS, lookup, stream=True)) == seen(live)
        assert seen(chain_loop(sdk, QUESTION, TOOLS, lookup)) == seen(live)
        assert seen(replay_loop(sdk, QUESTION, TOOLS, lookup)) == seen(live)  # the preamble sent back


PROGRAM_TOOLS: list[Any] = [
    {**TOOLS[0], "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]
PROGRAM = {
    "match": {"input": "(?i)^look up the weather", "tools": ["lookup"]},
    "turns": [
        {
            "preamble": "Let me write a program for that. ",
            "program": 'const found = await tools.lookup({ q: "weather" });\ntext(found.answer);\n',
        },
        {"message": "It is {{ result }}."},
    ],
}


def test_a_preamble_before_a_program_is_recorded_and_replays(tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    with upstream(tmp_path) as up:
        up.add_scenario(PROGRAM)
        with recorder(tmp_path, up.base_url, directory) as rec:
            live = chain_loop(client(rec), QUESTION, PROGRAM_TOOLS, lookup)
    assert seen(live) == [
        (["message", "program", "function_call"], "Let me write a program for that. ", ["commentary"]),
        (["program_output", "message"], "It is sunny.", [None]),
    ]
    [path] = directory.glob("*.yaml")
    turns = yaml.safe_load(path.read_text(encoding="utf-8"))["turns"]
    assert turns[0]["preamble"] == "Let me write a program for that. " and "program" in turns[0]
    assert turns[1] == {"message": "It is {{ result }}."}
    with replayer(tmp_path, directory) as play:
        sdk = client(play)
        assert seen(chain_loop(sdk, QUESTION, PROGRAM_TOOLS, lookup, stream=True)) == seen(live)
        assert seen(replay_loop(sdk, QUESTION, PROGRAM_TOOLS, lookup)) == seen(live)
