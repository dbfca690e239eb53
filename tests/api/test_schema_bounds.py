"""A tool schema is untrusted input, and checking it must neither hold the event loop nor run unbounded.

Before these bounds, the declaration check of one schema (the meta-schema check and the compile of its
patterns, before any value is checked against it) took time in proportion to the schema on the event
loop: 100,000 properties, an `allOf` of 100,000 entries, 50,000 `$anchor`s or 5,000
`patternProperties` each held it for more than 30 s, 20,000 `$id`s for 24 s. Now each schema is
counted first, in linear time, and one past a bound (docs/limits.md) is the hosted API's 400 for an
invalid schema, naming the tool and the bound; a large schema within the bounds is checked in a worker
thread; the value check counts what an `enum` compares and what patterns match against its budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.rules import contract
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import assert_envelope, program_message
from tests.usage.held import Held, while_held

PROGRAM = program_message("const r = await tools.lookup({q: 'x'}); text(JSON.stringify(r));")
PTC = {"type": "programmatic_tool_calling"}
GOOD: dict[str, Any] = {
    "type": "function",
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "allowed_callers": ["programmatic"],
}
STRICT: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["q", "n"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=Path(tmp_path_factory.mktemp("bounds")), pool_size=1)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def create(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": [PTC, {**GOOD, **fields}]})


def works(http: httpx.Client) -> None:
    """The server goes on: a request with a good schema runs its program."""
    response = create(http)
    assert response.status_code == 200, response.text[:500]
    assert any(item["type"] == "function_call" for item in response.json()["output"])


HOSTILE = {
    "100k-properties": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(100_000)}},
    "100k-allOf": {"allOf": [{"type": "object"} for _ in range(100_000)]},
    "50k-anchors": {"$defs": {f"d{i}": {"$anchor": f"a{i}"} for i in range(50_000)}},
    "2k-anchors": {"$defs": {f"d{i}": {"$anchor": f"a{i}"} for i in range(2_000)}},
    "20k-ids": {"$defs": {f"d{i}": {"$id": f"https://example.com/{i}"} for i in range(20_000)}},
    "5k-patternProperties": {"type": "object", "patternProperties": {f"^p{i}$": {} for i in range(5_000)}},
    "prefixItems": {"type": "array", "prefixItems": [{"type": "string"} for _ in range(30_000)]},
    "if-then-chain": {"allOf": [{"if": {"type": "string"}, "then": {"minLength": 1}} for _ in range(20_000)]},
    "enum-of-1000-arrays": {"enum": [list(range(1_000)) for _ in range(1_000)]},
    "60k-error-messages": {"type": ["strin"] * 60_000},
    "propertyNames": {"type": "object", "propertyNames": {"enum": [f"k{i}" for i in range(100_000)]}},
}
HOLDS = "the schema holds more"
CHECKED = "than this server checks (at most"
IDENTIFIERS = f"{HOLDS} $id, $anchor and $dynamicAnchor keywords {CHECKED} {contract.MAX_SCHEMA_IDENTIFIERS})"
REASONS = {
    "5k-patternProperties": f"{HOLDS} distinct patterns {CHECKED} {contract.MAX_SCHEMA_PATTERNS})",
    "2k-anchors": IDENTIFIERS,
    "20k-ids": IDENTIFIERS,
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("field", ["parameters", "output_schema"])
def test_a_schema_past_a_bound_is_a_400_naming_the_tool_before_it_is_checked(
    http: httpx.Client, case: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The meta-schema check never starts on such a schema (it would take seconds to minutes)."""
    checks: list[object] = []
    meta_problem = contract.meta_problem

    def counted(*args: Any, **kwargs: Any) -> str | None:
        checks.append(args)
        return meta_problem(*args, **kwargs)

    monkeypatch.setattr(contract, "meta_problem", counted)
    reason = REASONS.get(case, f"{HOLDS} values {CHECKED} {contract.MAX_SCHEMA_VALUES})")
    response = create(http, **{field: HOSTILE[case]})
    what = "schema" if field == "parameters" else "output_schema"
    assert_envelope(
        response,
        400,
        f"Invalid {what} for function 'lookup': {reason}.",
        param=f"tools[1].{field}",
        code="invalid_function_parameters",
    )
    assert checks == []
    works(http)


