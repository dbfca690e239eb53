"""One task run two ways, direct and programmatic, for the usage and comparison tests."""

from __future__ import annotations

import json
from typing import Any

import openai

QUESTION = "What are the total sales for EMEA?"

SALES = [
    {
        "order_id": f"ord_{n:05d}",
        "sku": f"sku_{n % 97:03d}",
        "amount": (n * 7919) % 1000 + 1,
        "note": f"order {n} shipped from warehouse {n % 7} in a standard box",
    }
    for n in range(900)
]
SALES_OUTPUT = json.dumps(SALES)
"""The tool output: over 100 KB of JSON."""

MATCH = {"input": "(?i)total sales for (?P<region>[A-Z]+)", "tools": ["fetch_sales"]}

DIRECT = {
    "name": "sales__direct",
    "match": MATCH,
    "turns": [
        {"call": {"name": "fetch_sales", "arguments": {"region": "{{ region }}"}}},
        {"message": "{{ region }}: {{ output | length }} orders, {{ output | sum(attribute='amount') }} in total."},
    ],
}

PTC = {
    "name": "sales__ptc",
    "priority": 1,
    "match": MATCH,
    "turns": [
        {
            "program": (
                "const rows = await tools.fetch_sales({region: {{ region }}});\n"
                "const total = rows.reduce((sum, row) => sum + row.amount, 0);\n"
                "text(JSON.stringify({region: {{ region }}, orders: rows.length, total}));"
            )
        },
        {"message": "{{ data.region }}: {{ data.orders }} orders, {{ data.total }} in total."},
    ],
}

EXPECTED = f"EMEA: {len(SALES)} orders, {sum(r['amount'] for r in SALES)} in total."

FETCH = {
    "type": "function",
    "name": "fetch_sales",
    "description": "Every order of a region, as a JSON array of {order_id, sku, amount, note}.",
    "parameters": {
        "type": "object",
        "properties": {"region": {"type": "string"}},
        "required": ["region"],
        "additionalProperties": False,
    },
}
DIRECT_TOOLS: list[dict[str, Any]] = [FETCH]
PTC_TOOLS: list[dict[str, Any]] = [
    {**FETCH, "allowed_callers": ["programmatic"]},
    {"type": "programmatic_tool_calling"},
]


def run_task(client: openai.OpenAI, tools: list[dict[str, Any]], *, store: bool = True) -> list[Any]:
    """The task to its final message: every response. Stored responses continue by
    previous_response_id; with `store=False` every request replays the items (the guide's loop)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    responses: list[Any] = []
    sent = 0
    while len(responses) < 6:
        if store:
            previous = responses[-1].id if responses else None
            response = client.responses.create(
                model="m",
                input=items[sent:],  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
                previous_response_id=previous,
            )
        else:
            response = client.responses.create(model="m", input=items, tools=tools, store=False)  # type: ignore[arg-type]
        responses.append(response)
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        sent = len(items)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return responses
        for call in calls:
            assert call.name == "fetch_sales"
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": SALES_OUTPUT,
                    **({"caller": call.caller.model_dump()} if call.caller else {}),
                }
            )
    raise AssertionError("no final message")
