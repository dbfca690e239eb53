"""The Responses API (`/responses`, `store: false`): streamed as its events (`response.output_text.delta`
as the text comes, a `reasoning` item's summary when its `output_item.done` arrives, the answer
in `response.completed`), a failure mid-stream as `response.failed` or `error`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.upstream.protocol import (
    Answer,
    Delta,
    Fault,
    ToolCall,
    UpstreamProtocol,
    arguments,
    json_schema_of,
    snippet,
    usage,
)
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = ["Responses", "responses_input"]


class Responses(UpstreamProtocol):
    name = "responses"
    title = "Responses (/responses, store: false)"
    path = "/responses"

    def request(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "input": responses_input(transcript), "store": False}
        if instructions:
            body["instructions"] = instructions
        if functions:
            body["tools"] = [
                {"type": "function", "name": f.name, "description": f.description, "parameters": f.parameters}
                for f in functions
            ]
            name = tool_choice.removeprefix("function:")
            body["tool_choice"] = {"type": "function", "name": name} if name != tool_choice else tool_choice
        return body

    def settings(self, effort: str | None, text_format: dict[str, Any] | None) -> dict[str, Any]:
        """`reasoning: {effort}` and `text: {format}`, as a Responses request spells them."""
        fields: dict[str, Any] = {}
        if effort is not None:
            fields["reasoning"] = {"effort": effort}
        schema = json_schema_of(text_format)
        if schema is not None:
            fields["text"] = {"format": schema}
        return fields

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def answer(self, data: dict[str, Any]) -> Answer:
        answer = Answer(model=data.get("model"))
        text: list[str] = []
        for item in data.get("output") or ():
            kind = item.get("type")
            if kind == "message":
                text.extend(
                    part.get("text", "") for part in item.get("content") or () if part.get("type") == "output_text"
                )
            elif kind == "function_call":
                answer.calls.append(
                    ToolCall(
                        str(item.get("call_id") or item.get("id") or ""),
                        str(item.get("name") or ""),
                        arguments(item.get("arguments")),
                    )
                )
            elif kind == "reasoning":
                summary = " ".join(part.get("text", "") for part in item.get("summary") or ())
                answer.reasoning = summary or answer.reasoning
        answer.text = "".join(text)
        usage(answer, data.get("usage"))
        return answer

    async def stream(self, lines: AsyncIterator[str], on_delta: Delta | None) -> Answer:
        """The text deltas as they come, a reasoning item's summary when it is done; the answer is
        the `response.completed` event's response (its output as the `output_item.done` events gave
        it, if the response comes without)."""
        done: list[dict[str, Any]] = []
        async for line in lines:
            if not line.startswith("data:"):
                continue
            try:
                event = json.loads(line[5:].strip())
            except ValueError:
                raise Fault(messages.streamed_event_not_json()) from None
            kind = event.get("type")
            if kind == "response.output_text.delta" and on_delta is not None:
                on_delta("text", str(event.get("delta") or ""))
            elif kind == "response.output_item.done":
                done.append(event["item"])
                if event["item"].get("type") == "reasoning" and on_delta is not None:
                    on_delta("reasoning", " ".join(part.get("text", "") for part in event["item"].get("summary") or ()))
            elif kind in ("response.completed", "response.incomplete"):
                final = event["response"]
                return self.answer(final if final.get("output") else {**final, "output": done})
            elif kind in ("response.failed", "error"):
                failure = (event.get("response") or {}).get("error") or event.get("error") or event
                said = failure.get("message") or messages.no_failure_message()
                raise Fault(messages.failed_mid_stream(snippet(str(said))))
        raise Fault(messages.stream_ended_early())


def responses_input(transcript: list[Entry]) -> list[dict[str, Any]]:
    """The transcript as Responses input items."""
    found: list[dict[str, Any]] = []
    for entry in transcript:
        if entry.kind == "message":
            found.append({"type": "message", "role": entry.role, "content": entry.text})
        elif entry.kind == "call":
            found.append(
                {"type": "function_call", "call_id": entry.call_id, "name": entry.name, "arguments": entry.text}
            )
        else:
            found.append({"type": "function_call_output", "call_id": entry.call_id, "output": entry.text})
    return found