def test_schemas_past_the_request_bound_together_are_refused(http: httpx.Client) -> None:
    """Each schema within its bound, 100,001 values together: the tool that crosses it is named."""
    half = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(24_000)}}  # 48,003 values
    tools = [PTC, {**GOOD, "parameters": half}, {**GOOD, "name": "a", "parameters": half}]
    tools.append({**GOOD, "name": "b", "parameters": {"enum": list(range(4_000))}})
    response = http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": tools})
    assert_envelope(
        response,
        400,
        f"Invalid schema for function 'b': the schema holds more values across the request's tool schemas than "
        f"this server checks (at most {contract.MAX_REQUEST_SCHEMA_VALUES}).",
        param="tools[3].parameters",
    )
    works(http)


def test_a_large_schema_within_the_bounds_is_checked_off_the_event_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The meta-schema check of a large schema is held (an event) until health has been answered:
    on the event loop, health could not be, and the create would never end."""
    held = Held()
    monkeypatch.setattr(contract, "meta_problem", held.around(contract.meta_problem))
    large = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2_000)}, "title": "held"}
    while_held(server, held, lambda client: create(client, parameters=large), small=False)


def test_a_schema_of_many_patterns_is_checked_off_the_event_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each distinct pattern counts as 250 values toward the worker thread's threshold: RE2 compiles
    each (up to some 8 ms for one of 5,000 instructions), and a schema of 256 such patterns, some 800
    values, was checked on the event loop before, holding every other client for 0.4 s. Thirty
    patterns in a schema of about a hundred values: held (an event) until health has been answered."""
    held = Held()
    monkeypatch.setattr(contract, "meta_problem", held.around(contract.meta_problem))
    patterned = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": f"^held{i}$"} for i in range(30)},
    }
    while_held(server, held, lambda client: create(client, parameters=patterned), small=False)


def test_a_schema_of_four_patterns_is_checked_off_the_event_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four patterns of Unicode classes folded for case (`(?i)[\\pL\\pN\\pP]{3}`, 4,400
    instructions) took RE2 some 8 ms each to compile: counted as 50 values each, nineteen of them
    were compiled on the event loop (some 160 ms). Held (an event) until health has been answered."""
    held = Held()
    monkeypatch.setattr(contract, "meta_problem", held.around(contract.meta_problem))
    patterned = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": f"(?i)[\\pL\\pN\\pP]{{3}}{i}"} for i in range(4)},
    }
    while_held(server, held, lambda client: create(client, parameters=patterned), small=False)


def _outputs(http: httpx.Client, output_schema: dict[str, Any], output: Any) -> str | None:
    """The contract warning a tool output gets against `output_schema` (None: it conforms)."""
    tool = {**GOOD, "output_schema": output_schema}
    first = http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": [PTC, tool]})
    assert first.status_code == 200, first.text[:500]
    body = first.json()
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    answer = {"type": "function_call_output", "call_id": call["call_id"], "caller": call["caller"]}
    done = http.post(
        "/responses",
        json={
            "model": "m",
            "previous_response_id": body["id"],
            "input": [{**answer, "output": json.dumps(output)}],
            "tools": [PTC, tool],
        },
    )
    assert done.status_code == 200, done.text[:500]
    warning: str | None = done.headers.get("x-ptc-emulator-contract-warning")
    return warning


def test_an_enum_of_large_entries_counts_against_the_check_s_budget(http: httpx.Client) -> None:
    """An enum of 4,000 arrays of 10 items, checked at each of 5,000 items: 20,000,000 comparisons
    of arrays before. Each comparison with the enum is counted as the values it holds, and the
    value is reported as too costly to check; a short array is still checked."""
    schema = {"type": "array", "items": {"enum": [[n] * 10 for n in range(4_000)]}}
    warning = _outputs(http, schema, [[1] * 10] * 5_000) or ""
    assert "checking against the schema took more than" in warning
    assert _outputs(http, schema, [[1] * 10, [2] * 10]) is None
    assert "is not one of" in (_outputs(http, schema, [[1] * 9]) or "")


def test_patterns_matched_against_many_keys_count_against_the_check_s_budget(http: httpx.Client) -> None:
    """200 patterns against an object of 20,000 keys: 4,000,000 matches, counted."""
    schema = {"type": "object", "patternProperties": {f"^p{i}$": {} for i in range(200)}, "additionalProperties": False}
    warning = _outputs(http, schema, {f"k{i}": 1 for i in range(20_000)}) or ""
    assert "checking against the schema took more than" in warning
    assert "do not match any of the regexes" in (_outputs(http, schema, {"k1": 1, "k2": 2}) or "")


def test_only_a_few_errors_are_computed_for_a_value_with_many(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60,000 items of the wrong type: the first is reported, and no more than a few errors are made."""
    from jsonschema import exceptions

    made: list[int] = []
    init = exceptions.ValidationError.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        init(self, *args, **kwargs)

    schema = {"type": "array", "items": {"type": "string"}, "title": "many errors"}
    monkeypatch.setattr(exceptions.ValidationError, "__init__", counted)
    warning = _outputs(http, schema, [1] * 60_000) or ""
    assert "1 is not of type 'string' (at [0])" in warning
    assert len(made) < 100


