"""`text` on a create and a token count, as the hosted API checks it (the SDK's `ResponseTextConfig`):
a `format` of a known type with that type's keys, a json_schema format's `name` (its pattern and
length) and `schema` (a JSON Schema; strict-compliant with `strict: true`), a known `verbosity`,
no other key. Each case was taken unchecked before (a 200), and is the same 400 on both routes."""

from __future__ import annotations

import json
from typing import Any

import openai
import pydantic
import pytest
from starlette.testclient import TestClient

from ptc_emulator.emulator.rules import contract
from tests.api.api_support import assert_envelope
from tests.support import PTC_TOOLS, js
from tests.unit.fake_runner import FakeProgram, FakeRunner

JSON = {"content-type": "application/json"}
ROUTES = ["/v1/responses", "/v1/responses/input_tokens"]
ANSWER = "text(JSON.stringify({city: 'Paris', days: 3}))"
STRICT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
PATTERN = "'^[a-zA-Z0-9_-]+$'"


class Trip(pydantic.BaseModel):
    city: str
    days: int


@pytest.fixture(autouse=True)
def _programs(fake_runner: FakeRunner) -> None:
    fake_runner.define(ANSWER, FakeProgram(batches=[], finish=lambda _: '{"city": "Paris", "days": 3}'))


def post(http: TestClient, path: str, text: Any) -> Any:
    body = {"model": "m", "input": js(ANSWER), "tools": PTC_TOOLS, "text": text}
    return http.post(path, content=json.dumps(body).encode("utf-8"), headers=JSON)


def schema_format(**fields: Any) -> dict[str, Any]:
    return {"format": {"type": "json_schema", "name": "trip", "schema": STRICT, "strict": True, **fields}}


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(
    ("text", "message", "param", "code"),
    [
        (
            {"verbosity": "loud"},
            "Invalid value: 'loud'. Supported values are: 'low', 'medium', and 'high'.",
            "text.verbosity",
            "invalid_value",
        ),
        ({"format": {"type": "text"}, "x": 1}, "Unknown parameter: 'text.x'.", "text.x", "unknown_parameter"),
        (
            {"format": {"type": "yaml"}},
            "Invalid value: 'yaml'. Supported values are: 'text', 'json_schema', and 'json_object'.",
            "text.format.type",
            "invalid_value",
        ),
        (
            {"format": {}},
            "Missing required parameter: 'text.format.type'.",
            "text.format.type",
            "missing_required_parameter",
        ),
        (
            {"format": {"type": "text", "name": "x"}},
            "Unknown parameter: 'text.format.name'.",
            "text.format.name",
            "unknown_parameter",
        ),
        (
            {"format": {"type": "json_object", "schema": {}}},
            "Unknown parameter: 'text.format.schema'.",
            "text.format.schema",
            "unknown_parameter",
        ),
        (
            {"format": {"type": "json_schema", "schema": STRICT}},
            "Missing required parameter: 'text.format.name'.",
            "text.format.name",
            "missing_required_parameter",
        ),
        (
            {"format": {"type": "json_schema", "name": "trip"}},
            "Missing required parameter: 'text.format.schema'.",
            "text.format.schema",
            "missing_required_parameter",
        ),
        (
            schema_format(name="a trip"),
            f"Invalid 'text.format.name': string does not match pattern. Expected a string that matches the "
            f"pattern {PATTERN}.",
            "text.format.name",
            "invalid_value",
        ),
        (
            schema_format(name="t" * 65),
            "Invalid 'text.format.name': string too long. Expected a string with maximum length 64, but got a "
            "string with length 65 instead.",
            "text.format.name",
            "string_above_max_length",
        ),
        (
            schema_format(schema=[STRICT]),
            "Invalid type for 'text.format.schema': expected an object, but got an array instead.",
            "text.format.schema",
            "invalid_type",
        ),
        (
            schema_format(strict="yes"),
            "Invalid type for 'text.format.strict': expected a boolean, but got a string instead.",
            "text.format.strict",
            "invalid_type",
        ),
        (
            schema_format(description=7),
            "Invalid type for 'text.format.description': expected a string, but got an integer instead.",
            "text.format.description",
            "invalid_type",
        ),
        (
            schema_format(schema={"type": 5}),
            "Invalid schema for response_format 'trip': 5 is not valid under any of the given schemas.",
            "text.format.schema",
            "invalid_json_schema",
        ),
        (
            schema_format(schema={**STRICT, "additionalProperties": True}),
            "Invalid schema for response_format 'trip': In context=(), 'additionalProperties' is required to be "
            "supplied and to be false.",
            "text.format.schema",
            "invalid_json_schema",
        ),
        (
            schema_format(schema={**STRICT, "required": ["city"]}),
            "Invalid schema for response_format 'trip': In context=(), 'required' is required to be supplied "
            "and to be an array including every key in properties. Missing 'days'.",
            "text.format.schema",
            "invalid_json_schema",
        ),
    ],
    ids=[
        "verbosity",
        "unknown-key",
        "format-type",
        "format-without-type",
        "text-with-name",
        "json_object-with-schema",
        "no-name",
        "no-schema",
        "name-pattern",
        "name-length",
        "schema-not-object",
        "strict-not-bool",
        "description-not-string",
        "schema-invalid",
        "strict-allows-more",
        "strict-misses-required",
    ],
)
def test_a_malformed_text_is_refused_by_create_and_count(
    unit_http: TestClient, path: str, text: Any, message: str, param: str, code: str
) -> None:
    error = assert_envelope(post(unit_http, path, text), 400, message, param=param, code=code)
    assert error["message"] == message


