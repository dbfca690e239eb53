"""Which journal entries form one conversation: one grouping, read alike by the journal's
`conversation` field, its figures per conversation and the trace inspector. Journal rows as
`GET /_emulator/journal` returns them, built by hand: no server, no V8."""

from __future__ import annotations

from typing import Any

from ptc_emulator.emulator.journal import evaluation, grouping

SCOPE = "test-grouping"


def entry(
    seq: int,
    *,
    status: int = 200,
    response_id: str | None = None,
    request: dict[str, Any] | None = None,
    output: list[dict[str, Any]] | None = None,
    retries: int = 0,
    scope: str = SCOPE,
) -> dict[str, Any]:
    response = {"id": response_id, "status": "completed", "output": output or []} if response_id else None
    return {
        "seq": seq,
        "at": float(seq),
        "scope": scope,
        "status": status,
        "request": request or {"model": "m", "input": "ping"},
        "response": response,
        "response_id": response_id,
        "figures": {"retries": retries},
        "conversation": None,
    }


def seqs(groups: list[list[dict[str, Any]]]) -> list[list[int]]:
    return [[e["seq"] for e in g] for g in groups]


def test_retries_of_a_refused_first_request_are_one_conversation_everywhere() -> None:
    """The case the two former algorithms disagreed on: the SDK retries a first request that got a
    429 (no response id, nothing to link by but its body). Recording gave the two refused attempts
    no conversation and the third its own; the inspector showed the three as one. Now the journal's
    field, its figures and the inspector's groups all say one conversation of three requests."""
    body = {"model": "m", "input": "ping", "tools": [{"type": "programmatic_tool_calling"}]}
    journal = [
        entry(1, status=429, request=body),
        entry(2, status=429, request=body, retries=1),
        entry(3, response_id="resp_1", request=body, retries=2),
    ]
    assert seqs(grouping.group(journal)) == [[1, 2, 3]]
    assert [e["conversation"] for e in grouping.label(journal)] == ["resp_1"] * 3
    [run] = evaluation.conversations(journal)
    assert (run["conversation"], run["requests"], run["errors"], run["retries"]) == ("resp_1", 3, 2, 3)


def test_the_same_body_without_a_retry_count_is_another_conversation() -> None:
    journal = [entry(1, status=429), entry(2, response_id="resp_2")]
    assert seqs(grouping.group(journal)) == [[1], [2]]
    assert [e["conversation"] for e in grouping.label(journal)] == [None, "resp_2"]
    assert [r["conversation"] for r in evaluation.conversations(journal)] == ["resp_2"]


def test_a_store_false_program_resume_replays_into_its_conversation() -> None:
    program = {"type": "program", "id": "prog_1", "call_id": "call_p"}
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "caller": {"type": "program", "caller_id": "call_p"},
    }
    replay = {
        "model": "m",
        "store": False,
        "input": [
            {"role": "user", "content": "go"},
            program,
            call,
            {"type": "function_call_output", "call_id": "call_1", "output": "1"},
        ],
    }
    journal = [
        entry(1, response_id="resp_a", output=[program, call]),
        entry(2, response_id="resp_other"),
        entry(3, response_id="resp_b", request=replay),
    ]
    assert seqs(grouping.group(journal)) == [[1, 3], [2]]
    assert [e["conversation"] for e in grouping.label(journal)] == ["resp_a", "resp_other", "resp_a"]


def test_chains_conversations_and_scopes() -> None:
    journal = [
        entry(1, response_id="resp_1"),
        entry(2, response_id="resp_2", request={"model": "m", "previous_response_id": "resp_1"}),
        # A refused continuation still belongs to the chain it continues.
        entry(3, status=400, request={"model": "m", "previous_response_id": "resp_2"}),
        entry(4, response_id="resp_4", request={"model": "m", "conversation": "conv_1"}),
        entry(5, response_id="resp_5", request={"model": "m", "conversation": {"id": "conv_1"}}),
        # Continues a response the journal no longer holds: named after it.
        entry(6, response_id="resp_6", request={"model": "m", "previous_response_id": "resp_gone"}),
        # Another scope never joins, whatever it names.
        entry(7, response_id="resp_7", request={"model": "m", "previous_response_id": "resp_1"}, scope="other"),
    ]
    assert seqs(grouping.group(journal)) == [[1, 2, 3], [4, 5], [6], [7]]
    names = [e["conversation"] for e in grouping.label(journal)]
    assert names == ["resp_1", "resp_1", "resp_1", "conv_1", "conv_1", "resp_gone", "resp_1"]


def test_a_request_that_continues_two_runs_joins_them_under_the_older_name() -> None:
    """Recording used to pick the first run the input named and leave the other apart."""
    journal = [
        entry(1, response_id="resp_1", output=[{"type": "function_call", "id": "fc_1", "call_id": "call_1"}]),
        entry(2, response_id="resp_2", output=[{"type": "function_call", "id": "fc_2", "call_id": "call_2"}]),
        entry(
            3,
            response_id="resp_3",
            request={
                "model": "m",
                "store": False,
                "input": [
                    {"type": "function_call_output", "call_id": "call_2", "output": "2"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "1"},
                ],
            },
        ),
    ]
    assert seqs(grouping.group(journal)) == [[1, 2, 3]]
    assert {e["conversation"] for e in grouping.label(journal)} == {"resp_1"}
    [run] = evaluation.conversations(journal)
    assert run["responses"] == ["resp_1", "resp_2", "resp_3"]
