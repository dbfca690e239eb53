"""OpenAI-compatible Chat Completions (`/chat/completions`), as Ollama, vLLM, llama.cpp's server,
LM Studio and LiteLLM serve it: streamed as `delta.content` chunks with
`stream_options.include_usage` (the usage in the last one), reasoning as `reasoning_content` (or
`reasoning`), a failure mid-stream as an `error` chunk, the end as `data: [DONE]`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.upstream.protocol import (
    MAX_CALLS,
    Answer,
    Delta,
    Fault,
    ToolCall,
    UpstreamProtocol,
    json_schema_of,
    words,
)
from ptc_emulator.emulator.model.upstream.reading import Malformed, Shape, parse
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = ["ChatCompletions", "chat_messages"]


class ChatCompletions(UpstreamProtocol):
    name = "chat"
    title = "Chat Completions (/chat/completions)"
    path = "/chat/completions"

    def request(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": chat_messages(instructions, transcript)}
        if functions:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
                }
                for f in functions
            ]
            name = tool_choice.removeprefix("function:")
            body["tool_choice"] = (
                {"type": "function", "function": {"name": name}} if name != tool_choice else tool_choice
            )
        return body

    def settings(self, effort: str | None, text_format: dict[str, Any] | None) -> dict[str, Any]:
        """`reasoning_effort`, and `response_format` as `{type: json_schema, json_schema: {name, schema, ...}}`."""
        fields: dict[str, Any] = {}
        if effort is not None:
            fields["reasoning_effort"] = effort
        schema = json_schema_of(text_format)
        if schema is not None:
            fields["response_format"] = {
                "type": "json_schema",
                "json_schema": {k: v for k, v in schema.items() if k != "type"},
            }
        return fields

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True, "stream_options": {"include_usage": True}}

    def answer(self, data: Any) -> Answer:
        shape = Shape(messages.answered_body())
        body = shape.object(data, "(the body)")
        choices = shape.objects(body.get("choices"), "choices")
        if not choices:
            raise Fault(messages.no_choices())
        message = shape.object(choices[0].get("message"), "choices[0].message")
        answer = Answer(
            text=shape.string(message.get("content"), "choices[0].message.content"),
            model=shape.string(body.get("model"), "model") or None,
            stopped=_stopped(choices[0].get("finish_reason"), streamed=False),
            refusal=shape.string(message.get("refusal"), "choices[0].message.refusal"),
        )
        for name in "reasoning_content", "reasoning":
            answer.reasoning = answer.reasoning or shape.string(message.get(name), f"choices[0].message.{name}") or None
        for n, call in enumerate(shape.objects(message.get("tool_calls"), "choices[0].message.tool_calls")):
            where = f"choices[0].message.tool_calls[{n}]"
            function = shape.object(call.get("function"), f"{where}.function")
            answer.calls.append(
                ToolCall(
                    shape.string(call.get("id"), f"{where}.id") or f"call_{n}",
                    shape.string(function.get("name"), f"{where}.function.name"),
                    shape.arguments(function.get("arguments"), f"{where}.function.arguments"),
                )
            )
        shape.usage(answer, body.get("usage"), "usage")
        return answer

    async def stream(self, events: AsyncIterator[bytes], on_delta: Delta | None) -> Answer:
        """The chunks of choice 0 until `[DONE]`; a stream that ends before it (and before a
        `finish_reason`) was cut short, which is a `Fault`, not an answer. So is one that reaches
        `[DONE]` without choice 0 ever giving a `finish_reason`: nothing said it finished. So is
        one whose choice 0 gives two different `finish_reason`s (`length`, then `stop`): which one
        is true is not known, and keeping the last said `completed` of a cut answer (the same one
        given again is taken)."""
        shape = Shape(messages.streamed_chunk())
        answer = Answer()
        text: list[str] = []
        reasoning: list[str] = []
        refusal: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finished = False
        reason: Any = None
        async for data in events:
            if data.strip() == b"[DONE]":
                finished = True
                break
            try:
                chunk = shape.object(await parse(data), "(the chunk)")
            except Malformed as e:
                raise Fault(e.said(messages.streamed_chunk())) from None
            if chunk.get("error"):  # what OpenAI-compatible servers send when they fail mid-stream
                failure = chunk["error"]
                message = failure.get("message") if isinstance(failure, dict) else failure
                raise Fault.quoting(messages.failed_mid_stream, words(message))
            answer.model = shape.string(chunk.get("model"), "model") or answer.model
            shape.usage(answer, chunk.get("usage"), "usage")
            for n, choice in enumerate(shape.objects(chunk.get("choices"), "choices")):
                if shape.index(choice.get("index"), f"choices[{n}].index", 0) != 0:
                    continue  # the one choice asked for is the first
                said = choice.get("finish_reason")
                done_before = reason is not None
                if said is not None:
                    if reason is not None and said != reason:  # `length`, then `stop`: it was cut all the same
                        raise Fault.quoting(messages.finish_reasons_differ, f"{_shown(reason)}, then {_shown(said)}")
                    finished, reason = True, said
                delta = shape.object(choice.get("delta", {}), f"choices[{n}].delta")
                if done_before:  # the choice said it was done: nothing more of it is taken
                    _nothing_after(shape, delta, n)
                    continue
                for name in "reasoning_content", "reasoning":
                    thought = shape.string(delta.get(name), f"choices[{n}].delta.{name}")
                    if thought:
                        reasoning.append(thought)
                        if on_delta is not None:
                            on_delta("reasoning", thought)
                        break
                refusal.append(shape.string(delta.get("refusal"), f"choices[{n}].delta.refusal"))
                piece = shape.string(delta.get("content"), f"choices[{n}].delta.content")
                if piece:
                    text.append(piece)
                    if on_delta is not None:
                        on_delta("text", piece)
                for m, part in enumerate(shape.objects(delta.get("tool_calls"), f"choices[{n}].delta.tool_calls")):
                    where = f"choices[{n}].delta.tool_calls[{m}]"
                    index = shape.index(part.get("index"), f"{where}.index", len(calls))
                    slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                    if len(calls) > MAX_CALLS:  # refused at the call past the limit, not held to the end
                        raise Fault(messages.too_many_calls(len(calls), MAX_CALLS))
                    given = shape.string(part.get("id"), f"{where}.id")
                    if given and slot["id"] and given != slot["id"]:  # two calls at one index
                        raise Fault(messages.call_ids_differ(index, slot["id"][:60], given[:60]))
                    slot["id"] = given or slot["id"]
                    function = shape.object(part.get("function", {}), f"{where}.function")
                    slot["name"] += shape.string(function.get("name"), f"{where}.function.name")
                    if function.get("arguments") is not None:
                        slot["arguments"] += shape.arguments(function["arguments"], f"{where}.function.arguments")
        if not finished:
            raise Fault(messages.stream_unfinished())
        if reason is None:  # [DONE] came, but nothing said the answer finished: it was cut
            raise Fault(messages.stream_without_finish_reason())
        answer.text = "".join(text)
        answer.reasoning = "".join(reasoning) or None
        answer.refusal = "".join(refusal)
        answer.stopped = _stopped(reason, streamed=True)
        answer.calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], slot["arguments"])
            for index, slot in sorted(calls.items())
        ]
        return answer


def _nothing_after(shape: Shape, delta: dict[str, Any], n: int) -> None:
    """A delta of a choice already done: empty (a repeated `finish_reason`, `{}`), or the `Fault`
    naming the field it brought (`messages.after_finish_reason`)."""
    for name in ("content", "reasoning_content", "reasoning", "refusal"):
        if shape.string(delta.get(name), f"choices[{n}].delta.{name}"):
            raise Fault(messages.after_finish_reason(name))
    if shape.objects(delta.get("tool_calls"), f"choices[{n}].delta.tool_calls"):
        raise Fault(messages.after_finish_reason("tool_calls"))


FINISHED = ("stop", "tool_calls", "function_call")
"""The `finish_reason`s of a choice the upstream finished."""

CUT = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""The `finish_reason`s of a choice cut short, as the response's `incomplete_details.reason`."""


