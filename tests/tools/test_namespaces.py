"""Namespace tools through openai 3.51: inner functions called directly carry `namespace`,
programs call them as `tools.<namespace>.<function>(...)`, `defer_loading` applies per function,
and the overview article's `shipping` example runs as the article writes it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseToolSearchOutputItem

from tests.support import answer_all

ETA = {
    "type": "function",
    "name": "get_delivery_eta",
    "description": "Return the ETA for an order.",
    "defer_loading": True,
    "parameters": {
        "type": "object",
        "required": ["order_id"],
        "properties": {"order_id": {"type": "string"}},
        "additionalProperties": False,
    },
}
# The overview article's example, as it is written (its description translated back to English).
SHIPPING = {
    "type": "namespace",
    "name": "shipping",
    "description": "Order tracking and delivery tools.",
    "tools": [ETA],
}


def eta(name: str, args: dict[str, Any]) -> Any:
    assert name == "get_delivery_eta"
    return {"order_id": args["order_id"], "eta": "2026-12-04"}


def test_the_overview_shipping_example_runs(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="gpt-5.6",
        input="Quando o pedido A-104 chegará?",
        tools=[SHIPPING, {"type": "tool_search"}],
    )
    assert [i.type for i in response.output] == ["tool_search_call", "tool_search_output", "function_call"]
    search = response.output[1]
    assert isinstance(search, ResponseToolSearchOutputItem)
    [loaded] = search.tools
    assert loaded.type == "namespace" and loaded.name == "shipping"
    assert [t.name for t in loaded.tools] == ["get_delivery_eta"]
    call = response.output[2]
    assert call.type == "function_call"
    assert (call.namespace, call.name, json.loads(call.arguments)) == (
        "shipping",
        "get_delivery_eta",
        {"order_id": "A-104"},
    )
    final = client.responses.create(
        model="gpt-5.6",
        input=[
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": json.dumps(eta(call.name, {"order_id": "A-104"})),
            }
        ],
        tools=[SHIPPING, {"type": "tool_search"}],
        previous_response_id=response.id,
    )
    assert final.output_text == "Order A-104 is expected on 2026-12-04."


PTC_SHIPPING = {
    "type": "namespace",
    "name": "shipping",
    "description": "Order tracking and delivery tools.",
    "tools": [
        {**ETA, "allowed_callers": ["programmatic"]},
        {
            "type": "function",
            "name": "get_carrier",
            "description": "Return the carrier of an order.",
            "allowed_callers": ["programmatic", "direct"],
        },
    ],
}
PTC_TOOLS = [PTC_SHIPPING, {"type": "tool_search"}, {"type": "programmatic_tool_calling"}]
PROBE = "```js\ntext(typeof tools.shipping.get_carrier + ' ' + typeof tools.shipping.get_delivery_eta)\n```"
CALL = "```js\nconst e = await tools.shipping.get_delivery_eta({order_id: 'A-104'});\ntext(e.eta)\n```"


def test_defer_loading_applies_per_function_of_a_namespace(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input=PROBE, tools=PTC_TOOLS)
    assert first.output_text == "function undefined"
    second = client.responses.create(
        model="m",
        input=f"```tool_search\nload: shipping.get_delivery_eta\n```\n{CALL}",
        tools=PTC_TOOLS,
        previous_response_id=first.id,
    )
    kinds = [i.type for i in second.output]
    assert kinds == ["tool_search_call", "tool_search_output", "program", "function_call"]
    call = second.output[3]
    assert call.type == "function_call" and call.namespace == "shipping" and call.name == "get_delivery_eta"
    assert call.caller is not None and call.caller.type == "program"
    third = client.responses.create(
        model="m", input=answer_all(second, eta), tools=PTC_TOOLS, previous_response_id=second.id
    )
    assert third.output_text == "2026-12-04"
    again = client.responses.create(model="m", input=PROBE, tools=PTC_TOOLS, previous_response_id=third.id)
    assert again.output_text == "function function"


def test_a_namespace_with_no_deferred_function_is_callable_at_once(client: openai.OpenAI) -> None:
    tools = [{**PTC_SHIPPING, "tools": [{**ETA, "defer_loading": None, "allowed_callers": ["programmatic"]}]}]
    tools.append({"type": "programmatic_tool_calling"})
    response = client.responses.create(model="m", input=CALL, tools=tools)
    assert [i.type for i in response.output] == ["program", "function_call"]
    assert response.output[1].namespace == "shipping"  # type: ignore[union-attr]


def test_a_namespaced_program_call_replays_with_store_false(client: openai.OpenAI) -> None:
    items: list[Any] = [{"role": "user", "content": f"```tool_search\ndelivery eta\n```\n{CALL}"}]
    first = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    items += [i.model_dump(exclude_none=True) for i in first.output]
    items += answer_all(first, eta)
    second = client.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    assert second.output_text == "2026-12-04"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            [{"type": "function", "name": "shipping"}, PTC_SHIPPING, {"type": "tool_search"}],
            "both a function tool and a namespace",
        ),
        ([PTC_SHIPPING, PTC_SHIPPING, {"type": "tool_search"}], "Duplicate namespace name: 'shipping'"),
        ([{**SHIPPING, "description": None}, {"type": "tool_search"}], "description"),
    ],
)
def test_bad_namespaces_are_refused(client: openai.OpenAI, tools: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="hi", tools=tools)
    assert message in e.value.message


MISSING_NAMESPACE = (
    "Missing namespace for function_call 'get_delivery_eta'. It does not exist in the default namespace. "
    "Round-trip the model's function_call item with its namespace field included."
)


def _without_namespace(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """`items` with the namespace dropped from its function_call, and that call's index."""
    index = next(n for n, i in enumerate(items) if i.get("type") == "function_call")
    assert items[index]["namespace"] == "shipping"
    return [*items[:index], {k: v for k, v in items[index].items() if k != "namespace"}, *items[index + 1 :]], index


@pytest.mark.parametrize(
    ("tools", "text"),
    [
        ([SHIPPING, {"type": "tool_search"}], "Quando o pedido A-104 chegará?"),  # deferred, loaded by a search
        (  # not deferred: a program calls it at once
            [
                {**PTC_SHIPPING, "tools": [{**ETA, "defer_loading": None, "allowed_callers": ["programmatic"]}]},
                {"type": "programmatic_tool_calling"},
            ],
            CALL,
        ),
    ],
    ids=["deferred", "direct-member"],
)
def test_a_namespace_members_call_replayed_without_its_namespace_is_the_hosted_400(
    client: openai.OpenAI, ptc_emulator: Any, tools: list[dict[str, Any]], text: str
) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": text}]
    first = client.responses.create(model="m", input=items, tools=tools, store=False)
    items += [i.model_dump(exclude_none=True) for i in first.output]
    items += answer_all(first, eta)
    assert client.responses.create(model="m", input=items, tools=tools, store=False).status == "completed"
    stripped, index = _without_namespace(items)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=stripped, tools=tools, store=False)
    assert caught.value.body == {
        "message": MISSING_NAMESPACE,
        "type": "invalid_request_error",
        "param": f"input[{index}].namespace",
        "code": None,
    }
    raw = httpx.post(
        ptc_emulator.base_url + "/responses",
        json={"model": "m", "input": stripped, "tools": tools, "store": False},
        headers={"Authorization": "Bearer sk-test"},
    )
    assert (raw.status_code, raw.json()["error"]) == (400, caught.value.body)
