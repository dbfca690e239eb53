"""A tool schema that is not a JSON Schema is the hosted API's 400, never a 500.

The hosted API answers `Invalid schema for function '<name>': <the first error>.` with
`param: tools[i].parameters` and `code: invalid_function_parameters`; the emulator says the same of
an `output_schema` (which the hosted API checks outputs against as well) and refuses both on every
create: a first request, a `previous_response_id` continuation, a `store: false` replay and a
WebSocket `response.create`. The same client (the same kept-alive connection, the same socket)
is then used for a request that works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets.sync.client

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import assert_envelope, program_message

PROGRAM = program_message("const r = await tools.lookup({q: 'x'}); text(JSON.stringify(r));")
GOOD: dict[str, Any] = {
    "type": "function",
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "output_schema": {"type": "object"},
    "allowed_callers": ["programmatic"],
}
PTC = {"type": "programmatic_tool_calling"}


def tool(**schemas: Any) -> dict[str, Any]:
    return {**GOOD, **schemas}


BAD_SCHEMAS = [
    (
        "parameters",
        {"type": "object", "required": 5},
        "Invalid schema for function 'lookup': 5 is not of type 'array'.",
    ),
    (
        "parameters",
        {"type": "object", "properties": {"q": {"type": "strin"}}},
        "Invalid schema for function 'lookup': ",
    ),
    ("parameters", {"type": "object", "properties": {"q": {"pattern": "("}}}, "is not a pattern this server runs: "),
    ("output_schema", {"type": "object", "required": 5}, "Invalid output_schema for function 'lookup': 5 is not"),
    (
        "parameters",
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(?=a)"}}},
        "Invalid schema for function 'lookup': '^(?=a)' is not a pattern this server runs: ",
    ),
    (
        "output_schema",
        {"type": "object", "patternProperties": {"^(a)\\1$": {}}},
        "Invalid output_schema for function 'lookup': '^(a)\\\\1$' is not a pattern this server runs: ",
    ),
]
IDS = ["required-not-array", "unknown-type", "bad-pattern", "output-schema", "lookahead", "backreference"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=Path(tmp_path_factory.mktemp("schemas")), pool_size=1)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    # One client for the whole module: every refusal must leave its kept-alive connection usable.
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        yield client


def paused(http: httpx.Client, store: bool) -> dict[str, Any]:
    response = http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": [PTC, GOOD], "store": store})
    assert response.status_code == 200, response.text[:500]
    return response.json()  # type: ignore[no-any-return]


def call_output(body: dict[str, Any]) -> dict[str, Any]:
    (call,) = [item for item in body["output"] if item["type"] == "function_call"]
    return {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "caller": call["caller"],
        "output": json.dumps({"hit": 1}),
    }


def finishes(http: httpx.Client) -> None:
    """A complete loop on the same client: the connection the refusal went over still works."""
    body = paused(http, store=True)
    done = http.post(
        "/responses",
        json={"model": "m", "previous_response_id": body["id"], "input": [call_output(body)], "tools": [PTC, GOOD]},
    )
    assert done.status_code == 200, done.text[:500]
    assert done.json()["output"][-1]["content"][0]["text"] == '{"hit":1}'


@pytest.mark.parametrize(("field", "schema", "message"), BAD_SCHEMAS, ids=IDS)
def test_an_invalid_schema_on_create_is_a_400_naming_the_tool(
    http: httpx.Client, field: str, schema: Any, message: str
) -> None:
    response = http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": [PTC, tool(**{field: schema})]})
    assert_envelope(response, 400, message, param=f"tools[1].{field}", code="invalid_function_parameters")
    finishes(http)


@pytest.mark.parametrize(("field", "schema", "message"), BAD_SCHEMAS, ids=IDS)
def test_an_invalid_schema_on_a_stored_continuation_is_a_400(
    http: httpx.Client, field: str, schema: Any, message: str
) -> None:
    body = paused(http, store=True)
    response = http.post(
        "/responses",
        json={
            "model": "m",
            "previous_response_id": body["id"],
            "input": [call_output(body)],
            "tools": [PTC, tool(**{field: schema})],
        },
    )
    assert_envelope(response, 400, message, param=f"tools[1].{field}", code="invalid_function_parameters")
    finishes(http)


@pytest.mark.parametrize(("field", "schema", "message"), BAD_SCHEMAS, ids=IDS)
def test_an_invalid_schema_on_a_replayed_continuation_is_a_400(
    http: httpx.Client, field: str, schema: Any, message: str
) -> None:
    body = paused(http, store=False)
    items = [{"role": "user", "content": PROGRAM}, *body["output"], call_output(body)]
    response = http.post(
        "/responses", json={"model": "m", "input": items, "store": False, "tools": [PTC, tool(**{field: schema})]}
    )
    assert_envelope(response, 400, message, param=f"tools[1].{field}", code="invalid_function_parameters")
    finishes(http)


def test_a_pattern_that_backtracks_exponentially_in_re_is_checked_in_linear_time(http: httpx.Client) -> None:
    """`^(a|a)+$` against forty a's and a `!` takes Python's `re` 2**40 steps; RE2 checks it at
    once, and the mismatch is reported as any other."""
    evil = tool(output_schema={"type": "string", "pattern": "^(a|a)+$"})
    body = paused(http, store=True)
    answer = {**call_output(body), "output": json.dumps("a" * 40 + "!")}
    done = http.post(
        "/responses",
        json={"model": "m", "previous_response_id": body["id"], "input": [answer], "tools": [PTC, evil]},
    )
    assert done.status_code == 200, done.text[:500]
    assert "does not match '^(a|a)+$'" in done.headers["x-ptc-emulator-contract-warning"]
    finishes(http)


def output_warning(http: httpx.Client, output_schema: dict[str, Any], output: Any) -> str | None:
    """The contract warning a tool output gets against `output_schema` (None: it conforms)."""
    body = paused(http, store=True)
    answer = {**call_output(body), "output": json.dumps(output)}
    done = http.post(
        "/responses",
        json={
            "model": "m",
            "previous_response_id": body["id"],
            "input": [answer],
            "tools": [PTC, tool(output_schema=output_schema)],
        },
    )
    assert done.status_code == 200, done.text[:500]
    return done.headers.get("x-ptc-emulator-contract-warning")


DRAFT_7 = "http://json-schema.org/draft-07/schema#"
EVIL = "a" * 40 + "!"


def _keyed(patrn: str, beside: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "patternProperties": {patrn: {}}, **beside}


def _dialect(patrn: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$schema": DRAFT_7, "type": "string", "pattern": patrn}}}


ENGINE_CASES = [
    (
        lambda p: _keyed(p, {"additionalProperties": False}),
        lambda text: {text: 1},
        "does not match any of the regexes: ",
    ),
    (
        lambda p: _keyed(p, {"unevaluatedProperties": False}),
        lambda text: {text: 1},
        "Unevaluated properties are not allowed (",
    ),
    (_dialect, lambda text: {"x": text}, "does not match "),
]


@pytest.mark.parametrize(
    ("schema", "output", "message"),
    ENGINE_CASES,
    ids=["additionalProperties", "unevaluatedProperties", "subschema-$schema"],
)
def test_every_keyword_that_matches_a_pattern_matches_it_on_re2(
    http: httpx.Client, schema: Any, output: Any, message: str
) -> None:
    """jsonschema matches patterns with Python's `re` beside `pattern` and `patternProperties`: in
    `additionalProperties` and `unevaluatedProperties` (the keys `patternProperties` covers) and in
    a subschema whose `$schema` names another draft (its own keyword classes). Each runs on RE2
    here. Which engine ran shows without a clock: `$` matches before a final newline in `re`, never
    in RE2, so `a` plus a newline is a key (a value) that `^a$` does not cover, and it is reported
    as such rather than counted as matched. Then `^(a|a)+$` against forty a's and a `!` (2**40
    steps for `re`) is checked at once."""
    assert message in (output_warning(http, schema("^a$"), output("a\n")) or "")
    assert message in (output_warning(http, schema("^(a|a)+$"), output(EVIL)) or "")
    assert output_warning(http, schema("^(a|a)+$"), output("aaaa")) is None
    finishes(http)


def test_a_pattern_in_re2_syntax_is_a_pattern(http: httpx.Client) -> None:
    """The meta-schema's `regex` format is not checked with Python's `re` (which refuses RE2's
    `\\p{Lu}`): every pattern is compiled on RE2, as it is run."""
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^\\p{Lu}+$"}}}
    assert output_warning(http, schema, {"x": "ABC"}) is None
    assert "does not match '^\\\\p{Lu}+$'" in (output_warning(http, schema, {"x": "abc"}) or "")
    finishes(http)


def test_a_schema_whose_references_loop_is_reported_not_a_500(http: httpx.Client) -> None:
    """`{"$ref": "#"}` is a JSON Schema, but checking a value against it follows the reference back
    to itself without end: the output is reported as unchecked against an invalid schema, and the
    server answers."""
    warning = output_warning(http, {"$ref": "#"}, {"hit": 1}) or ""
    assert "the schema itself is invalid (its references loop back to themselves without end)" in warning
    finishes(http)


def test_an_invalid_schema_in_a_namespace_or_a_tool_search_is_a_400(http: httpx.Client) -> None:
    member = {**tool(parameters={"type": "object", "required": 5}), "name": "find"}
    namespace = {"type": "namespace", "name": "docs", "description": "documents", "tools": [member]}
    response = http.post("/responses", json={"model": "m", "input": "hi", "tools": [namespace]})
    assert_envelope(response, 400, "Invalid schema for function 'find': 5 is not", param="tools[0].tools[0].parameters")
    search = {"type": "tool_search", "execution": "client", "parameters": {"type": 7}}
    response = http.post("/responses", json={"model": "m", "input": "hi", "tools": [search]})
    assert_envelope(response, 400, "Invalid schema for function 'tool_search': ", param="tools[0].parameters")
    finishes(http)


def test_the_sdk_gets_the_400_and_its_client_goes_on(server: EmulatorServer) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=60) as sdk:
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.responses.create(
                model="m",
                input=PROGRAM,
                tools=[PTC, tool(parameters={"type": "object", "required": 5})],  # type: ignore[list-item]
            )
        assert raised.value.code == "invalid_function_parameters"
        assert raised.value.param == "tools[1].parameters"
        assert "Invalid schema for function 'lookup': 5 is not of type 'array'." in raised.value.message
        first = sdk.responses.create(model="m", input=PROGRAM, tools=[PTC, GOOD])  # type: ignore[list-item]
        assert any(item.type == "function_call" for item in first.output)


def test_an_invalid_schema_over_the_websocket_is_an_error_event_and_the_socket_goes_on(server: EmulatorServer) -> None:
    with websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=10) as ws:

        def send(**body: Any) -> dict[str, Any]:
            ws.send(json.dumps({"type": "response.create", "model": "m", "store": False, **body}))
            while True:
                event = json.loads(ws.recv(timeout=60))
                if event["type"] in ("error", "response.completed"):
                    return event  # type: ignore[no-any-return]

        first = send(input=PROGRAM, tools=[PTC, GOOD])
        assert first["type"] == "response.completed", first
        bad = tool(output_schema={"type": "object", "required": 5})
        refused = send(
            previous_response_id=first["response"]["id"], input=[call_output(first["response"])], tools=[PTC, bad]
        )
        assert refused["type"] == "error" and refused["status"] == 400, refused
        assert refused["error"]["code"] == "invalid_function_parameters", refused
        assert "Invalid output_schema for function 'lookup': 5 is not" in refused["error"]["message"], refused
        # A failed turn evicts the response it continued (as the hosted socket does): the socket starts again.
        again = send(input=PROGRAM, tools=[PTC, GOOD])
        assert again["type"] == "response.completed", again
        done = send(
            previous_response_id=again["response"]["id"], input=[call_output(again["response"])], tools=[PTC, GOOD]
        )
        assert done["type"] == "response.completed", done
        assert done["response"]["output"][-1]["content"][0]["text"] == '{"hit":1}'


def test_an_agents_api_function_tool_with_an_invalid_schema_is_refused_when_declared(server: EmulatorServer) -> None:
    agent_tool = {"type": "function", "name": "lookup", "description": "finds", "parameters": {"required": 5}}
    body = {"environment": {"type": "none"}, "agent": {"model": "m", "tools": [agent_tool]}, "input": "hi"}
    beta = {"OpenAI-Beta": "agents=v1"}
    with httpx.Client(base_url=server.base_url, timeout=60, headers=beta) as http:
        response = http.post("/agents/sessions", json=body)
        assert_envelope(
            response,
            400,
            "Invalid schema for function 'lookup': 5 is not of type 'array'.",
            param="agent.tools[0].parameters",
            code="invalid_function_parameters",
        )
        response = http.post("/agents", json={"model": "m", "tools": [agent_tool]})
        assert_envelope(response, 400, "Invalid schema for function 'lookup'", param="tools[0].parameters")
        good = {**agent_tool, "parameters": {"type": "object"}}
        assert http.post("/agents", json={"model": "m", "tools": [good]}).status_code == 200


def _doubling(links: int) -> dict[str, Any]:
    """A chain of `links` two-way `anyOf`s, each branch a `$ref` to the next link, ending in an
    integer: a value that is no integer is tried down every path, 2**links of them."""
    defs: dict[str, Any] = {f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(links)}
    defs[f"l{links}"] = {"type": "integer"}
    return {"type": "object", "properties": {"v": {"$ref": "#/$defs/l0"}}, "$defs": defs}


def test_a_schema_whose_branches_multiply_is_checked_within_a_bound(http: httpx.Client) -> None:
    """No pattern, and still exponential: against sixty links (2**60 paths) a string held the event
    loop for ever (twenty-six links took 11 s). The visits a check makes are bounded, and the
    output is reported as too costly to check; the same schema still checks an integer, and a short
    chain still reports the mismatch itself."""
    warning = output_warning(http, _doubling(60), {"v": "no"}) or ""
    assert "checking against the schema took more than 10032 steps" in warning
    assert output_warning(http, _doubling(60), {"v": 1}) is None
    assert "'no' is not valid under any of the given schemas" in (output_warning(http, _doubling(3), {"v": "no"}) or "")
    finishes(http)


def test_unique_items_of_objects_is_checked_in_linear_time(http: httpx.Client) -> None:
    """jsonschema compares every pair of items that do not sort: `uniqueItems` over 20,000
    objects ran for more than 30 s. The items are hashed in a canonical form instead; equal
    values (`1` and `1.0`, keys in another order) are still found, `true` and `1` still apart."""
    many = [{"a": i} for i in range(20_000)]
    assert output_warning(http, {"type": "array", "uniqueItems": True}, many) is None
    assert output_warning(http, {"type": "array", "uniqueItems": True}, [*many, {"a": 7}]) is not None
    twins = [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}]
    assert "has non-unique elements" in (output_warning(http, {"uniqueItems": True}, twins) or "")
    assert output_warning(http, {"uniqueItems": True}, [1, True, [True], [1]]) is None
    finishes(http)


def test_multiple_of_a_float_for_an_integer_past_floats_is_checked_not_a_500(http: httpx.Client) -> None:
    """An integer past a float's range divided by a float `multipleOf` raised OverflowError: the
    continuation was a 500. The quotient is found exactly instead."""
    assert output_warning(http, {"multipleOf": 0.5}, 10**400) is None
    assert "is not a multiple of 1e+300" in (output_warning(http, {"multipleOf": 1e300}, 10**400 + 1) or "")
    finishes(http)
