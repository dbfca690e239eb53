"""The Response object a create returns: every field the contract marks required, the request's
settings echoed, usage once it is finished."""

from __future__ import annotations

from typing import Any

from ptc_emulator.emulator.responses import usage
from ptc_emulator.emulator.wire.items import Item, dump
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus, echo_tools

__all__ = ["response_body"]


def _echo_choice(choice: Any) -> Any:
    if choice is None:
        return "auto"
    return choice if isinstance(choice, str) else dump(choice)


def response_body(
    request: CreateRequest,
    *,
    response_id: str,
    created_at: float,
    now: float,
    store: bool,
    output: list[dict[str, Any]],
    status: ResponseStatus,
    context: list[Item],
    error: dict[str, Any] | None = None,
    incomplete: dict[str, Any] | None = None,
    cached_tokens: int = 0,
    tools: list[dict[str, Any]] | None = None,
    definitions: str | None = None,
    conversation: str | None = None,
) -> dict[str, Any]:
    """`tools`, `definitions`: `echo_tools(request)` and its `usage.definitions_text`, if the caller
    already made them. `conversation`: the id in the request's `conversation` (`conversation_id`)."""
    tools = echo_tools(request) if tools is None else tools
    body = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "access_programs": request.access_programs.effective() if request.access_programs else None,
        "background": bool(request.background),
        "completed_at": float(int(now)) if status is ResponseStatus.COMPLETED else None,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": request.previous_response_id,
        "prompt_cache_key": request.prompt_cache_key,
        "reasoning": request.reasoning or {"effort": None, "summary": None},
        "safety_identifier": request.safety_identifier,
        "service_tier": request.service_tier or "default",
        "store": store,
        "temperature": 1.0 if request.temperature is None else request.temperature,
        "text": request.text or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": _echo_choice(request.tool_choice),
        "tools": tools,
        "top_logprobs": request.top_logprobs or 0,
        "top_p": 1.0 if request.top_p is None else request.top_p,
        "truncation": request.truncation or "disabled",
        "usage": usage.usage(
            instructions=request.instructions,
            tools=tools,
            input_items=context,
            output_items=output,
            cached_tokens=cached_tokens,
            definitions=definitions,
        )
        if status.finished
        else None,
        "user": request.user,
        "metadata": request.metadata or {},
    }
    if conversation is not None:
        body["conversation"] = {"id": conversation}
    return body
