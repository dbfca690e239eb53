"""Fuzz every operation of the app's own OpenAPI schema (`GET /openapi.json`) with schemathesis.

Requests generated from the schema (valid ones and deliberately invalid ones) go to a real
server on 127.0.0.1. Whatever they hold, the server must not answer with a 5xx, and every error
must be OpenAI's envelope. The example count is kept small so the whole module runs in about a
minute on two cores; set `PTC_HARDENING_FUZZ_EXAMPLES` (10 by default) for a deeper run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import is_envelope

FUZZ_EXAMPLES = int(os.environ.get("PTC_HARDENING_FUZZ_EXAMPLES", "10"))


# Catch-all scenarios, so that generated requests which pass validation are played to the end
# (the response echoes their fields; with PTC on, their user text goes through a program) instead
# of all stopping at "no scenario matches".
CATCH_ALL = {
    "fuzz__program.yaml": "priority: -100\nmatch: {input: ''}\nturns:\n"
    "  - program: 'text({{ input }})'\n  - message: '{{ result }}'\n",
    "fuzz__message.yaml": "priority: -101\nmatch: {input: ''}\nturns:\n  - message: 'You said: {{ input }}'\n",
}


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    fixtures = Path(tmp_path_factory.mktemp("fuzz-fixtures"))
    for name, text in CATCH_ALL.items():
        (fixtures / name).write_text(text, encoding="utf-8")
    settings = Settings(
        fixtures=(fixtures,),
        data_dir=Path(tmp_path_factory.mktemp("fuzz")),
        pool_size=2,
        limits=Limits(timeout_s=2.0),
        max_body_bytes=2 * 2**20,
    )
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: EmulatorServer) -> Any:
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{fuzzed_server.port}/openapi.json")


def error_is_an_envelope(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx or 5xx body is `{"error": {"message", "type", "param", "code"}}`."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError as e:
            raise AssertionError(f"{response.status_code} without a JSON body: {response.text[:200]!r}") from e
        assert is_envelope(body), f"{response.status_code} is not OpenAI's error envelope: {body!r}"[:500]
    return None


def can_be_made_invalid(operation: Any) -> bool:
    """Whether the operation has anything a negative case could break: a body, a query, header or
    cookie parameter, or a path parameter with a constraint. Hypothesis would find out too, but
    only by rejecting a thousand drafts before it gives up (`Unsatisfiable`), at a second each."""
    if list(operation.body) or list(operation.query) or list(operation.headers) or list(operation.cookies):
        return True
    for parameter in operation.path_parameters:
        schema = parameter.definition.get("schema", {})
        if schema.get("type") != "string" or set(schema) - {"type", "title", "description"}:
            return True
    return False


def fuzz(operation: Any, mode: GenerationMode) -> None:
    """Send FUZZ_EXAMPLES generated requests for `operation`; raise on the first that fails a check."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        if mode is GenerationMode.POSITIVE and isinstance(case.body, dict) and operation.method.upper() == "POST":
            # The schema marks every field optional, as the SDK does; most generated bodies would
            # stop at "missing model" or "no user message". Fill those in so the rest of the
            # body reaches the engine and is echoed back in the response.
            case.body.setdefault("model", "fuzz-model")
            if not case.body.get("input"):
                case.body["input"] = "hello"
        response = case.call(timeout=30)
        case.validate_response(response, checks=[not_a_server_error, error_is_an_envelope])

    run()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_no_5xx_and_every_error_is_an_envelope(api_schema: Any, mode: GenerationMode) -> None:
    # schemathesis' own pytest integration (`from_fixture(...).parametrize()`) does not run on
    # pytest 9, so each operation gets a plain Hypothesis test here; every failure is collected.
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10, "the schema lost operations"
    fuzzed = 0
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not can_be_made_invalid(operation):
            continue  # a path of plain strings: any string is a valid id, so no case can be invalid
        try:
            fuzz(operation, mode)
            fuzzed += 1
        except Unsatisfiable:
            # Nothing in this operation can be made invalid (no body, and path parameters that
            # take any string): there is no negative case to send.
            assert mode is GenerationMode.NEGATIVE, operation.label
        except Exception as e:  # FailureGroup, or whatever the call raised
            failures.append(f"{operation.label}: {e}"[:3000])
    assert not failures, "\n\n".join(failures)
    assert fuzzed >= 3, "too few operations could be fuzzed"
