"""A custom tool's lark grammar is untrusted input: compiling it is bounded and done off the event loop.

Before, the parse of a call's input was bounded (`LARK_CALL_BUDGET`) but the compile was not: lark
expands repetitions and optional items into rules, and `start: (("a"~30)~30)~30` (23 characters)
compiled for more than a minute, on the event loop. Now the compile counts its Python calls against
`LARK_COMPILE_BUDGET` and a grammar past it is the 400 for a grammar that does not compile; a request
declaring a lark grammar is read in a worker thread. The budget is lowered here (reached sooner,
counted the same way), as the parse's is in the unit tier.
"""

from __future__ import annotations

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


CHAIN = "\n".join(f'r{i}: r{i + 1} "a" | r{i + 1} "b"' for i in range(200)) + '\nr200: "z"\nstart: r0'
"""Small in size (each rule two alternatives of two symbols) but some 1.3 million calls to compile."""


def test_a_grammar_too_costly_to_compile_is_a_400_and_is_not_compiled_again(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = CHAIN
    compiles: list[str] = []
    compile_grammar = contract._compile_grammar

    def counted(syntax: str, text: str) -> Any:
        if text == definition:  # (the server's own warm-up compile may land here too, late)
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


def test_a_lark_grammar_is_compiled_off_the_event_loop(server: EmulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compile is held (an event) until health has been answered: on the event loop, health
    could not be, and the create would never end."""
    held = Held()
    real = contract._compile_grammar
    monkeypatch.setattr(contract, "_compile_grammar", held.around(real, when=lambda syntax, text: "held" in text))
    while_held(server, held, lambda client: create(client, 'start: "held"'), small=False)


@pytest.mark.parametrize(
    ("definition", "size"),
    [
        ('start: (("a"~30)~30)~30', "729000000"),  # ran for more than a minute
        ("start: " + " ".join('"a"?' for _ in range(30)), "966367641600"),  # 2**30 alternatives: 6 s of a worker
    ],
)
def test_a_grammar_too_large_once_expanded_is_refused_before_it_is_compiled(
    http: httpx.Client, definition: str, size: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, these ran lark's expansion until the compile budget ended it (seconds of a worker);
    now the size is estimated from the grammar's tree and lark never builds its rules."""
    from lark import Lark

    built: list[str] = []
    monkeypatch.setattr(Lark, "__init__", lambda self, text, **options: built.append(text))
    assert_envelope(
        create(http, definition),
        400,
        f"Invalid lark grammar for custom tool 'g': the grammar is too large once expanded: about {size} ",
        param="tools[0].format.definition",
    )
    assert built == []


@pytest.mark.parametrize(
    ("imported", "named"),
    [
        ("%import .secret.X", ".secret.X"),  # a path relative to the server's working directory
        ("%import python.NAME -> X", "python.NAME"),  # another of lark's own grammar files
        ("%import grammars.common (X)", "grammars.common"),
    ],
)
def test_only_the_common_terminals_may_be_imported(http: httpx.Client, imported: str, named: str) -> None:
    """Before, lark opened `.lark` files on the server's filesystem for a request's grammar."""
    assert_envelope(
        create(http, f"start: X\n{imported}"),
        400,
        f"Invalid lark grammar for custom tool 'g': %import {named} is not allowed: only lark's common terminals",
        param="tools[0].format.definition",
    )
    allowed = create(http, "start: WORD (WS WORD)*\n%import common.WORD\n%import common (WS)")
    assert allowed.status_code == 200, allowed.text[:500]


def test_a_terminal_re2_cannot_compile_is_a_400_naming_it(http: httpx.Client) -> None:
    assert_envelope(
        create(http, "start: PAIR\nPAIR: /(a)\\1/"),
        400,
        "Invalid lark grammar for custom tool 'g': terminal PAIR is not RE2 syntax: invalid escape sequence: \\1",
        param="tools[0].format.definition",
    )


@pytest.mark.parametrize("group", [("[", "]"), ("(", ")")])
def test_a_grammar_nested_too_deeply_is_a_400_and_one_within_the_bound_compiles(
    http: httpx.Client, group: tuple[str, str]
) -> None:
    """Before, 500 nested brackets (or 5000 parentheses) were a RecursionError in the walk that
    estimates the expanded size: a 500 with a traceback in the log."""
    opening, closing = group
    assert_envelope(
        create(http, "start: " + opening * 120 + '"a"' + closing * 120),
        400,
        "Invalid lark grammar for custom tool 'g': the grammar nests too deeply: its groups ( ) and [ ] make it "
        "more than 200 levels deep",
        param="tools[0].format.definition",
    )
    within = create(http, "start: " + opening * 10 + '"a"' + closing * 10)
    assert within.status_code == 200, within.text[:500]


def test_a_regex_grammar_is_compiled_off_the_event_loop(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RE2's compile of a regex grammar took up to its memory bound on the event loop before (a
    definition of 100,000 alternatives held every other client for 0.45 s). The compile is held (an
    event) until health has been answered: on the event loop, health could not be."""
    held = Held()
    real = contract._compile_grammar
    monkeypatch.setattr(contract, "_compile_grammar", held.around(real, when=lambda syntax, text: "held" in text))
    grammar = {"type": "grammar", "syntax": "regex", "definition": "held|[a-z]+"}
    tools = [{"type": "custom", "name": "g", "format": grammar}, {"type": "programmatic_tool_calling"}]
    body = {"model": "m", "input": PROGRAM, "tools": tools}
    while_held(server, held, lambda client: client.post("/responses", json=body), small=False)


def test_full_collections_are_held_off_while_a_lark_grammar_parses_an_input(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lark's Earley parse makes objects by the hundred thousand; before, they started full
    collections that walked them all holding the interpreter (a program's call with 20,000 nested
    parentheses: health waited 0.15-0.3 s, the parse itself in a worker thread). The parse now runs
    with full collections held off, as a large request's reading does."""
    from lark import Lark

    from ptc_emulator.emulator import collector

    seen: list[bool] = []
    parse = Lark.parse

    def observed(self: Any, text: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(collector.held())
        return parse(self, text, *args, **kwargs)

    monkeypatch.setattr(Lark, "parse", observed)
    grammar = {"type": "grammar", "syntax": "lark", "definition": 'start: e\ne: "(" e ")" | "a"'}
    tool = {"type": "custom", "name": "g", "allowed_callers": ["programmatic"], "format": grammar}
    code = "await tools.g('((a))'); text('ok');"
    body = {"model": "m", "input": program_message(code), "tools": [tool, {"type": "programmatic_tool_calling"}]}
    response = http.post("/responses", json=body)
    assert response.status_code == 200, response.text[:500]
    assert seen == [True]
