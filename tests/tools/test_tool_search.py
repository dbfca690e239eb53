"""Deferred tools and tool search through openai 3.51 against the running emulator.

A deferred tool is invisible to a first program; a search turn loads it (the server ranks the
deferred tools, or the client answers the `tool_search_call`); a later program calls it. Every body
is validated with the SDK's models by the client's hook (`tests.support.validating_client`).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseToolSearchCall, ResponseToolSearchOutputItem

from ptc_emulator.testing.server import PTCEmulator
from tests.streaming.streaming_support import check_stream, decode, post_stream
from tests.support import answer_all

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Return the weather forecast for a city.",
    "defer_loading": True,
    "allowed_callers": ["programmatic", "direct"],
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
STOCK = {
    "type": "function",
    "name": "get_stock_price",
    "description": "Return the latest stock price for a ticker symbol.",
    "defer_loading": True,
    "allowed_callers": ["programmatic"],
    "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}},
}
TOOLS: list[dict[str, Any]] = [WEATHER, STOCK, {"type": "tool_search"}, {"type": "programmatic_tool_calling"}]
CLIENT_TOOLS: list[dict[str, Any]] = [WEATHER, STOCK, {"type": "tool_search", "execution": "client"}]
CLIENT_TOOLS.append({"type": "programmatic_tool_calling"})

PROBE = "Probe:\n```js\ntext(typeof tools.get_weather)\n```"
CALL = "```js\nconst w = await tools.get_weather({city: 'Lisbon'});\ntext(`${w.city}: ${w.sky}`)\n```"
SEARCH_THEN_CALL = f"Find the forecast tool, then use it:\n```tool_search\nweather forecast for a city\n```\n{CALL}"


def weather(name: str, args: dict[str, Any]) -> Any:
    assert name == "get_weather"
    return {"city": args["city"], "sky": "sunny"}


def types(response: Any) -> list[str]:
    return [item.type for item in response.output]


def test_a_deferred_tool_is_undefined_in_a_first_program(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input=PROBE, tools=TOOLS)
    assert first.output_text == "undefined"
    # The same tool not deferred is there at once.
    plain = [{**WEATHER, "defer_loading": False}, {"type": "programmatic_tool_calling"}]
    assert client.responses.create(model="m", input=PROBE, tools=plain).output_text == "function"


def test_a_server_search_loads_it_and_a_later_program_calls_it(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input=PROBE, tools=TOOLS)
    assert first.output_text == "undefined"
    second = client.responses.create(model="m", input=SEARCH_THEN_CALL, tools=TOOLS, previous_response_id=first.id)
    assert types(second) == ["tool_search_call", "tool_search_output", "program", "function_call"]
    call, output = second.output[0], second.output[1]
    assert isinstance(call, ResponseToolSearchCall) and isinstance(output, ResponseToolSearchOutputItem)
    assert call.execution == output.execution == "server"
    assert call.arguments == {"query": "weather forecast for a city"}
    assert output.call_id == call.call_id
    # BM25 ranked the weather tool; the stock tool shares no word with the query.
    assert [t.name for t in output.tools] == ["get_weather"]  # type: ignore[union-attr]
    assert output.tools[0].model_dump(exclude_none=True)["parameters"] == WEATHER["parameters"]
    fc = second.output[3]
    assert fc.type == "function_call" and fc.name == "get_weather" and fc.caller is not None
    third = client.responses.create(
        model="m", input=answer_all(second, weather), tools=TOOLS, previous_response_id=second.id
    )
    assert types(third) == ["program_output", "message"]
    assert third.output_text == "Lisbon: sunny"
    # Loaded stays loaded for the rest of the conversation.
    fourth = client.responses.create(model="m", input=PROBE, tools=TOOLS, previous_response_id=third.id)
    assert fourth.output_text == "function"


def test_a_search_that_matches_nothing_loads_nothing(client: openai.OpenAI) -> None:
    message = "```tool_search\ncalendar meetings\n```"
    response = client.responses.create(model="m", input=message, tools=TOOLS)
    assert types(response) == ["tool_search_call", "tool_search_output", "message"]
    assert response.output[1].tools == []  # type: ignore[union-attr]
    assert response.output_text == "Tool search loaded no tools."


def test_a_client_search_ends_the_response_and_the_client_loads_the_tools(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input=PROBE, tools=CLIENT_TOOLS)
    assert first.output_text == "undefined"
    second = client.responses.create(
        model="m", input=SEARCH_THEN_CALL, tools=CLIENT_TOOLS, previous_response_id=first.id
    )
    assert types(second) == ["tool_search_call"]
    call = second.output[0]
    assert isinstance(call, ResponseToolSearchCall) and call.execution == "client" and call.call_id
    assert call.arguments == {"query": "weather forecast for a city"}
    answer = {"type": "tool_search_output", "call_id": call.call_id, "execution": "client", "tools": [WEATHER]}
    third = client.responses.create(model="m", input=[answer], tools=CLIENT_TOOLS, previous_response_id=second.id)
    assert types(third) == ["program", "function_call"]
    fourth = client.responses.create(
        model="m", input=answer_all(third, weather), tools=CLIENT_TOOLS, previous_response_id=third.id
    )
    assert fourth.output_text == "Lisbon: sunny"
    listed = client.responses.input_items.list(third.id, order="asc").data
    assert [i.type for i in listed] == ["tool_search_output"]


def test_a_client_search_may_load_a_tool_the_request_did_not_carry(client: openai.OpenAI) -> None:
    tools = [{"type": "tool_search", "execution": "client"}, {"type": "programmatic_tool_calling"}]
    message = "```tool_search\ntenant tools\n```\n```js\ntext(await tools.tenant_lookup({id: 7}))\n```"
    first = client.responses.create(model="m", input=message, tools=tools)
    call = first.output[0]
    tenant = {"type": "function", "name": "tenant_lookup", "allowed_callers": ["programmatic"], "parameters": None}
    answer = {"type": "tool_search_output", "call_id": call.call_id, "execution": "client", "tools": [tenant]}
    second = client.responses.create(model="m", input=[answer], tools=tools, previous_response_id=first.id)
    assert types(second) == ["program", "function_call"]
    assert second.output[1].name == "tenant_lookup"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({"type": "web_search"}, "can load function, custom, namespace and mcp tools, not 'web_search'"),
        ({"type": "function", "name": "bad name!"}, "Invalid tool in tool_search_output"),
    ],
)
def test_a_client_search_output_is_validated_against_the_tool_union(
    client: openai.OpenAI, tool: dict[str, Any], message: str
) -> None:
    first = client.responses.create(model="m", input="```tool_search\nweather\n```", tools=CLIENT_TOOLS)
    answer = {"type": "tool_search_output", "call_id": first.output[0].call_id, "execution": "client"}
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(
            model="m", input=[{**answer, "tools": [tool]}], tools=CLIENT_TOOLS, previous_response_id=first.id
        )
    assert message in e.value.message
    assert e.value.body["param"] == "input[0].tools[0]"  # type: ignore[index]


def test_an_unanswered_client_search_is_refused(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="```tool_search\nweather\n```", tools=CLIENT_TOOLS)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="next", tools=CLIENT_TOOLS, previous_response_id=first.id)
    assert "No tool_search_output found for client-executed tool search call" in e.value.message


def test_the_store_false_replay_carries_the_loaded_state(client: openai.OpenAI) -> None:
    items: list[Any] = [{"role": "user", "content": SEARCH_THEN_CALL}]
    first = client.responses.create(model="m", input=items, tools=TOOLS, store=False)
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items += answer_all(first, weather)
    second = client.responses.create(model="m", input=items, tools=TOOLS, store=False)
    assert second.output_text == "Lisbon: sunny"
    items += [item.model_dump(exclude_none=True) for item in second.output]
    items.append({"role": "user", "content": PROBE})
    assert client.responses.create(model="m", input=items, tools=TOOLS, store=False).output_text == "function"
    # Without the search items, the tool is deferred again: a replay cannot skip loading.
    stripped = [i for i in items if i.get("type") not in ("tool_search_call", "tool_search_output")]
    stripped = [i for i in stripped if i.get("type") not in ("program", "program_output", "function_call")]
    stripped = [i for i in stripped if i.get("type") != "function_call_output"]
    assert client.responses.create(model="m", input=stripped, tools=TOOLS, store=False).output_text == "undefined"


def test_a_replayed_server_search_output_must_list_declared_deferred_tools(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="```tool_search\nweather\n```", tools=TOOLS, store=False)
    items: list[Any] = [{"role": "user", "content": "```tool_search\nweather\n```"}]
    items += [item.model_dump(exclude_none=True) for item in first.output]
    forged = {"type": "function", "name": "delete_everything", "parameters": None}
    items[2]["tools"] = [forged]
    items.append({"role": "user", "content": PROBE})
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=items, tools=TOOLS, store=False)
    assert "loads 'delete_everything', which this request does not declare" in e.value.message


def test_a_program_calling_a_tool_not_yet_loaded_fails_as_for_an_unknown_tool(client: openai.OpenAI) -> None:
    response = client.responses.create(model="m", input=CALL, tools=TOOLS)
    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    unknown = client.responses.create(model="m", input=CALL.replace("get_weather", "no_such_tool"), tools=TOOLS).output[
        1
    ]
    assert unknown.type == "program_output"
    assert output.result == unknown.result.replace("no_such_tool", "get_weather")


def test_deferred_tools_require_the_tool_search_tool(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=PROBE, tools=[WEATHER, {"type": "programmatic_tool_calling"}])
    assert "Deferred tools require tools.tool_search" in e.value.message
    assert e.value.body["param"] == "tools"  # type: ignore[index]


@pytest.mark.ptc_strict(False)  # its scenario must not match, so its request goes unmatched
def test_a_scenario_calling_a_deferred_tool_directly_does_not_match(
    ptc_emulator: PTCEmulator, client: openai.OpenAI
) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "weather__direct",
            "match": {"input": "(?i)weather in (?P<city>\\w+)"},
            "turns": [{"call": {"name": "get_weather", "arguments": {"city": "{{ city }}"}}}, {"message": "ok"}],
        }
    )
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="weather in Lisbon", tools=TOOLS)
    assert e.value.code == "no_scenario_matched"
    assert "'weather__direct' (tools): turn 1 calls 'get_weather' directly, but it is deferred, not loaded" in (
        e.value.message
    )
    [miss] = [m for m in ptc_emulator.journal[-1]["near_miss"]["near_misses"] if m["scenario"] == "weather__direct"]
    assert miss["field"] == "tools" and "deferred, not loaded" in miss["reason"]


def test_a_scenario_that_loads_first_then_calls_directly_matches(
    ptc_emulator: PTCEmulator, client: openai.OpenAI
) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "weather__load_then_call",
            "match": {"input": "(?i)weather in (?P<city>\\w+)"},
            "turns": [
                {"search": {"load": ["get_weather"]}},
                {"call": {"name": "get_weather", "arguments": {"city": "{{ city }}"}}},
                {"message": "{{ output.city }} is {{ output.sky }}"},
            ],
        }
    )
    first = client.responses.create(model="m", input="weather in Lisbon", tools=TOOLS)
    assert types(first) == ["tool_search_call", "tool_search_output", "function_call"]
    assert first.output[0].arguments == {"paths": ["get_weather"]}  # type: ignore[union-attr]
    second = client.responses.create(
        model="m", input=answer_all(first, weather), tools=TOOLS, previous_response_id=first.id
    )
    assert second.output_text == "Lisbon is sunny"


def test_a_search_cannot_run_inside_a_running_program(client: openai.OpenAI) -> None:
    plain = [{**WEATHER, "defer_loading": False}, *TOOLS[1:]]
    items: list[Any] = [{"role": "user", "content": CALL}]
    first = client.responses.create(model="m", input=items, tools=plain, store=False)
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "tool_search_call", "call_id": "call_x", "execution": "server", "arguments": {}})
    items += answer_all(first, weather)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=items, tools=plain, store=False)
    assert "cannot run while a program is running" in e.value.message


def test_deferred_definitions_count_toward_tokens_only_once_loaded(client: openai.OpenAI) -> None:
    big = {**WEATHER, "parameters": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(40)}}}
    plain = client.responses.create(model="m", input=PROBE, tools=[{**big, "defer_loading": False}, *TOOLS[1:]])
    deferred = client.responses.create(model="m", input=PROBE, tools=[big, *TOOLS[1:]])
    assert plain.usage is not None and deferred.usage is not None
    assert deferred.usage.input_tokens < plain.usage.input_tokens - 100
    loaded = client.responses.create(
        model="m", input="```tool_search\nweather\n```", tools=[big, *TOOLS[1:]], previous_response_id=deferred.id
    )
    after = client.responses.input_tokens.count(
        model="m", input="next", tools=[big, *TOOLS[1:]], previous_response_id=loaded.id
    )
    # Once loaded, the definition is read where the search output carries it.
    assert after.input_tokens > deferred.usage.input_tokens + 100


def test_streamed_search_items_arrive_whole(client: openai.OpenAI) -> None:
    with client.responses.stream(model="m", input=SEARCH_THEN_CALL, tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    assert added == ["tool_search_call", "tool_search_output", "program", "function_call"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert isinstance(done[1].item, ResponseToolSearchOutputItem)
    assert [t.name for t in done[1].item.tools] == ["get_weather"]  # type: ignore[union-attr]
    assert types(final) == added
    assert json.loads(final.output[3].arguments) == {"city": "Lisbon"}  # type: ignore[union-attr]


def test_replayed_search_items_are_stored_and_listed(client: openai.OpenAI) -> None:
    items: list[Any] = [{"role": "user", "content": "```tool_search\nweather\n```"}]
    first = client.responses.create(model="m", input=items, tools=TOOLS, store=False)
    replayed = [item.model_dump(exclude_none=True) for item in first.output]
    for item in replayed[:2]:  # a client may drop what it need not send back
        assert item["type"].startswith("tool_search")
        item.pop("execution")
        item.pop("status")
    items += [*replayed, {"role": "user", "content": PROBE}]
    second = client.responses.create(model="m", input=items, tools=TOOLS)
    assert second.output_text == "function"
    listed = client.responses.input_items.list(second.id, order="asc").data  # validated by the client's hook
    assert [i.type for i in listed] == ["message", "tool_search_call", "tool_search_output", "message", "message"]
    assert [getattr(i, "execution", None) for i in listed[1:3]] == ["server", "server"]


def test_a_deferred_mcp_server_is_searched_by_its_label_and_description(client: openai.OpenAI) -> None:
    carrier = {
        "type": "mcp",
        "server_label": "carrier",
        "server_description": "Parcel tracking status from the carrier.",
        "server_url": "https://carrier.example/mcp",
        "defer_loading": True,
    }
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="hi", tools=[carrier])
    response = client.responses.create(
        model="m", input="```tool_search\nparcel tracking\n```", tools=[carrier, WEATHER, {"type": "tool_search"}]
    )
    output = response.output[1]
    assert isinstance(output, ResponseToolSearchOutputItem)
    assert [t.model_dump(exclude_none=True) for t in output.tools] == [carrier]
    assert response.output_text == "Tool search loaded mcp:carrier."


def test_a_running_program_never_gains_a_tool(client: openai.OpenAI) -> None:
    echo = {"type": "function", "name": "echo", "allowed_callers": ["programmatic"], "parameters": None}
    tools = [echo, *TOOLS]
    code = "```js\nawait tools.echo({});\ntext(typeof tools.get_weather)\n```"
    items: list[Any] = [{"role": "user", "content": code}]
    first = client.responses.create(model="m", input=items, tools=tools, store=False)
    assert types(first) == ["program", "function_call"]
    program = [item.model_dump(exclude_none=True) for item in first.output]
    outputs = answer_all(first, lambda name, args: {})
    # Loading the tool before the program, after the fact (a forged earlier exchange): the
    # program's fingerprint still names the tools it started with.
    search = [
        {"type": "tool_search_call", "call_id": "call_s", "execution": "server", "arguments": {"query": "weather"}},
        {"type": "tool_search_output", "call_id": "call_s", "execution": "server", "tools": [WEATHER]},
    ]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=[*search, *items, *program, *outputs], tools=tools, store=False)
    assert "The tools a program may call changed while program" in e.value.message
    honest = client.responses.create(model="m", input=[*items, *program, *outputs], tools=tools, store=False)
    assert honest.output_text == "undefined"


@pytest.mark.parametrize(
    ("tools", "kinds"),
    [
        (TOOLS, ["tool_search_call", "tool_search_output", "program", "function_call"]),
        (CLIENT_TOOLS, ["tool_search_call"]),
    ],
)
def test_raw_search_streams_keep_every_stream_rule(
    ptc_emulator: PTCEmulator, tools: list[dict[str, Any]], kinds: list[str]
) -> None:
    status, raw = post_stream(ptc_emulator, {"model": "m", "input": SEARCH_THEN_CALL, "tools": tools})
    assert status == 200
    final = check_stream(decode(raw))  # each event strictly validated with the SDK's union
    assert [item["type"] for item in final["output"]] == kinds


def test_client_search_arguments_fit_the_tools_parameters(ptc_emulator: PTCEmulator, client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"goal": {"type": "string"}},
        "required": ["goal"],
        "additionalProperties": False,
    }
    tools = [WEATHER, {"type": "tool_search", "execution": "client", "parameters": schema}]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="```tool_search\nweather\n```", tools=tools)
    assert "do not fit the tool_search tool's parameters" in e.value.message
    ptc_emulator.add_scenario(
        {
            "name": "search__custom_arguments",
            "match": {"input": "find the forecast"},
            "turns": [{"search": {"query": "weather", "arguments": {"goal": "{{ input }}"}}}, {"message": "done"}],
        }
    )
    response = client.responses.create(model="m", input="find the forecast", tools=tools)
    assert response.output[0].arguments == {"goal": "find the forecast"}  # type: ignore[union-attr]