def test_a_schema_past_the_size_bound_is_refused(unit_http: TestClient) -> None:
    """The tools' bound (`MAX_SCHEMA_VALUES`), counted before the meta-schema check."""
    wide = {"type": "object", "properties": {f"p{i}": {} for i in range(contract.MAX_SCHEMA_VALUES)}}
    error = assert_envelope(post(unit_http, "/v1/responses", schema_format(schema=wide, strict=False)), 400)
    assert (error["param"], error["code"]) == ("text.format.schema", "invalid_json_schema")
    assert "the schema holds more values than this server checks" in error["message"]


@pytest.mark.parametrize("path", ROUTES)
def test_a_loose_schema_is_taken_without_strict(unit_http: TestClient, path: str) -> None:
    """The strict-compliance rules hold only with `strict: true`, as for a function's `parameters`."""
    loose = {"type": "object", "properties": {"city": {"type": "string"}}}
    for text in (
        schema_format(schema=loose, strict=False),
        {"format": {"type": "json_schema", "name": "t", "schema": loose}},
    ):
        assert post(unit_http, path, text).status_code == 200


def test_every_format_and_verbosity_the_sdk_sends_is_taken_and_echoed(unit_sdk: openai.OpenAI) -> None:
    for verbosity in ("low", "medium", "high"):
        for form in (
            {"type": "text"},
            {"type": "json_object"},
            {**schema_format(description="A trip.")["format"]},
        ):
            text: Any = {"format": form, "verbosity": verbosity}
            response = unit_sdk.responses.create(model="m", input=js(ANSWER), tools=PTC_TOOLS, text=text)  # type: ignore[arg-type]
            assert response.text is not None
            assert response.text.model_dump(exclude_none=True, by_alias=True) == text


def test_parse_with_a_pydantic_model_sends_a_strict_schema_that_is_taken(unit_sdk: openai.OpenAI) -> None:
    """`responses.parse(text_format=Model)`: the SDK makes the model's schema strict-compliant."""
    parsed = unit_sdk.responses.parse(model="m", input=js(ANSWER), tools=PTC_TOOLS, text_format=Trip)  # type: ignore[arg-type]
    assert parsed.output_parsed == Trip(city="Paris", days=3)


def test_a_tool_name_off_its_pattern_is_worded_as_the_hosted_api_words_it(unit_http: TestClient) -> None:
    """The pattern wording is the validation path's, for every pattern bound (before: pydantic's
    `String should match pattern`)."""
    body = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "a b"}]}
    response = unit_http.post("/v1/responses", content=json.dumps(body).encode("utf-8"), headers=JSON)
    error = assert_envelope(response, 400, param="tools[0].name", code="invalid_value")
    assert error["message"].startswith("Invalid 'tools[0].name': string does not match pattern. Expected a string")
    assert error["message"].endswith("matches the pattern '^[a-zA-Z0-9_-]+$'.")


def test_a_tool_name_past_its_length_is_too_long_as_the_hosted_api_words_it(unit_http: TestClient) -> None:
    """The length is its own bound, not folded into the pattern the message quotes."""
    body = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "a" * 129}]}
    response = unit_http.post("/v1/responses", content=json.dumps(body).encode("utf-8"), headers=JSON)
    assert_envelope(
        response,
        400,
        "Invalid 'tools[0].name': string too long. Expected a string with maximum length 128, "
        "but got a string with length 129 instead.",
        param="tools[0].name",
    )
