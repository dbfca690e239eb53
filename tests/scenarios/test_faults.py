"""Faults a scenario turn injects, seen through the official SDK as an agent would see them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.scenarios.scenarios_support import inventory_tools, run_agent

PING = "(?i)^ping"


def http_fault(emulator: PTCEmulator, status: int, **fault: Any) -> None:
    emulator.add_scenario(
        {
            "name": f"fault-{status}",
            "match": {"input": PING},
            "turns": [{"message": "pong", "fault": {"http_error": status, **fault}}],
        }
    )


@pytest.mark.parametrize(
    ("status", "error_class", "error_type", "code"),
    [
        (429, openai.RateLimitError, "requests", "rate_limit_exceeded"),
        (500, openai.InternalServerError, "server_error", None),
        (503, openai.InternalServerError, "server_error", None),
    ],
)
def test_http_error_reaches_the_sdk_with_openais_body(
    ptc_emulator: PTCEmulator, status: int, error_class: type[openai.APIStatusError], error_type: str, code: str | None
) -> None:
    http_fault(ptc_emulator, status, retry_after=0.25)
    client = ptc_emulator.client(max_retries=0)

    with pytest.raises(error_class) as caught:
        client.responses.create(model="gpt-test", input="ping")

    error = caught.value
    assert error.status_code == status
    assert isinstance(error.body, dict)
    assert set(error.body) == {"message", "type", "param", "code"}
    assert error.body["type"] == error_type and error.body["code"] == code
    assert error.body["message"] and error.message == f"Error code: {status} - {error.body['message']}"
    assert error.response.headers["retry-after"] == "0.25"
    assert error.response.headers["retry-after-ms"] == "250"
    assert "x-should-retry" not in error.response.headers
    assert error.request_id is not None and error.request_id.startswith("req_")

    entry = ptc_emulator.journal[-1]
    assert entry["status"] == status and entry["response"] == {"error": error.body}
    assert entry["fault"] == f"http_error {status} (1 of 1)" and entry["scenario"] == f"fault-{status}"
    # `times: 1`: the same request now plays the turn.
    assert client.responses.create(model="gpt-test", input="ping").output_text == "pong"


@pytest.mark.parametrize("should_retry", [True, False])
def test_should_retry_header(ptc_emulator: PTCEmulator, should_retry: bool) -> None:
    http_fault(ptc_emulator, 503, should_retry=should_retry, times=5)
    with pytest.raises(openai.InternalServerError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(model="gpt-test", input="ping")
    assert caught.value.response.headers["x-should-retry"] == ("true" if should_retry else "false")
    assert "retry-after" not in caught.value.response.headers


def test_sdk_retries_a_429_until_it_succeeds(ptc_emulator: PTCEmulator) -> None:
    http_fault(ptc_emulator, 429, times=2, should_retry=True, retry_after=0.05)
    client = ptc_emulator.client(max_retries=2)

    response = client.responses.create(model="gpt-test", input="ping")

    assert response.output_text == "pong"
    journal = ptc_emulator.journal
    assert [e["status"] for e in journal] == [429, 429, 200]
    assert [e["figures"]["retries"] for e in journal] == [0, 1, 2]
    assert [e["fault"] for e in journal] == ["http_error 429 (1 of 2)", "http_error 429 (2 of 2)", None]
    assert [e["scenario"] for e in journal] == ["fault-429"] * 3
    assert journal[2]["response_id"] == response.id


def test_sdk_gives_up_when_told_not_to_retry(ptc_emulator: PTCEmulator) -> None:
    # Were the SDK to retry, the journal would show a second request.
    http_fault(ptc_emulator, 429, times=2, should_retry=False, retry_after=3)
    client = ptc_emulator.client(max_retries=2)

    with pytest.raises(openai.RateLimitError):
        client.responses.create(model="gpt-test", input="ping")

    journal = ptc_emulator.journal
    assert [(e["status"], e["figures"]["retries"]) for e in journal] == [(429, 0)]


def test_sdk_runs_out_of_retries(ptc_emulator: PTCEmulator) -> None:
    http_fault(ptc_emulator, 500, times=5, retry_after=0.01)
    with pytest.raises(openai.InternalServerError):
        ptc_emulator.client(max_retries=2).responses.create(model="gpt-test", input="ping")
    assert [(e["status"], e["figures"]["retries"]) for e in ptc_emulator.journal] == [(500, 0), (500, 1), (500, 2)]


def test_added_latency(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": PING}, "turns": [{"message": "slow pong", "fault": {"latency_ms": 400}}]}
    )
    ptc_emulator.add_scenario({"match": {"input": "(?i)^fast"}, "turns": [{"message": "fast pong"}]})
    client = ptc_emulator.client()

    def timed(text: str) -> float:
        started = time.monotonic()
        client.responses.create(model="gpt-test", input=text)
        return time.monotonic() - started

    slow = timed("ping")
    for _ in range(3):
        client.responses.create(model="gpt-test", input="fast")

    assert slow >= 0.4  # a lower bound holds however busy the machine is
    assert [e["fault"] for e in ptc_emulator.journal] == ["latency 400 ms", None, None, None]


SHORTAGE = {
    "match": {"input": "(?i)shortage for (?P<sku>sku_\\w+)", "tools": ["get_inventory", "get_demand"]},
    "turns": [
        {
            "program": (
                "const s = await tools.get_inventory({sku: {{ sku }}});\n"
                "const d = await tools.get_demand({sku: {{ sku }}});\n"
                "text(JSON.stringify({shortage: Math.max(d.requested_units - s.available_units, 0)}));"
            )
        },
        {"message": "Shortage: {{ data.shortage }}."},
    ],
}


def with_fault(scenario: dict[str, Any], turn: int, fault: dict[str, Any]) -> dict[str, Any]:
    turns = [dict(t) for t in scenario["turns"]]
    turns[turn]["fault"] = fault
    return {**scenario, "turns": turns}


def test_program_timeout(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(with_fault(SHORTAGE, 0, {"program_timeout": True}))

    [response] = run_agent(ptc_emulator.client(), "What is the shortage for sku_123?", inventory_tools())

    assert [item.type for item in response.output] == ["program", "program_output", "message"]
    output = response.output[1]
    assert output.status == "incomplete"
    assert output.call_id == response.output[0].call_id
    assert output.result.startswith("timeout: program exceeded its time limit")
    assert response.output_text == f"The program did not complete: {output.result}"
    entry = ptc_emulator.journal[0]
    assert entry["fault"] == "program_timeout"
    assert entry["route"] == ["program", "program_output", "message"]
    assert entry["figures"]["programs_run"] == 1 and entry["figures"]["program_tool_calls"] == 0


def test_program_incomplete(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(with_fault(SHORTAGE, 0, {"program_incomplete": "get_demand is unavailable"}))

    [response] = run_agent(ptc_emulator.client(), "What is the shortage for sku_9?", inventory_tools())

    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    assert "get_demand is unavailable" in output.result
    assert response.output_text == f"The program did not complete: {output.result}"
    assert ptc_emulator.journal[0]["fault"] == "program_incomplete"


def test_program_without_fault_completes(ptc_emulator: PTCEmulator) -> None:
    """The control for the two tests above: the same scenario, no fault."""
    ptc_emulator.add_scenario(SHORTAGE)
    responses = run_agent(ptc_emulator.client(), "What is the shortage for sku_9?", inventory_tools())
    assert responses[-1].output_text == "Shortage: 0."
    assert [r.output[0].type for r in responses] == ["program", "function_call", "program_output"]


@pytest.mark.parametrize("reason", ["max_output_tokens", "content_filter"])
def test_response_incomplete(ptc_emulator: PTCEmulator, reason: str) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": PING}, "turns": [{"message": "a long answer", "fault": {"response_incomplete": reason}}]}
    )

    response = ptc_emulator.client().responses.create(model="gpt-test", input="ping")

    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == reason
    assert response.output[0].type == "message" and response.output[0].status == "incomplete"
    assert response.usage is not None and response.usage.output_tokens > 0
    entry = ptc_emulator.journal[0]
    assert entry["status"] == 200 and entry["fault"] == f"response_incomplete {reason}"


def test_cut_stream_ends_without_response_completed(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": PING}, "turns": [{"message": "pong " * 20, "fault": {"cut_stream_after": 3}}]}
    )
    client = ptc_emulator.client(max_retries=0)

    events: list[str] = []
    try:
        with client.responses.stream(model="gpt-test", input="ping") as stream:
            for event in stream:
                events.append(event.type)
            stream.get_final_response()
    except openai.APIStatusError:
        raise  # an HTTP error before the stream is not what this fault does
    except Exception as e:  # the stream ended early (the helper has no final response) or broke off
        ended: Exception = e
    else:
        pytest.fail(f"the stream completed: {events}")

    assert "response.completed" in str(ended) or not isinstance(ended, RuntimeError), ended
    assert events == ["response.created", "response.in_progress", "response.output_item.added"]
    entry = ptc_emulator.journal[0]
    assert entry["fault"] == "cut_stream_after 3"


def test_uncut_stream_completes(ptc_emulator: PTCEmulator) -> None:
    """The control for the test above."""
    ptc_emulator.add_scenario({"match": {"input": PING}, "turns": [{"message": "pong " * 20}]})
    with ptc_emulator.client(max_retries=0).responses.stream(model="gpt-test", input="ping") as stream:
        events = [event.type for event in stream]
        final = stream.get_final_response()
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert final.output_text == "pong " * 20


REFAULT = {
    "name": "refault",
    "match": {"input": "refault"},
    "turns": [{"message": "ok", "fault": {"http_error": 503, "times": 1}}],
}


def counted_afresh(urls: list[str], scope: str) -> None:
    """A fault of `times: 1` answers the first request, then the turn plays; after the scenario is
    deleted and added again, replaced, or its scope reset and it added again, the fault answers
    the first request again (before, its count outlived all three: 200 every time). `urls`: the
    servers' roots, used in turn (replicas: each step on another one)."""
    headers = {"x-ptc-emulator-scope": scope}
    turn = iter(range(1_000))

    def url() -> str:
        return urls[next(turn) % len(urls)]

    def add() -> None:
        assert httpx.post(f"{url()}/_emulator/scenarios", json=REFAULT, headers=headers, timeout=30).status_code == 201

    def sent() -> list[int]:
        body = {"model": "m", "input": "refault"}
        return [
            httpx.post(f"{url()}/v1/responses", json=body, headers=headers, timeout=30).status_code for _ in range(3)
        ]

    add()
    assert sent() == [503, 200, 200]
    assert httpx.delete(f"{url()}/_emulator/scenarios/refault", headers=headers, timeout=30).status_code == 200
    add()
    assert sent() == [503, 200, 200], "deleted and added again"
    add()
    assert sent() == [503, 200, 200], "replaced"
    assert httpx.post(f"{url()}/_emulator/reset", json={}, headers=headers, timeout=30).status_code == 200
    add()
    assert sent() == [503, 200, 200], "the scope reset"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_faults_times_are_counted_afresh_when_its_scenario_is_replaced_deleted_or_reset(
    make_server: Callable[..., EmulatorServer], store: str
) -> None:
    server = make_server(store=store)
    counted_afresh([server.base_url.removesuffix("/v1")], "refault-scope")


def test_a_scope_reset_counts_afresh_the_faults_of_an_unscoped_scenario_it_used(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """A scenario added without a scope stays through a scope's reset; the requests of that scope
    it answered with a fault are counted afresh, those of another scope are not."""
    root = make_server(store="sqlite").base_url.removesuffix("/v1")
    assert httpx.post(f"{root}/_emulator/scenarios", json=REFAULT, timeout=30).status_code == 201
    body = {"model": "m", "input": "refault"}

    def status(scope: str) -> int:
        headers = {"x-ptc-emulator-scope": scope}
        return httpx.post(f"{root}/v1/responses", json=body, headers=headers, timeout=30).status_code

    assert [status("a"), status("a"), status("b"), status("b")] == [503, 200, 503, 200]
    reset = httpx.post(f"{root}/_emulator/reset", json={}, headers={"x-ptc-emulator-scope": "a"}, timeout=30)
    assert reset.json()["scenarios_removed"] == 0
    assert [status("a"), status("a"), status("b")] == [503, 200, 200]