def _stopped(finish_reason: Any, *, streamed: bool) -> str | None:
    """A choice's `finish_reason` as the response's `incomplete_details.reason`: `length` (the
    upstream's token limit cut the answer) is `max_output_tokens`, `content_filter` is
    `content_filter`, as the hosted Responses API says them; `stop`, `tool_calls` and
    `function_call` finished it (None). Any other value is a `Fault` naming it: what it means is
    not known, so the answer is not taken as finished. A whole answer without one (null) is
    taken as finished (its body came whole); a stream without one is not (`stream` faults first)."""
    if finish_reason in FINISHED or (finish_reason is None and not streamed):
        return None
    if isinstance(finish_reason, str) and finish_reason in CUT:
        return CUT[finish_reason]
    raise Fault.quoting(messages.unknown_finish_reason, _shown(finish_reason))


def _shown(finish_reason: Any) -> str:
    """A `finish_reason` as a message shows it: a string as it is, anything else as Python writes it."""
    return finish_reason if isinstance(finish_reason, str) else repr(finish_reason)


def chat_messages(instructions: str | None, transcript: list[Entry]) -> list[dict[str, Any]]:
    """The transcript as Chat Completions messages: a call joins the assistant message before it."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for entry in transcript:
        if entry.kind == "message":
            messages.append({"role": entry.role, "content": entry.text})
        elif entry.kind == "call":
            call = {"id": entry.call_id, "type": "function", "function": {"name": entry.name, "arguments": entry.text}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                if last.get("content") == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": entry.call_id, "content": entry.text})
    return messages
