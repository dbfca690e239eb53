"""Stream events for a response: a pure function of the Response objects, no I/O.

A streamed response is told as events (`types/responses/response_stream_event.py`):

    response.created, response.in_progress           the skeleton: no output, no usage
    per output item, at its index in the final output:
      response.output_item.added                     the item, empty where deltas will fill it
        message:   content_part.added, output_text.delta... (or refusal.delta...),
                   output_text.done (refusal.done), content_part.done, per content part
        function_call: function_call_arguments.delta..., function_call_arguments.done
        custom_tool_call: custom_tool_call_input.delta..., custom_tool_call_input.done
        shell_call: per command, shell_call_command.added, shell_call_command.delta...,
                   shell_call_command.done
        reasoning: reasoning_summary_part.added, reasoning_summary_text.delta...,
                   reasoning_summary_text.done, reasoning_summary_part.done, per summary part
        mcp_list_tools: mcp_list_tools.in_progress, mcp_list_tools.completed (or .failed)
        mcp_call:  mcp_call_arguments.delta..., mcp_call_arguments.done, mcp_call.in_progress,
                   mcp_call.completed (or .failed)
        code_interpreter_call: code_interpreter_call.in_progress, code_interpreter_call_code.delta...,
                   code_interpreter_call_code.done, code_interpreter_call.interpreting,
                   code_interpreter_call.completed
        compaction: response.compaction.compacting (the item is added with no encrypted_content yet)
        program, program_output and anything else: nothing in between (they arrive whole)
      response.output_item.done                      the item as in the final output
    response.completed | response.incomplete | response.failed   the final response

Generation is deterministic: text is cut into deltas by a fixed rule, so the events regenerated
from a stored response (`replay`) equal the ones first streamed for it, and
`GET /v1/responses/{id}?stream=true&starting_after=N` can resume a stream exactly.

Numbering is separate from generation: `Sequencer` gives each event its `sequence_number`,
from 0, so a transport can slip its own events (an in-stream error) into the same sequence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from ptc_emulator.emulator.wire.response import ResponseStatus

__all__ = [
    "TERMINAL",
    "Sequencer",
    "chunks",
    "closing",
    "item_events",
    "opening",
    "output_events",
    "replay",
    "skeleton",
]

Event = dict[str, Any]

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
"""The event types that end a response's stream; each carries the finished response."""

_CHUNK = re.compile(r"\s*\S{1,24}|\s+\Z")
"""A delta: a word with the whitespace before it (long words cut at 24 characters)."""

MAX_DELTAS = 256
"""At most this many deltas per text: a longer text gets several words per delta, so a stream's
size stays a small multiple of the response's however short the words (a megabyte of `'x '`
would otherwise be half a million events of some 240 bytes each)."""

_FINAL_EVENT = {"completed": "response.completed", "incomplete": "response.incomplete"}


