"""OpenAI-compatible Chat Completions (`/chat/completions`), as Ollama, vLLM, llama.cpp's server,
LM Studio and LiteLLM serve it: streamed as `delta.content` chunks with
`stream_options.include_usage` (the usage in the last one), reasoning as `reasoning_content` (or
`reasoning`), a failure mid-stream as an `error` chunk."""

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

    def answer(self, data: dict[str, Any]) -> Answer:
        choices = data.get("choices") or []
        message = (choices[0] or {}).get("message") or {} if choices else {}
        answer = Answer(text=message.get("content") or "", model=data.get("model"))
        answer.reasoning = message.get("reasoning_content") or message.get("reasoning") or None
        for n, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            answer.calls.append(
                ToolCall(
                    str(call.get("id") or f"call_{n}"),
                    str(function.get("name") or ""),
                    arguments(function.get("arguments")),
                )
            )
        usage(answer, data.get("usage"))
        return answer

    async def stream(self, lines: AsyncIterator[str], on_delta: Delta | None) -> Answer:
        answer = Answer()
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for line in lines:
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except ValueError:
                raise Fault(messages.streamed_chunk_not_json()) from None
            if chunk.get("error"):  # what OpenAI-compatible servers send when they fail mid-stream
                failure = chunk["error"]
                message = failure.get("message") if isinstance(failure, dict) else failure
                raise Fault(messages.failed_mid_stream(snippet(str(message))))
            answer.model = chunk.get("model") or answer.model
            usage(answer, chunk.get("usage"))
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thought, str) and thought:
                    reasoning.append(thought)
                    if on_delta is not None:
                        on_delta("reasoning", thought)
                if delta.get("content"):
                    text.append(delta["content"])
                    if on_delta is not None:
                        on_delta("text", str(delta["content"]))
                for part in delta.get("tool_calls") or ():
                    slot = calls.setdefault(int(part.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
                    slot["id"] = str(part.get("id") or slot["id"])
                    function = part.get("function") or {}
                    slot["name"] += str(function.get("name") or "")
                    slot["arguments"] += arguments(function.get("arguments") or "")
        answer.text = "".join(text)
        answer.reasoning = "".join(reasoning) or None
        answer.calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], slot["arguments"])
            for index, slot in sorted(calls.items())
        ]
        return answer


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
