"""A custom tool's lark grammar is untrusted input: compiling it is bounded and done off the event loop.

Before, the parse of a call's input was bounded (`LARK_CALL_BUDGET`) but the compile was not: lark
expands repetitions and optional items into rules, and `start: (("a"~30)~30)~30` (23 characters)
compiled for more than a minute, on the event loop. Now the compile counts its Python calls against
`LARK_COMPILE_BUDGET` and a grammar past it is the 400 for a grammar that does not compile; a request
declaring a lark grammar is read in a worker thread. The budget is lowered here (reached sooner,
counted the same way), as the parse's is in the unit tier.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.rules import contract
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import assert_envelope, program_message

PROGRAM = program_message("text('ok');")

JSON_GRAMMAR = r"""
?start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=Path(tmp_path_factory.mktemp("grammars")), pool_size=1)).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server: EmulatorServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


@pytest.fixture(autouse=True)
def lowered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(contract, "LARK_COMPILE_BUDGET", 200_000)
    contract._cached_grammar.cache_clear()
    yield
    contract._cached_grammar.cache_clear()  # nothing compiled at the lowered budget is kept


def create(http: httpx.Client, definition: str) -> httpx.Response:
    grammar = {"type": "grammar", "syntax": "lark", "definition": definition}
    tools = [{"type": "custom", "name": "g", "format": grammar}, {"type": "programmatic_tool_calling"}]
    return http.post("/responses", json={"model": "m", "input": PROGRAM, "tools": tools})


@pytest.mark.parametrize(
    "definition",
    [
        'start: (("a"~30)~30)~30',  # ran for more than a minute
        "start: " + " ".join('"a"?' for _ in range(30)),  # 2**30 alternatives
    ],
)
def test_a_grammar_too_costly_to_compile_is_a_400_and_is_not_compiled_again(
    http: httpx.Client, definition: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiles: list[str] = []
    compile_grammar = contract._compile_grammar

    def counted(syntax: str, text: str) -> Any:
        compiles.append(text)
        return compile_grammar(syntax, text)

    monkeypatch.setattr(contract, "_compile_grammar", counted)
    for _ in range(2):
        assert_envelope(
            create(http, definition),
            400,
            "Invalid lark grammar for custom tool 'g': the grammar is too costly to compile: at most 200000 steps",
            param="tools[0].format.definition",
        )
    assert compiles == [definition]  # the refusal is kept, as a compiled grammar is
    ordinary = create(http, JSON_GRAMMAR)
    assert ordinary.status_code == 200, ordinary.text[:500]  # an ordinary grammar compiles within the budget


def test_a_lark_grammar_is_compiled_off_the_event_loop(
    server: EmulatorServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compile is held (an event) until health has been answered: on the event loop, health
    could not be, and the create would never end."""
    release, entered = threading.Event(), threading.Event()
    compile_grammar = contract._compile_grammar

    def held(syntax: str, text: str) -> Any:
        entered.set()
        release.wait(60)
        return compile_grammar(syntax, text)

    monkeypatch.setattr(contract, "_compile_grammar", held)
    outcome: list[httpx.Response] = []
    creating = threading.Thread(target=lambda: outcome.append(create(http, 'start: "held"')))
    creating.start()
    try:
        assert entered.wait(60), "the grammar was never compiled"
        health = httpx.get(f"{server.base_url.rsplit('/v1', 1)[0]}/_emulator/health", timeout=30)
        assert health.status_code == 200
    finally:
        release.set()
        creating.join(120)
    assert outcome and outcome[0].status_code == 200, outcome[0].text[:500] if outcome else "no answer"
