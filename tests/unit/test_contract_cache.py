"""The contract checks' caches (emulator/rules/contract.py): a validator per schema and a verdict per
(schema, text). They change nothing a check finds: each schema keeps its own first error, a text
that differs by one byte is checked afresh, and both stay within their bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ptc_emulator.emulator.rules import contract
from ptc_emulator.emulator.wire.tools import FunctionTool


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    contract._schemas.clear()
    contract._verdicts.clear()
    yield
    contract._schemas.clear()
    contract._verdicts.clear()


def tool(parameters: dict[str, Any]) -> FunctionTool:
    return FunctionTool(name="f", parameters=parameters, output_schema=parameters)


def message(parameters: dict[str, Any], arguments: str) -> str | None:
    violation = contract.check_arguments(tool(parameters), "call_1", arguments)
    return None if violation is None else violation.message


def test_the_schemas_key_order_still_decides_the_first_error() -> None:
    # Both errors sit at the top level: the keyword checked first is reported, so two schemas that
    # differ only in key order must not share a validator.
    required_first = {"required": ["a"], "additionalProperties": False, "properties": {"a": {}}}
    extra_first = {"additionalProperties": False, "required": ["a"], "properties": {"a": {}}}
    assert message(required_first, '{"b":1}') == "'a' is a required property"
    assert message(extra_first, '{"b":1}') == "Additional properties are not allowed ('b' was unexpected)"
    assert message(required_first, '{"b":1}') == "'a' is a required property"


def test_a_text_that_differs_by_one_byte_is_checked_again() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}
    assert message(schema, '{"a":1}') is None
    assert message(schema, '{"a":1}') is None  # from the cache
    assert message(schema, '{"a":"1"}') == "'1' is not of type 'number' (at a)"
    assert message(schema, '{"b":1}') == "'a' is a required property"
    assert message(schema, '{"a":1') is not None  # not JSON
    assert contract.check_output(tool(schema), "call_1", '{"a":1') is not None
    assert message(schema, "[" * 70 + "]" * 70) == "the arguments nest deeper than 64 levels"


def test_the_same_schema_with_other_values_is_another_schema() -> None:
    # 1, 1.0 and true are equal in Python and different JSON: each keeps its own validator.
    assert message({"properties": {"a": {"const": 1}}}, '{"a":1.0}') is None
    assert message({"properties": {"a": {"const": True}}}, '{"a":1}') == "True was expected (at a)"
    assert message({"properties": {"a": {"const": 1}}}, '{"a":true}') == "1 was expected (at a)"


def test_a_schema_its_text_does_not_give_back_is_never_shared() -> None:
    # A schema made in Python (not from a request body) may hold a key that is not a string: its
    # JSON text reads as another schema, so it is checked as it is.
    by_number: dict[str, Any] = {"type": "object", "properties": {1: {"type": "string"}}}
    by_text: dict[str, Any] = {"type": "object", "properties": {"1": {"type": "string"}}}
    plain = FunctionTool.model_construct(name="f", parameters=by_text, strict=None)
    odd = FunctionTool.model_construct(name="f", parameters=by_number, strict=None)
    assert contract.check_arguments(plain, "c", '{"1":5}') is not None
    assert contract.check_arguments(odd, "c", '{"1":5}') is None  # jsonschema never sees key 1 in the value
    assert contract.check_arguments(plain, "c", '{"1":5}') is not None
    assert len(contract._schemas._entries) == 1


def test_both_caches_stay_within_their_bounds() -> None:
    schemas, verdicts = contract._Schemas(max_entries=3, max_bytes=10_000), contract._Verdicts(max_entries=5)
    saved = contract._schemas, contract._verdicts
    contract._schemas, contract._verdicts = schemas, verdicts
    try:
        for n in range(20):
            schema = {"type": "object", "properties": {f"p{n}": {"type": "integer"}}}
            for value in range(4):
                assert message(schema, json.dumps({f"p{n}": value})) is None
            assert message(schema, json.dumps({f"p{n}": "x"})) == f"'x' is not of type 'integer' (at p{n})"
            assert len(schemas._entries) <= 3 and len(verdicts._entries) <= 5
            assert schemas.bytes == sum(len(k) for k in schemas._entries) <= 10_000
            assert verdicts.bytes == sum(size for _, size in verdicts._entries.values())
        big = "x" * 200_000
        assert message({"type": "string", "maxLength": 1}, json.dumps(big)) is not None
        assert verdicts.bytes <= verdicts.max_bytes
    finally:
        contract._schemas, contract._verdicts = saved
