"""Helpers for the tool-kind tests: tool definitions, the client's side of each kind, replay."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
from openai.types.responses import Response, ResponseItem, ResponseOutputItem
from pydantic import TypeAdapter

from tests.support import adapter

PTC = {"type": "programmatic_tool_calling"}
PROGRAMMATIC = ["programmatic"]


def output_item() -> TypeAdapter[Any]:
    return adapter(ResponseOutputItem)


def listed_item() -> TypeAdapter[Any]:
    return adapter(ResponseItem)


CALL_TYPES = ("function_call", "custom_tool_call", "shell_call", "apply_patch_call", "local_shell_call")


def caller_of(item: Any) -> dict[str, Any] | None:
    caller = getattr(item, "caller", None)
    return caller.model_dump() if caller is not None else None


def answer(response: Response, handler: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """One answer per call item of the response: `handler(item)` gives the answer's own fields; the
    type, the call_id and the caller are added as the client copies them."""
    outputs = []
    for item in response.output:
        if item.type in CALL_TYPES:
            fields = handler(item)
            outputs.append(
                {"type": f"{item.type}_output", "call_id": item.call_id, **fields, "caller": caller_of(item)}
            )
    return outputs


def replay(response: Response) -> list[dict[str, Any]]:
    """The response's output as a client sends it back (`store: false`)."""
    return [item.model_dump(exclude_none=True) for item in response.output]


def final_text(response: Response) -> str:
    return response.output_text


def run_to_end(
    client: openai.OpenAI,
    first: str,
    tools: list[dict[str, Any]],
    handler: Callable[[Any], dict[str, Any]],
    *,
    store: bool = True,
    rounds: int = 10,
    **extra: Any,
) -> tuple[Response, list[Response]]:
    """Create, then answer every call until a response has none; each output item is validated
    with the SDK's output-item union on the way."""
    items: list[Any] = [{"role": "user", "content": first}]
    response = client.responses.create(model="m", input=items, tools=tools, store=store, **extra)  # type: ignore[arg-type]
    seen = [response]
    for _ in range(rounds):
        for item in response.output:
            output_item().validate_python(item.model_dump())
        outputs = answer(response, handler)
        if not outputs:
            return response, seen
        if store:
            response = client.responses.create(
                model="m",
                previous_response_id=response.id,
                input=outputs,
                tools=tools,
                **extra,  # type: ignore[arg-type]
            )
        else:
            items += replay(response) + outputs
            response = client.responses.create(model="m", input=items, tools=tools, store=False, **extra)  # type: ignore[arg-type]
        seen.append(response)
    raise AssertionError("the run did not end")


def as_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
