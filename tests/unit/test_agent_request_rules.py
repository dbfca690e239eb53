"""The Agents API holds its fields to the rules a response create holds the same fields to: an
empty `model` is `empty_string` (before, an agent with `model: ""` was made), and `stream_options`
takes only the SDK's key (before, any key was kept)."""

from __future__ import annotations

import threading

import pytest
from starlette.testclient import TestClient

from tests.api.api_support import assert_envelope

BETA = {"OpenAI-Beta": "agents=v1"}
EMPTY = "Invalid '{}': empty string. Expected a string with minimum length 1, but got an empty string instead."


def test_an_empty_model_is_refused_as_a_response_create_refuses_it(unit_http: TestClient) -> None:
    created = unit_http.post("/v1/responses", json={"model": "", "input": "hi"})
    assert_envelope(created, 400, EMPTY.format("model"), param="model", code="empty_string")
    reply = unit_http.post("/v1/agents", json={"model": ""}, headers=BETA)
    assert_envelope(reply, 400, EMPTY.format("model"), param="model", code="empty_string")
    made = unit_http.post("/v1/agents", json={"model": "gpt-5"}, headers=BETA).json()
    reply = unit_http.post(f"/v1/agents/{made['id']}", json={"model": ""}, headers=BETA)
    assert_envelope(reply, 400, EMPTY.format("model"), param="model", code="empty_string")
    body = {"environment": {"type": "none"}, "agent": {"model": ""}}
    reply = unit_http.post("/v1/agents/sessions", json=body, headers=BETA)
    assert_envelope(reply, 400, EMPTY.format("agent.model"), param="agent.model", code="empty_string")


@pytest.mark.parametrize("options", [{"a": None}, {"include_obfuscation": True, "colour": 1}])
def test_an_unknown_stream_options_key_of_a_session_is_refused(unit_http: TestClient, options: object) -> None:
    body = {"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "stream": True, "stream_options": options}
    reply = unit_http.post("/v1/agents/sessions", json=body, headers=BETA)
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["code"] == "unknown_parameter"
    assert reply.json()["error"]["param"].startswith("stream_options.")


def test_a_second_message_in_one_body_says_the_first_started_the_turn(unit_http: TestClient) -> None:
    """Two messages in one events body to an idle session: the second is refused because the first
    starts a turn. Before, the 400 said the session had a turn in progress "(idle)"."""
    unit_http.post("/_emulator/scenarios", json={"match": {"input": "^hello$"}, "turns": [{"message": "hi"}]})
    body = {"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "input": "hello"}
    session = unit_http.post("/v1/agents/sessions", json=body, headers=BETA).json()
    for _ in range(3000):  # the turn plays in a task: its end is seen when it comes, however slow the machine
        status = unit_http.get(f"/v1/agents/sessions/{session['id']}", headers=BETA).json()["status"]
        if status == "idle":
            break
        threading.Event().wait(0.01)
    assert status == "idle"
    message = {
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}],
    }
    reply = unit_http.post(f"/v1/agents/sessions/{session['id']}/events", json={"events": [message] * 2}, headers=BETA)
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "active_turn_not_steerable" and error["param"] == "events[1]"
    assert "(started by events[0] of this request)" in error["message"] and "(idle)" not in error["message"]


def test_an_agent_model_holding_a_nul_is_refused(unit_http: TestClient) -> None:
    # A NUL in an agent's `model` was taken and echoed back.
    reply = unit_http.post("/v1/agents", json={"model": "gpt-5\u0000"}, headers=BETA)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "model", reply.text
    assert reply.json()["error"]["code"] == "invalid_value"
