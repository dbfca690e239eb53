"""Token counting and usage accounting (emulator/responses/usage.py), without a server: counts are
the o200k tokenizer's own, a program's tool traffic is not model input, and the prompt cache
serves nothing below 1,024 tokens, then whole blocks of 128."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ptc_emulator.emulator.responses import usage
from tests.support import PTC_TOOLS, js
from tests.unit.fake_runner import FakeProgram, FakeRunner

PROGRAM_CALLER = {"type": "program", "caller_id": "call_prog"}


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    usage.clear_cache()
    yield
    usage.clear_cache()


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", 2),
        ("Grüße, 世界! 🚀", 8),
        ("def f(x):\n    return x ** 2\n", 11),
        ("<|endoftext|>", 7),  # a special token's text is counted as text, never refused
    ],
    ids=["ascii", "unicode", "code", "special-token-text"],
)
def test_counts_are_the_o200k_tokenizers(fresh_cache: None, text: str, tokens: int) -> None:
    assert usage.count(text) == tokens
    assert usage.count(text) == tokens  # from the cache, the same
    assert usage.cached_chars() == len(text)


def test_the_empty_text_is_no_tokens() -> None:
    assert usage.count("") == 0


def test_the_token_cache_is_bounded_by_characters(fresh_cache: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "MAX_CACHED_CHARS", 100)
    for n in range(10):
        usage.count(f"{n}" * 30)
    assert 0 < usage.cached_chars() <= 100
    usage.clear_cache()
    assert usage.cached_chars() == 0


def test_a_text_too_long_to_cache_is_counted_and_only_its_pieces_are_kept(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage, "MAX_CACHED_CHARS", 100_000)
    long = "word " * (2**20 // 5 + 10)
    assert usage.count(long) > 0
    assert 0 < usage.cached_chars() <= 100_000  # a piece or so of 64 Ki characters, never the whole text
    assert usage.count(long) == usage.count("word " * (2**20 // 5 + 10))


def test_a_programs_calls_are_not_model_input_but_its_output_is() -> None:
    program = {"type": "program", "call_id": "call_prog", "code": "await tools.add({a: 1})"}
    call = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":1}', "caller": PROGRAM_CALLER}
    answer = {"type": "function_call_output", "call_id": "c1", "output": "1" * 400, "caller": PROGRAM_CALLER}
    done = {"type": "program_output", "call_id": "call_prog", "result": "the sum is 1"}
    message = {"type": "message", "role": "user", "content": "add one"}
    counted = usage.usage(
        instructions="Be brief.", tools=[], input_items=[message, program, call, answer, done], output_items=[]
    )
    expected = sum(usage.count(t) for t in ("Be brief.", "add one", program["code"], done["result"]))
    assert counted["input_tokens"] == expected
    assert counted["total_tokens"] == expected and counted["output_tokens"] == 0


def test_a_program_output_read_before_the_final_message_is_input_and_reasoning_is_output() -> None:
    output = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Add them in a program."}]},
        {"type": "program", "call_id": "call_prog", "code": "text(String(1 + 2))"},
        {"type": "program_output", "call_id": "call_prog", "result": "3"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is three."}]},
    ]
    counted = usage.usage(instructions=None, tools=[], input_items=[], output_items=output)
    reasoning = usage.count("Add them in a program.")
    assert counted["input_tokens"] == usage.count("3")
    assert counted["output_tokens"] == reasoning + usage.count("text(String(1 + 2))") + usage.count("It is three.")
    assert counted["output_tokens_details"] == {"reasoning_tokens": reasoning}
    without_message = usage.usage(instructions=None, tools=[], input_items=[], output_items=output[:3])
    assert without_message["input_tokens"] == 0  # nothing written after it: the model never read it


def test_tool_definitions_count_as_compact_json_and_deferred_ones_by_name() -> None:
    deferred = {
        "type": "function",
        "name": "eta",
        "description": "delivery time",
        "parameters": {"type": "object"},
        "defer_loading": True,
    }
    assert usage.visible_tools([deferred]) == [{"type": "function", "name": "eta", "description": "delivery time"}]
    counted = usage.usage(instructions=None, tools=PTC_TOOLS, input_items=[], output_items=[])
    assert counted["input_tokens"] == usage.count(json.dumps(PTC_TOOLS, separators=(",", ":")))
    assert usage.definitions_text([]) == ""


def test_cached_tokens_never_exceed_the_input() -> None:
    counted = usage.usage(instructions="hi", tools=[], input_items=[], output_items=[], cached_tokens=10_000)
    assert counted["input_tokens_details"]["cached_tokens"] == counted["input_tokens"]


def _segments(words: int, extra: str = "") -> list[tuple[str, int]]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "tok " * words + extra}]
    return usage.prompt_segments(instructions="You are terse.", tools=[], input_items=items)


def test_the_prompt_cache_serves_whole_blocks_of_a_repeated_long_prompt() -> None:
    cache = usage.PromptCache()
    first = _segments(1500)
    total = sum(tokens for _, tokens in first)
    assert total >= usage.CACHE_MINIMUM
    assert cache.served("caller", first) == 0  # nothing was sent before
    served = cache.served("caller", first)
    assert served == total - total % usage.CACHE_BLOCK and served % usage.CACHE_BLOCK == 0
    assert cache.served("another caller", first) == 0  # per caller


def test_the_prompt_cache_serves_nothing_below_its_minimum_or_past_a_change() -> None:
    cache = usage.PromptCache()
    short = _segments(100)
    cache.served(None, short)
    assert cache.served(None, short) == 0  # under 1,024 tokens
    long = _segments(1500)
    cache.served(None, long)
    assert cache.served(None, _segments(1500, extra=" changed")) == 0  # the one long item changed


def test_the_input_tokens_endpoint_counts_what_create_reports(unit_sdk: openai.OpenAI, fake_runner: FakeRunner) -> None:
    code = "text('counted')"
    fake_runner.define(code, FakeProgram(batches=[], finish=lambda _: "counted"))
    created = unit_sdk.responses.create(model="m", input=js(code), tools=PTC_TOOLS, instructions="Count me.")  # type: ignore[arg-type]
    counted = unit_sdk.responses.input_tokens.count(
        model="m", input=js(code), tools=PTC_TOOLS, instructions="Count me."
    )  # type: ignore[arg-type]
    assert created.usage is not None
    # create's input also holds the program_output the model read before its final message
    assert created.usage.input_tokens == counted.input_tokens + usage.count("counted")


def test_the_items_the_model_reads_are_picked_from_models_as_from_their_dicts() -> None:
    """`_model_read` asks only the items of a class that may have a `caller` for it: a list of
    messages alone, and one mixing them with a program's calls, give what `model_reads` gives."""
    from ptc_emulator.emulator.history.stored import as_input

    raw: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "echo", "arguments": "{}"},
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "echo",
            "arguments": "{}",
            "caller": {"type": "program", "caller_id": "call_p"},
        },
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": "x",
            "caller": {"type": "program", "caller_id": "call_p"},
        },
        {"type": "message", "role": "assistant", "content": "done"},
    ]
    items = [as_input(r) for r in raw]
    messages = [items[0], items[-1]]
    assert usage._model_read(items) == [i for i in items if usage.model_reads(i)] == [items[0], items[1], items[-1]]
    assert usage._model_read(messages) == messages
    assert usage._model_read(raw) == [raw[0], raw[1], raw[-1]]
