"""`max_output_tokens` holds for the scripted model: an answer that writes more tokens than the
request allows ends `incomplete` (`incomplete_details.reason: max_output_tokens`), as a hosted
response cut at its limit does, never `completed`. Before, the limit was echoed and ignored: a
response of 500 output tokens under `max_output_tokens: 16` came back `completed`."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

LONG = " ".join(["word"] * 300)


def _scenario(unit_http: TestClient, name: str, message: str) -> None:
    scenario = {"name": name, "match": {"input": f"^{name}$"}, "turns": [{"message": message}]}
    assert unit_http.post("/_emulator/scenarios", json=scenario).status_code == 201


def _create(unit_http: TestClient, **body: Any) -> dict[str, Any]:
    reply = unit_http.post("/v1/responses", json={"model": "m", **body})
    assert reply.status_code == 200, reply.text[:300]
    return dict(reply.json())


def test_an_answer_longer_than_max_output_tokens_ends_incomplete(unit_http: TestClient) -> None:
    _scenario(unit_http, "limit__long", LONG)
    response = _create(unit_http, input="limit__long", max_output_tokens=16)
    assert response["status"] == "incomplete", response["status"]
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["completed_at"] is None
    assert [item["status"] for item in response["output"] if item["type"] == "message"] == ["incomplete"]
    stored = unit_http.get(f"/v1/responses/{response['id']}").json()
    assert stored["status"] == "incomplete" and stored["incomplete_details"] == {"reason": "max_output_tokens"}


def test_the_streamed_answer_ends_with_response_incomplete(unit_http: TestClient) -> None:
    _scenario(unit_http, "limit__streamed", LONG)
    body = {"model": "m", "input": "limit__streamed", "max_output_tokens": 16, "stream": True}
    with unit_http.stream("POST", "/v1/responses", json=body) as reply:
        events = [json.loads(line[5:]) for line in reply.iter_lines() if line.startswith("data:")]
    assert events[-1]["type"] == "response.incomplete", events[-1]["type"]
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_an_answer_within_the_limit_completes(unit_http: TestClient) -> None:
    _scenario(unit_http, "limit__short", "Short.")
    assert _create(unit_http, input="limit__short", max_output_tokens=16)["status"] == "completed"
    _scenario(unit_http, "limit__unbounded", LONG)
    assert _create(unit_http, input="limit__unbounded")["status"] == "completed"
