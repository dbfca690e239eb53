"""A user, system or developer message, and a tool output given as parts, hold input parts only
(`input_text`, `input_image`, `input_file`): an `output_text` or `refusal` there is the hosted 400
(`Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image', and
'input_file'.`, naming the part), as an assistant message's `input_text` already was. Before, both
were taken, so a client that sends a tool result back as `output_text` parts passed here and fails
against the hosted API."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

PTC = [{"type": "function", "name": "f"}, {"type": "programmatic_tool_calling"}]
SAID = "Invalid value: '{kind}'. Supported values are: 'input_text', 'input_image', and 'input_file'."


def _refused(reply: Any, kind: str, param: str) -> None:
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": SAID.format(kind=kind),
        "type": "invalid_request_error",
        "param": param,
        "code": "invalid_value",
    }


@pytest.mark.parametrize("role", ["user", "system", "developer"])
@pytest.mark.parametrize("part", [{"type": "output_text", "text": "x"}, {"type": "refusal", "refusal": "no"}])
def test_an_output_part_in_an_input_message_is_refused(unit_http: TestClient, role: str, part: Any) -> None:
    message = {"role": role, "content": [{"type": "input_text", "text": "hi"}, part]}
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": [message, {"role": "user", "content": "x"}]})
    _refused(reply, part["type"], "input[0].content[1]")


def test_an_output_text_part_in_a_tool_output_is_refused(unit_http: TestClient) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "output_text", "text": "3"}]}
    body = {"model": "m", "tools": PTC, "input": [{"role": "user", "content": "hi"}, call, output]}
    _refused(unit_http.post("/v1/responses", json=body), "output_text", "input[2].output[0]")
    _refused(unit_http.post("/v1/responses/input_tokens", json=body), "output_text", "input[2].output[0]")


def test_a_conversation_item_with_an_output_part_is_refused(unit_http: TestClient) -> None:
    items = [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]
    _refused(unit_http.post("/v1/conversations", json={"items": items}), "output_text", "items[0].content[0]")


def test_input_parts_are_taken(unit_http: TestClient) -> None:
    parts = [{"type": "input_text", "text": "```js\ntext('x');\n```"}]
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": [{"role": "user", "content": parts}]})
    assert reply.status_code == 200, reply.text[:300]
