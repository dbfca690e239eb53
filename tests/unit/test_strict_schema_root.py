"""A strict schema's root is an object: `text.format` json_schema and a function's `parameters`
given with `strict: true` whose root is not `type: "object"` (an array, a bare `anyOf`, `{}`) are the
hosted 400 (`schema must be a JSON Schema of 'type: "object"', got 'type: "array"'`). Before, they
were accepted, and a client's strict schema the hosted API refuses passed here."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

PTC = {"type": "programmatic_tool_calling"}
ARRAY = {"type": "array", "items": {"type": "integer"}}
UNION = {"anyOf": [{"type": "object", "properties": {}, "required": [], "additionalProperties": False}]}
OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}


def _post(unit_http: TestClient, **body: Any) -> Any:
    return unit_http.post("/v1/responses", json={"model": "m", "input": "```js\ntext('{}');\n```", **body})


ROOTS = [(ARRAY, "array"), (UNION, "None"), ({}, "None"), ({"type": "string"}, "string")]


@pytest.mark.parametrize(("schema", "got"), ROOTS)
def test_a_strict_text_format_with_no_object_root_is_refused(unit_http: TestClient, schema: Any, got: str) -> None:
    reply = _post(unit_http, text={"format": {"type": "json_schema", "name": "out", "strict": True, "schema": schema}})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": f"Invalid schema for response_format 'out': schema must be a JSON Schema of 'type: \"object\"', "
        f"got 'type: \"{got}\"'.",
        "type": "invalid_request_error",
        "param": "text.format.schema",
        "code": "invalid_json_schema",
    }


def test_a_strict_function_with_no_object_root_is_refused(unit_http: TestClient) -> None:
    tool = {"type": "function", "name": "f", "strict": True, "parameters": ARRAY}
    reply = _post(unit_http, tools=[tool, PTC])
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["message"] == (
        "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"array\"'."
    )
    assert error["param"] == "tools[0].parameters" and error["code"] == "invalid_function_parameters"


def test_object_roots_and_non_strict_schemas_are_taken(unit_http: TestClient) -> None:
    strict = {"type": "json_schema", "name": "o", "strict": True, "schema": OBJECT}
    assert _post(unit_http, text={"format": strict}).status_code == 200
    assert _post(unit_http, text={"format": {"type": "json_schema", "name": "o", "schema": ARRAY}}).status_code == 200
    tool = {"type": "function", "name": "f", "strict": False, "parameters": ARRAY}
    assert _post(unit_http, tools=[tool, PTC]).status_code == 200
