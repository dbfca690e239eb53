"""Each rule fires through its catalogue entry: one test per entry of `emulator/messages.py`.

A trigger is the smallest input that makes the rule answer, in this tier (the app in-process on
the fake runner, or the function that holds the rule). The test patches the entry to mark what it
makes, runs the trigger, and finds the mark in what the client reads (and, for an error answered
over HTTP, the entry's status, code, type and param in the envelope): so the rule is the one
that fires, and it words its message through the catalogue, not inline. An entry with no trigger
in this tier names the integration test that makes it answer (`ELSEWHERE`), which must exist and
hold the entry's wording.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

ROOT = Path(__file__).resolve().parents[2]


class Context:
    """What a trigger may use: the app in-process (raw and through the SDK)."""

    def __init__(self, http: TestClient, sdk: openai.OpenAI) -> None:
        self.http = http
        self.sdk = sdk

    def post(self, path: str, body: Any, **headers: str) -> Any:
        content = json.dumps(body).encode()
        return self.http.post(path, content=content, headers={"content-type": "application/json", **headers})

    def create(self, **body: Any) -> Any:
        return self.post("/v1/responses", {"model": "m", **body})


Trigger = Callable[[Context], object]
TRIGGERS: dict[str, Trigger] = {}


def trigger(*names: str) -> Callable[[Trigger], Trigger]:
    def register(function: Trigger) -> Trigger:
        for name in names:
            assert name not in TRIGGERS, f"two triggers for {name}"
            TRIGGERS[name] = function
        return function

    return register


ELSEWHERE: dict[str, str] = {}
"""Entries whose rule needs what this tier does not start (V8, a server, a socket): the
integration test (`path::test`) that makes each answer."""


# ---- the harness ---------------------------------------------------------------------------------------


def _mark(name: str) -> str:
    return f"[{name}]"


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], list[EmulatorError | str]]]:
    def mark(name: str) -> list[EmulatorError | str]:
        entry = messages.CATALOGUE[name]
        made: list[EmulatorError | str] = []

        def marking(*args: Any, **kwargs: Any) -> EmulatorError | str:
            result = entry.function(*args, **kwargs)
            if isinstance(result, EmulatorError):
                result.message = _mark(name) + result.message
                result.args = (result.message,)
            else:
                result = _mark(name) + result
            made.append(result)
            return result

        monkeypatch.setattr(messages, name, marking)
        return made

    yield mark


def _answered(observed: object) -> bool:
    """Whether `observed` is an HTTP response (the test client's)."""
    return hasattr(observed, "status_code") and hasattr(observed, "json") and hasattr(observed, "text")


def _read(observed: object) -> str:
    if _answered(observed):
        return str(observed.text)
    if isinstance(observed, openai.APIStatusError):
        return json.dumps(observed.body)
    if isinstance(observed, EmulatorError):
        return json.dumps(observed.body())
    if isinstance(observed, BaseException):
        return str(observed)
    if isinstance(observed, str):
        return observed
    return json.dumps(observed, default=str)


@pytest.mark.parametrize("name", list(messages.CATALOGUE))
def test_the_rule_fires_through_its_entry(
    name: str, unit_http: TestClient, unit_sdk: openai.OpenAI, marked: Callable[[str], list[EmulatorError | str]]
) -> None:
    if name in ELSEWHERE:
        pytest.skip(f"answered in the integration tier: {ELSEWHERE[name]}")
    assert name in TRIGGERS, f"messages.{name} has no trigger here and no integration test in ELSEWHERE"
    made = marked(name)
    observed = TRIGGERS[name](Context(unit_http, unit_sdk))
    assert made, f"the trigger of {name} did not reach messages.{name}"
    read = _read(observed)
    assert _mark(name) in read, f"what the client reads does not come from messages.{name}:\n{read}"
    last = made[-1]
    if _answered(observed) and isinstance(last, EmulatorError) and observed.status_code >= 400:
        assert observed.status_code == last.status
        assert observed.json()["error"] == last.body()["error"]


def test_every_entry_has_one_trigger_or_one_integration_test() -> None:
    assert not set(TRIGGERS) & set(ELSEWHERE)
    assert set(TRIGGERS) | set(ELSEWHERE) == set(messages.CATALOGUE), sorted(
        set(messages.CATALOGUE) ^ (set(TRIGGERS) | set(ELSEWHERE))
    )


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_the_integration_test_named_exists_and_holds_the_wording(name: str) -> None:
    path, _, test = ELSEWHERE[name].partition("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert test in defined, f"{ELSEWHERE[name]} does not exist"
    made = messages.CATALOGUE[name].sample()
    wording = made.message if isinstance(made, EmulatorError) else made
    fixed = max((part for part in _fixed_parts(wording)), key=len)
    assert fixed in source, f"{path} does not hold {fixed!r}, of messages.{name}"


def _fixed_parts(wording: str) -> list[str]:
    """The parts of a sample wording between its `<placeholders>`."""
    parts, rest = [], wording
    while "<" in rest and ">" in rest.split("<", 1)[1]:
        head, _, tail = rest.partition("<")
        parts.append(head)
        rest = tail.partition(">")[2]
    return [*parts, rest]


# ==== the triggers, by surface ==========================================================================

# ---- stored responses and items --------------------------------------------------------------------


@trigger("previous_response_not_found")
def _(c: Context) -> object:
    return c.create(input="hi", previous_response_id="resp_nope")
