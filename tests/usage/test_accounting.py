"""Usage as the hosted runtime accounts it: cached tokens for a replayed prompt prefix, and the journal's
figures per response and per conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.emulator.responses.usage import count
from ptc_emulator.testing.server import PTCEmulator
from tests.conversations.conversations_support import conversations_client
from tests.support import js

LONG = " ".join(f"Rule {n}: answer with the figures the tools return, and nothing else." for n in range(110))
LOOKUP = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
SCENARIO = {
    "match": {"input": "(?i)^look (?P<what>\\w+) up"},
    "turns": [{"call": {"name": "lookup", "arguments": {"what": "{{ what }}"}}}, {"message": "Found {{ output }}."}],
}
PTC = [{"type": "function", "name": "add", "allowed_callers": ["programmatic"]}, {"type": "programmatic_tool_calling"}]


def served(tokens: int) -> int:
    """What the hosted prompt cache serves of a prefix this long (1,024 tokens at least, blocks of 128)."""
    return tokens - tokens % 128 if tokens >= 1024 else 0


@pytest.fixture
def accounting_client(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    ptc_emulator.add_scenario(SCENARIO)
    with conversations_client(ptc_emulator) as c:
        yield c


def answer(response: Any, output: str = '"it"') -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": item.call_id,
            "output": output,
            **({"caller": item.caller.model_dump()} if item.caller else {}),
        }
        for item in response.output
        if item.type == "function_call"
    ]


def cached(response: Any) -> int:
    return int(response.usage.input_tokens_details.cached_tokens)


def test_a_previous_response_id_chain_is_served_from_the_cache(
    ptc_emulator: PTCEmulator, accounting_client: openai.OpenAI
) -> None:
    assert count(LONG) > 1024
    first = accounting_client.responses.create(model="m", instructions=LONG, input="look stock up", tools=[LOOKUP])
    assert cached(first) == 0
    second = accounting_client.responses.create(
        model="m", instructions=LONG, previous_response_id=first.id, input=answer(first), tools=[LOOKUP]
    )
    assert cached(second) == served(first.usage.input_tokens) > 0  # type: ignore[union-attr]
    assert second.usage.input_tokens > cached(second)  # type: ignore[union-attr]
    figures = [e["figures"] for e in ptc_emulator.journal]
    assert [f["cached_tokens"] for f in figures] == [0, cached(second)]
    assert [f["total_tokens"] for f in figures] == [first.usage.total_tokens, second.usage.total_tokens]  # type: ignore[union-attr]


def test_a_store_false_replay_of_the_same_items_is_served_too(accounting_client: openai.OpenAI) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "look stock up"}]
    first = accounting_client.responses.create(model="m", instructions=LONG, input=items, tools=[LOOKUP], store=False)  # type: ignore[arg-type]
    items += [i.model_dump(exclude_none=True) for i in first.output] + answer(first)
    second = accounting_client.responses.create(model="m", instructions=LONG, input=items, tools=[LOOKUP], store=False)  # type: ignore[arg-type]
    assert cached(first) == 0
    assert cached(second) == served(first.usage.input_tokens)  # type: ignore[union-attr]


def test_a_changed_prefix_ends_what_is_served(ptc_emulator: PTCEmulator, accounting_client: openai.OpenAI) -> None:
    first = accounting_client.responses.create(model="m", instructions=LONG, input="look stock up", tools=[LOOKUP])
    # Other instructions: nothing of the prompt repeats (the tool list before them is short).
    other = accounting_client.responses.create(
        model="m", instructions=LONG + " Be brief.", previous_response_id=first.id, input=answer(first), tools=[LOOKUP]
    )
    assert cached(other) == 0
    # The same instructions and another question: the shared tools and instructions are served.
    again = accounting_client.responses.create(model="m", instructions=LONG, input="look price up", tools=[LOOKUP])
    echoed = ptc_emulator.journal[0]["response"]["tools"]  # the tools as the response states them
    system = count(json.dumps(echoed, separators=(",", ":"))) + count(LONG)
    assert cached(again) == served(system) > 0


def test_a_short_prompt_is_never_served(accounting_client: openai.OpenAI) -> None:
    first = accounting_client.responses.create(
        model="m", instructions="Be brief.", input="look stock up", tools=[LOOKUP]
    )
    second = accounting_client.responses.create(
        model="m", previous_response_id=first.id, input=answer(first), tools=[LOOKUP]
    )
    assert first.usage.input_tokens < 1024 and cached(second) == 0  # type: ignore[union-attr]


def test_the_cache_is_per_caller_scope(ptc_emulator: PTCEmulator, accounting_client: openai.OpenAI) -> None:
    accounting_client.responses.create(model="m", instructions=LONG, input="look stock up", tools=[LOOKUP])
    other = PTCEmulator(ptc_emulator.base_url)
    try:
        other.add_scenario(SCENARIO)
        response = other.client().responses.create(model="m", instructions=LONG, input="look stock up", tools=[LOOKUP])
        assert cached(response) == 0
    finally:
        other.reset()
        other.close()


@pytest.mark.ptc_strict(unused=False)  # an inline program: the module fixture's scenario is not needed here
def test_tool_traffic_of_a_program_does_not_break_the_replayed_prefix(accounting_client: openai.OpenAI) -> None:
    """A program's calls and their outputs are not model input, so a replay that carries a large one
    is served everything the model read before, and counts none of it."""
    items: list[dict[str, Any]] = [{"role": "user", "content": js("text(String(await tools.add({a: 1, b: 2})));")}]
    first = accounting_client.responses.create(model="m", instructions=LONG, input=items, tools=PTC, store=False)  # type: ignore[arg-type]
    big = json.dumps(list(range(3000)))
    items += [i.model_dump(exclude_none=True) for i in first.output] + answer(first, big)
    second = accounting_client.responses.create(model="m", instructions=LONG, input=items, tools=PTC, store=False)  # type: ignore[arg-type]
    assert second.output_text == ",".join(str(n) for n in range(3000))
    assert cached(second) == served(first.usage.input_tokens)  # type: ignore[union-attr]
    program = first.output[0]
    assert program.type == "program"
    result = second.output[0]
    assert result.type == "program_output"
    # The model read the program it wrote and the program_output, not the call or the output.
    expected = first.usage.input_tokens + count(program.code) + count(result.result)  # type: ignore[union-attr]
    assert second.usage.input_tokens == expected  # type: ignore[union-attr]
    assert second.usage.output_tokens == count(second.output_text)  # type: ignore[union-attr]


def test_a_conversation_is_served_like_a_chain(accounting_client: openai.OpenAI) -> None:
    conv = accounting_client.conversations.create()
    first = accounting_client.responses.create(
        model="m", instructions=LONG, conversation=conv.id, input="look stock up", tools=[LOOKUP]
    )
    second = accounting_client.responses.create(
        model="m", instructions=LONG, conversation=conv.id, input=answer(first), tools=[LOOKUP]
    )
    assert second.output_text == "Found it."
    assert cached(second) == served(first.usage.input_tokens) > 0  # type: ignore[union-attr]


def test_journal_figures_per_response_and_per_conversation(ptc_emulator: PTCEmulator) -> None:
    """Calls by kind and route, retries (a 500 the SDK retried), latency, tokens; one conversation."""
    ptc_emulator.add_scenario(
        {
            "match": {"input": "(?i)^audit"},
            "turns": [
                {"call": {"name": "lookup"}},
                {"program": "await tools.add({a: 1, b: 1}); text('done');", "fault": {"http_error": 500}},
                {"message": "Audited: {{ result }}."},
            ],
        }
    )
    client = ptc_emulator.client(max_retries=1)
    tools = [LOOKUP, *PTC]
    first = client.responses.create(model="m", input="audit", tools=tools)  # type: ignore[arg-type]
    second = client.responses.create(model="m", previous_response_id=first.id, input=answer(first), tools=tools)  # type: ignore[arg-type]
    third = client.responses.create(model="m", previous_response_id=second.id, input=answer(second), tools=tools)  # type: ignore[arg-type]
    assert third.output_text == "Audited: done."

    journal = ptc_emulator.journal
    assert [e["status"] for e in journal] == [200, 500, 200, 200]
    assert [e["figures"]["retries"] for e in journal] == [0, 0, 1, 0]
    assert [e["figures"]["calls"] for e in journal] == [
        {"function_call": {"direct": 1, "program": 0}},
        {},
        {"function_call": {"direct": 0, "program": 1}},
        {},
    ]
    assert all(e["figures"]["latency_ms"] > 0 for e in journal)
    assert {e["conversation"] for e in journal} == {first.id}
    (run,) = ptc_emulator.conversations
    assert run["responses"] == [first.id, second.id, third.id]
    assert (run["requests"], run["errors"], run["retries"]) == (4, 1, 1)
    assert (run["direct_tool_calls"], run["program_tool_calls"], run["programs_run"]) == (1, 1, 2)
    assert run["calls"] == {"function_call": {"direct": 1, "program": 1}}
    assert run["model_turns"] == 3
    assert run["input_tokens"] == sum(r.usage.input_tokens for r in (first, second, third))  # type: ignore[union-attr]
    assert (run["kept_out_bytes"], run["kept_out_tokens"]) == (len('"it"'), count('"it"'))  # add's output
    assert run["final_answer"] == "Audited: done."
    assert run["route"] == "programmatic"


def test_a_websocket_generate_false_request_warms_the_cache(ptc_emulator: PTCEmulator) -> None:
    with ptc_emulator.client(max_retries=0).responses.connect() as conn:
        conn.response.create(
            model="m", instructions=LONG, input=[{"role": "developer", "content": "Be brief."}], generate=False
        )
        warmed = _final(conn)
        assert warmed["output"] == [] and warmed["usage"]["input_tokens_details"]["cached_tokens"] == 0
        conn.response.create(model="m", instructions=LONG, input=js("text('warm');"), previous_response_id=warmed["id"])
        final = _final(conn)
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == served(warmed["usage"]["input_tokens"]) > 0


def _final(conn: Any) -> dict[str, Any]:
    while True:
        event = conn.recv().model_dump()
        assert event["type"] != "error", event
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            return dict(event["response"])