def chunks(text: str) -> list[str]:
    """`text` cut into deltas, at most `MAX_DELTAS` of them; they join back to `text` exactly."""
    words: list[str] = _CHUNK.findall(text)
    if len(words) <= MAX_DELTAS:
        return words
    per = -(-len(words) // MAX_DELTAS)
    return ["".join(words[i : i + per]) for i in range(0, len(words), per)]


def skeleton(response: dict[str, Any]) -> dict[str, Any]:
    """The response as `response.created` shows it: no output, no usage, not finished."""
    return {
        **response,
        "status": ResponseStatus.QUEUED if response.get("background") else ResponseStatus.IN_PROGRESS,
        "output": [],
        "usage": None,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
    }


def opening(start: dict[str, Any]) -> list[Event]:
    """`response.created` (as `start` is: in progress, or queued) and `response.in_progress`."""
    return [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": {**start, "status": ResponseStatus.IN_PROGRESS}},
    ]


def closing(final: dict[str, Any]) -> Event:
    """The terminal event for a finished response; a cancelled one ends as `response.failed`."""
    return {"type": _FINAL_EVENT.get(final.get("status", ""), "response.failed"), "response": final}


def output_events(output: list[dict[str, Any]]) -> list[Event]:
    """The events of every output item, in order."""
    return [event for index, item in enumerate(output) for event in item_events(item, index)]


def replay(final: dict[str, Any]) -> list[Event]:
    """Every event of a finished response, numbered: what streaming it produced."""
    events = [*opening(skeleton(final)), *output_events(final.get("output", [])), closing(final)]
    return Sequencer().number_all(events)


def item_events(item: dict[str, Any], output_index: int) -> list[Event]:
    """`output_item.added`, the item's deltas, and `output_item.done`."""
    kind = item.get("type")
    if kind == "message":
        added, middle = _with_status({**item, "content": []}, item), list(_message(item, output_index))
    elif kind == "function_call":
        added, middle = _with_status({**item, "arguments": ""}, item), list(_arguments(item, output_index))
    elif kind == "custom_tool_call":
        added, middle = {**item, "input": ""}, list(_input(item, output_index))
    elif kind == "shell_call":
        action = {**item.get("action", {}), "commands": []}
        added, middle = _with_status({**item, "action": action}, item), list(_commands(item, output_index))
    elif kind == "reasoning":
        empty = {k: v for k, v in item.items() if k not in ("content", "encrypted_content")}
        added, middle = _with_status({**empty, "summary": []}, item), list(_reasoning(item, output_index))
    elif kind in _HOSTED:
        added, middle = _HOSTED[kind](item, output_index)
    elif kind == "compaction":
        where = {"item_id": _item_id(item), "output_index": output_index}
        added, middle = {**item, "encrypted_content": ""}, [{"type": "response.compaction.compacting", **where}]
    else:
        added, middle = item, []
    return [
        {"type": "response.output_item.added", "output_index": output_index, "item": added},
        *middle,
        {"type": "response.output_item.done", "output_index": output_index, "item": item},
    ]


class Sequencer:
    """Numbers events from 0, in the order they are sent."""

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        """The next number, used up."""
        self.next += 1
        return self.next - 1

    def number(self, event: Event) -> Event:
        return {**event, "sequence_number": self.take()}

    def number_all(self, events: Iterable[Event]) -> list[Event]:
        return [self.number(event) for event in events]


# ---- per item type ---------------------------------------------------------------------------


def _with_status(added: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """An item still being written says so, when its type has a status."""
    return {**added, "status": "in_progress"} if "status" in item else added


def _item_id(item: dict[str, Any]) -> str:
    return str(item.get("id") or item.get("call_id") or "")


def _message(item: dict[str, Any], output_index: int) -> Iterator[Event]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    for content_index, part in enumerate(item.get("content", [])):
        at = {**where, "content_index": content_index}
        kind = part.get("type")
        if kind == "output_text":
            text = part.get("text", "")
            logprobs = part.get("logprobs") or []
            yield {"type": "response.content_part.added", **at, "part": {**part, "text": "", "annotations": []}}
            for annotation_index, annotation in enumerate(part.get("annotations") or []):
                yield {
                    "type": "response.output_text.annotation.added",
                    **at,
                    "annotation_index": annotation_index,
                    "annotation": annotation,
                }
            for delta in chunks(text):
                yield {"type": "response.output_text.delta", **at, "delta": delta, "logprobs": []}
            yield {"type": "response.output_text.done", **at, "text": text, "logprobs": logprobs}
        elif kind == "refusal":
            refusal = part.get("refusal", "")
            yield {"type": "response.content_part.added", **at, "part": {**part, "refusal": ""}}
            for delta in chunks(refusal):
                yield {"type": "response.refusal.delta", **at, "delta": delta}
            yield {"type": "response.refusal.done", **at, "refusal": refusal}
        else:
            yield {"type": "response.content_part.added", **at, "part": part}
        yield {"type": "response.content_part.done", **at, "part": part}


def _arguments(item: dict[str, Any], output_index: int) -> Iterator[Event]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    arguments = item.get("arguments", "")
    for delta in chunks(arguments):
        yield {"type": "response.function_call_arguments.delta", **where, "delta": delta}
    yield {"type": "response.function_call_arguments.done", **where, "arguments": arguments}


def _input(item: dict[str, Any], output_index: int) -> Iterator[Event]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    text = item.get("input", "")
    for delta in chunks(text):
        yield {"type": "response.custom_tool_call_input.delta", **where, "delta": delta}
    yield {"type": "response.custom_tool_call_input.done", **where, "input": text}


def _commands(item: dict[str, Any], output_index: int) -> Iterator[Event]:
    for command_index, command in enumerate(item.get("action", {}).get("commands", [])):
        at = {"command_index": command_index, "output_index": output_index}
        yield {"type": "response.shell_call_command.added", **at, "command": ""}
        for delta in chunks(command):
            yield {"type": "response.shell_call_command.delta", **at, "delta": delta}
        yield {"type": "response.shell_call_command.done", **at, "command": command}


def _reasoning(item: dict[str, Any], output_index: int) -> Iterator[Event]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    for summary_index, part in enumerate(item.get("summary", [])):
        at = {**where, "summary_index": summary_index}
        text = part.get("text", "")
        yield {"type": "response.reasoning_summary_part.added", **at, "part": {**part, "text": ""}}
        for delta in chunks(text):
            yield {"type": "response.reasoning_summary_text.delta", **at, "delta": delta}
        yield {"type": "response.reasoning_summary_text.done", **at, "text": text}
        yield {"type": "response.reasoning_summary_part.done", **at, "part": part}
    for content_index, part in enumerate(item.get("content") or []):
        at = {**where, "content_index": content_index}
        text = part.get("text", "")
        for delta in chunks(text):
            yield {"type": "response.reasoning_text.delta", **at, "delta": delta}
        yield {"type": "response.reasoning_text.done", **at, "text": text}


def _mcp_list_tools(item: dict[str, Any], output_index: int) -> tuple[dict[str, Any], list[Event]]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    end = "response.mcp_list_tools.failed" if item.get("error") else "response.mcp_list_tools.completed"
    middle = [{"type": "response.mcp_list_tools.in_progress", **where}, {"type": end, **where}]
    return {**item, "tools": []}, middle


def _mcp_call(item: dict[str, Any], output_index: int) -> tuple[dict[str, Any], list[Event]]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    arguments = item.get("arguments", "")
    added = {k: v for k, v in item.items() if k not in ("output", "error")}
    middle: list[Event] = [{"type": "response.mcp_call.in_progress", **where}]
    middle += [{"type": "response.mcp_call_arguments.delta", **where, "delta": d} for d in chunks(arguments)]
    middle.append({"type": "response.mcp_call_arguments.done", **where, "arguments": arguments})
    failed = item.get("status") == "failed" or item.get("error")
    middle.append({"type": "response.mcp_call.failed" if failed else "response.mcp_call.completed", **where})
    return {**added, "arguments": "", "status": "in_progress"}, middle


def _code_interpreter(item: dict[str, Any], output_index: int) -> tuple[dict[str, Any], list[Event]]:
    where = {"item_id": _item_id(item), "output_index": output_index}
    code = item.get("code") or ""
    middle: list[Event] = [{"type": "response.code_interpreter_call.in_progress", **where}]
    middle += [{"type": "response.code_interpreter_call_code.delta", **where, "delta": d} for d in chunks(code)]
    middle.append({"type": "response.code_interpreter_call_code.done", **where, "code": code})
    middle.append({"type": "response.code_interpreter_call.interpreting", **where})
    middle.append({"type": "response.code_interpreter_call.completed", **where})
    return {**item, "code": "", "outputs": None, "status": "in_progress"}, middle


_HOSTED = {
    "mcp_list_tools": _mcp_list_tools,
    "mcp_call": _mcp_call,
    "code_interpreter_call": _code_interpreter,
}
"""Server-run tool items: their events between `output_item.added` and `.done`."""