def test_a_function_whose_parameters_are_not_an_object_is_refused(http: httpx.Client) -> None:
    response = create(http, parameters="abc")
    assert_envelope(
        response,
        400,
        "Invalid type for 'tools[1].parameters': expected an object, but got a string instead.",
        param="tools[1].parameters",
        code="invalid_type",
    )


STRICT_CASES = {
    "no-additionalProperties": (
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "In context=(), 'additionalProperties' is required to be supplied and to be false.",
    ),
    "missing-required": (
        {**STRICT, "required": ["q"]},
        "In context=(), 'required' is required to be supplied and to be an array including every key in "
        "properties. Missing 'n'.",
    ),
    "nested": (
        {**STRICT, "properties": {**STRICT["properties"], "n": {"type": "object", "properties": {}}}},
        "In context=('properties', 'n'), 'additionalProperties' is required to be supplied and to be false.",
    ),
}


@pytest.mark.parametrize("case", list(STRICT_CASES))
def test_strict_true_refuses_parameters_that_are_not_strict_compliant(http: httpx.Client, case: str) -> None:
    schema, reason = STRICT_CASES[case]
    response = create(http, parameters=schema, strict=True)
    assert_envelope(
        response,
        400,
        f"Invalid schema for function 'lookup': {reason}",
        param="tools[1].parameters",
        code="invalid_function_parameters",
    )
    works(http)


def test_strict_compliant_parameters_and_strict_omitted_or_false_are_accepted(http: httpx.Client) -> None:
    loose = STRICT_CASES["no-additionalProperties"][0]
    for fields in (
        {"parameters": STRICT, "strict": True},
        {"parameters": loose},
        {"parameters": loose, "strict": False},
    ):
        response = create(http, **fields)
        assert response.status_code == 200, (fields, response.text[:500])


def test_an_agents_api_function_schema_past_a_bound_is_refused_and_a_large_one_checked_off_the_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Agents API checks its function tools' `parameters` with the same bounds; a large one
    within them is checked in a worker thread (held here until health has been answered)."""
    beta = {"OpenAI-Beta": "agents=v1"}
    hostile = {"type": "function", "name": "lookup", "description": "finds", "parameters": HOSTILE["100k-allOf"]}
    with httpx.Client(base_url=server.base_url, timeout=120, headers=beta) as http:
        response = http.post("/agents", json={"model": "m", "tools": [hostile]})
        assert_envelope(
            response,
            400,
            f"Invalid schema for function 'lookup': {HOLDS} values {CHECKED} {contract.MAX_SCHEMA_VALUES}).",
            param="tools[0].parameters",
            code="invalid_function_parameters",
        )
    held = Held()
    monkeypatch.setattr(contract, "meta_problem", held.around(contract.meta_problem))
    large = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2_000)}, "title": "agent"}
    body = {"model": "m", "tools": [{**hostile, "parameters": large}]}
    while_held(server, held, lambda client: client.post("/agents", json=body, headers=beta), small=False)


def test_a_schema_is_measured_once_on_create(http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count of a schema's values (a walk of all of it) is made once and passed along: it was
    made three times on a create (the request's bound, `schema_problem`, then `_schema_problem`)."""
    measure = contract._measure
    walks: list[object] = []

    def counted(document: Any, limit: int) -> tuple[int, int, int]:
        if limit == contract.MAX_SCHEMA_VALUES and isinstance(document, dict) and document.get("title") == "once":
            walks.append(document)
        return measure(document, limit)

    monkeypatch.setattr(contract, "_measure", counted)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "title": "once"}
    response = create(http, parameters=schema)
    assert response.status_code == 200, response.text[:500]
    assert len(walks) == 1
    output = {"type": "object", "title": "once", "description": "an output schema"}
    walks.clear()
    response = create(http, parameters={**schema, "description": "parameters"}, output_schema=output)
    assert response.status_code == 200, response.text[:500]
    assert len(walks) == 2  # the parameters and the output schema, each once
