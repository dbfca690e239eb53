"""Shared by the scenario tests: the guide's inventory tools and its client loop."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

OBJECT_SKU = {
    "type": "object",
    "properties": {"sku": {"type": "string"}},
    "required": ["sku"],
    "additionalProperties": False,
}


def _tool(name: str, field: str, *, strict: bool | None = None) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "type": "function",
        "name": name,
        "description": f"Return an object with sku (string) and {field} (number).",
        "parameters": OBJECT_SKU,
        "output_schema": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, field: {"type": "number"}},
            "required": ["sku", field],
            "additionalProperties": False,
        },
        "allowed_callers": ["programmatic"],
    }
    if strict is not None:
        tool["strict"] = strict
    return tool


def inventory_tools(*, strict: bool | None = None) -> list[dict[str, Any]]:
    """The guide's get_inventory and get_demand, programmatic only, and the hosted PTC tool."""
    return [
        _tool("get_inventory", "available_units", strict=strict),
        _tool("get_demand", "requested_units", strict=strict),
        {"type": "programmatic_tool_calling"},
    ]


def good_tools(arguments: dict[str, Any], name: str) -> dict[str, Any]:
    if name == "get_inventory":
        return {"sku": arguments["sku"], "available_units": 42}
    return {"sku": arguments["sku"], "requested_units": 31}


Implementation = Callable[[dict[str, Any], str], Any]


def run_agent(
    client: Any,
    text: str,
    tools: list[dict[str, Any]],
    implementation: Implementation = good_tools,
    *,
    model: str = "gpt-test",
    max_rounds: int = 10,
) -> list[Any]:
    """The guide's loop with `store: false`: every response until the one with a final message."""
    items: list[Any] = [{"role": "user", "content": text}]
    responses = []
    for _ in range(max_rounds):
        response = client.responses.create(model=model, store=False, input=items, tools=tools)
        responses.append(response)
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            if any(item.type == "message" for item in response.output) or response.status != "completed":
                return responses
            continue
        for call in calls:
            output = implementation(json.loads(call.arguments), call.name)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": output if isinstance(output, str) else json.dumps(output),
                    "caller": call.caller.model_dump() if call.caller else None,
                }
            )
    raise AssertionError(f"no final message after {max_rounds} rounds")
