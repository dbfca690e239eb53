"""An agent's `text.format` is held to its SDK type (openai 3.63's `TextFormatParam`: `{"type":
"text"}`, or `{"type": "json_schema", "schema": {...}}`) as a response's `text.format` is held to
its own: an unknown key, a json_schema format without its schema, or a schema that is no JSON
Schema is a 400 in OpenAI's envelope. Before, any keys were kept and shown back as sent."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.api_support import assert_envelope

BETA = {"OpenAI-Beta": "agents=v1"}

BAD_FORMATS: dict[str, tuple[Any, str]] = {
    "an unknown key on text": ({"type": "text", "colour": "blue"}, "text.format.colour"),
    "an unknown key on json_schema": (
        {"type": "json_schema", "schema": {"type": "object"}, "colour": "blue"},
        "text.format.colour",
    ),
    "json_schema without its schema": ({"type": "json_schema"}, "text.format.schema"),
    "a schema that is no object": ({"type": "json_schema", "schema": "object"}, "text.format.schema"),
    "a schema that is no JSON Schema": ({"type": "json_schema", "schema": {"type": 12}}, "text.format.schema"),
    "an unknown format type": ({"type": "json_object"}, "text.format.type"),
}


@pytest.mark.parametrize(("fmt", "param"), list(BAD_FORMATS.values()), ids=list(BAD_FORMATS))
@pytest.mark.parametrize("where", ["agent", "update", "session"])
def test_a_bad_text_format_is_refused(unit_http: TestClient, fmt: Any, param: str, where: str) -> None:
    text = {"format": fmt}
    if where == "agent":
        response = unit_http.post("/v1/agents", json={"model": "gpt-5", "text": text}, headers=BETA)
    elif where == "update":
        made = unit_http.post("/v1/agents", json={"model": "gpt-5"}, headers=BETA).json()
        response = unit_http.post(f"/v1/agents/{made['id']}", json={"text": text}, headers=BETA)
    else:
        agent = {"model": "gpt-5", "text": text}
        body = {"environment": {"type": "none"}, "agent": agent}
        response = unit_http.post("/v1/agents/sessions", json=body, headers=BETA)
        param = f"agent.{param}"
    assert_envelope(response, 400)
    assert response.json()["error"]["param"] == param, response.json()


def test_a_sound_text_format_is_kept_and_shown(unit_http: TestClient) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    for fmt in ({"type": "text"}, {"type": "json_schema", "schema": schema}):
        made = unit_http.post("/v1/agents", json={"model": "gpt-5", "text": {"format": fmt}}, headers=BETA)
        assert made.status_code == 200, made.text
        assert made.json()["text"]["format"] == fmt
        again = unit_http.get(f"/v1/agents/{made.json()['id']}", headers=BETA).json()
        assert again["text"]["format"] == fmt
