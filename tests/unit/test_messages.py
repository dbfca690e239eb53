"""The message catalogue (`emulator/messages.py`) holds every wording the emulator answers with:

* docs/errors.md shows the catalogue as it is (the section `python -m ptc_emulator.emulator.messages
  docs/errors.md` writes), and its overview names no code the catalogue lacks;
* no wording is written inline anywhere else in emulator/ or api/ (an AST scan, which lists each
  straggler with its place and what to do);
* every entry is well formed: it says when it is answered, renders from its sample parts, and no
  two entries word the same message;
* a wording changed in the catalogue changes what a client reads (patched here, seen through the API).

That each rule fires through its entry is `test_message_triggers.py`'s.
"""

from __future__ import annotations

import ast
import gc
from dataclasses import dataclass
from pathlib import Path

import pytest

from ptc_emulator.emulator import errors, messages
from ptc_emulator.emulator.errors import EmulatorError

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "errors.md"
CATALOGUE_FILE = ROOT / "emulator" / "messages.py"
SCANNED = ("emulator", "api")


# ---- the docs ------------------------------------------------------------------------------------------


def test_the_docs_show_the_catalogue_as_it_is() -> None:
    document = DOCS.read_text(encoding="utf-8")
    assert messages.written(document) == document, (
        "docs/errors.md's catalogue is out of date: run `python -m ptc_emulator.emulator.messages docs/errors.md`"
    )


def test_every_code_and_message_of_the_catalogue_is_in_the_docs() -> None:
    document = DOCS.read_text(encoding="utf-8")
    for entry in messages.CATALOGUE.values():
        made = entry.sample()
        message = made.message if isinstance(made, EmulatorError) else made
        assert message.replace("|", "\\|") in document, entry.name
        if isinstance(made, EmulatorError) and made.code is not None:
            assert f"`{made.code}`" in document, entry.name


# ---- the entries ---------------------------------------------------------------------------------------


def test_every_entry_says_when_and_renders() -> None:
    """Every entry, each checked (one test, not one per entry: a few hundred cases of a few
    microseconds each cost more in the runner's own bookkeeping than in checking); every entry
    that fails is named, not only the first."""
    failed: list[str] = []
    for name, entry in messages.CATALOGUE.items():
        if not entry.when:
            failed.append(f"messages.{name} has no docstring saying when it is answered")
        try:
            made = entry.sample()
        except Exception as error:  # noqa: BLE001 (reported with the others below)
            failed.append(f"messages.{name} does not render from its sample parts: {error!r}")
        else:
            if not isinstance(made, str if entry.is_text else EmulatorError):
                failed.append(f"messages.{name} renders a {type(made).__name__}")
        if getattr(messages, name, None) is not entry.function:
            failed.append(f"messages.{name} is not the registered function")
    assert messages.CATALOGUE and not failed, "\n".join(failed)


def test_no_two_entries_word_the_same_message() -> None:
    seen: dict[str, str] = {}
    for entry in messages.CATALOGUE.values():
        made = entry.sample()
        message = made.message if isinstance(made, EmulatorError) else made
        assert message not in seen, f"{entry.name} and {seen[message]} word the same message"
        seen[message] = entry.name


# ---- no wording outside the catalogue ------------------------------------------------------------------


@dataclass(frozen=True)
class Scanned:
    """A module as the scan reads it: its path and every node of its syntax tree (`ast.walk`'s
    order), walked once."""

    path: Path
    nodes: tuple[ast.AST, ...]


def scanned(path: Path, source: str) -> Scanned:
    return Scanned(path, tuple(ast.walk(ast.parse(source))))


def _tree(modules: list[Scanned]) -> set[str]:
    """The names of the error classes: the tree, and subclasses of it defined anywhere scanned."""
    names = {
        name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, EmulatorError)
    }
    classes = [node for module in modules for node in module.nodes if isinstance(node, ast.ClassDef)]
    grown = True
    while grown:
        grown = False
        for node in classes:
            if node.name not in names:
                if any(_name(base) in names for base in node.bases):
                    names.add(node.name)
                    grown = True
    return names


CARRIERS = {"Fault", "EgressRefused", "AnswerTooLarge"}
"""Exceptions whose text becomes part of a message (the model upstream's faults, the MCP client's
refusals): made from catalogue texts too."""

LOGGERS = {"log", "logger", "logging", "warnings"}


@pytest.fixture(scope="module")
def modules() -> list[Scanned]:
    """The scanned modules, parsed and walked once for both scans below. Held by this module
    only: a few hundred thousand nodes kept for the session would be walked again by every
    full pass of the garbage collector in the modules after this one. The collector is held off
    while they are made (syntax trees hold no cycles): else the allocations alone set off
    several full passes over the growing heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        made = [
            scanned(path, path.read_text(encoding="utf-8"))
            for folder in SCANNED
            for path in sorted((ROOT / folder).rglob("*.py"))
            if path != CATALOGUE_FILE
        ]
    finally:
        if enabled:
            gc.enable()
    return made


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return None


def _literal_text(node: ast.AST) -> str | None:
    """The literal text of a string literal (an f-string's fixed parts), or None if it is none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _wording(node: ast.AST) -> bool:
    """Whether `node` holds a string literal that reads as words (a space in its fixed text): a
    param (`f"{where}.type"`), a code or an id is no wording."""
    return any(" " in (_literal_text(n) or "") for n in ast.walk(node))


def _returns_error(node: ast.FunctionDef | ast.AsyncFunctionDef, tree: set[str]) -> bool:
    if node.returns is None:
        return False
    return any(_name(n) in tree for n in ast.walk(node.returns) if isinstance(n, ast.expr)) or (
        isinstance(node.returns, ast.Constant) and any(t in str(node.returns.value).split() for t in tree)
    )


@dataclass(frozen=True)
class Straggler:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.what}"


def stragglers(modules: list[Scanned]) -> list[Straggler]:
    tree = _tree(modules)
    factories: set[str] = set()
    for module in modules:
        for node in module.nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _returns_error(node, tree):
                factories.add(node.name)
    found = []
    for module in modules:
        path = module.path
        messages_names = {"messages"}
        for node in module.nodes:
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("emulator.messages"):
                found.append(Straggler(path, node.lineno, "imports names of the catalogue: import the module"))
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("emulator"):
                for alias in node.names:
                    if alias.name == "messages" and alias.asname:
                        messages_names.add(alias.asname)
        for node in module.nodes:
            if isinstance(node, ast.Call):
                found.extend(_call(path, node, tree, factories, messages_names))
            elif isinstance(node, ast.Dict):
                keys = {_literal_text(k): v for k, v in zip(node.keys, node.values, strict=True) if k is not None}
                if "message" in keys and ({"code", "type"} & set(keys)) and _wording(keys["message"]):
                    found.append(Straggler(path, node.lineno, "an error's message written inline"))
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and _wire(path):
                if _name(node.exc.func) == "ValueError" and any(_wording(a) for a in node.exc.args):
                    found.append(Straggler(path, node.lineno, "a validator's reason written inline"))
    return found


def _wire(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return relative.startswith("emulator/wire/") or relative == "emulator/agents/wire.py"


def _call(path: Path, node: ast.Call, tree: set[str], factories: set[str], catalogue: set[str]) -> list[Straggler]:
    callee = _name(node.func)
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    arguments = [*node.args, *(k.value for k in node.keywords)]
    if callee in tree:
        literal = [a for a in node.args if _literal_text(a) is not None or isinstance(a, ast.Constant)]
        literal += [k.value for k in node.keywords if k.arg in ("code", "type") and isinstance(k.value, ast.Constant)]
        literal += [k.value for k in node.keywords if k.arg == "message" and _literal_text(k.value) is not None]
        if literal:
            return [Straggler(path, node.lineno, f"{callee}(...) made with a literal: make it in emulator/messages.py")]
    if callee in CARRIERS and any(_wording(a) for a in arguments):
        return [Straggler(path, node.lineno, f"{callee}(...) with a wording: take it from emulator/messages.py")]
    if callee in factories and not (isinstance(receiver, ast.Name) and receiver.id in LOGGERS):
        if any(_wording(a) for a in arguments):
            return [Straggler(path, node.lineno, f"{callee}(...) given a wording: take it from emulator/messages.py")]
    if isinstance(receiver, ast.Name) and receiver.id in catalogue and any(_wording(a) for a in arguments):
        return [Straggler(path, node.lineno, f"messages.{callee}(...) given a wording: make it an entry")]
    return []


NOT_YET: set[str] = set()
"""Modules still to move their wordings into the catalogue (each room's change empties its own): none now."""


def test_no_wording_is_written_outside_the_catalogue(modules: list[Scanned]) -> None:
    found = [s for s in stragglers(modules) if s.path.relative_to(ROOT).as_posix() not in NOT_YET]
    assert not found, "wordings written outside emulator/messages.py:\n" + "\n".join(map(str, found))


def test_the_scan_finds_an_inline_wording(modules: list[Scanned]) -> None:
    """The scan is not vacuous: each way of writing a wording inline is found."""
    sample = ROOT / "emulator" / "wire" / "_scan_sample.py"
    source = (
        "from ptc_emulator.emulator import messages\n"
        "from ptc_emulator.emulator.errors import InvalidRequest, StatusError\n"
        "from ptc_emulator.emulator.messages import no_tool_output\n"
        "def refuse() -> InvalidRequest:\n"
        "    raise InvalidRequest(f'Item {1} is wrong.')\n"
        "def other(message: str) -> StatusError:\n"
        "    return StatusError(418, message, type='teapot')\n"
        "def use() -> None:\n"
        "    raise other('The teapot is empty.')\n"
        "def event() -> dict[str, str]:\n"
        "    return {'code': 'x', 'message': 'Something broke here.'}\n"
        "def reason() -> None:\n"
        "    raise messages.scenario_turn('s', 0, 'no such turn')\n"
        "def check(value: str) -> str:\n"
        "    raise ValueError(f'metadata key {value} is too long')\n"
    )
    found = sorted(
        (s for s in stragglers([*modules, scanned(sample, source)]) if s.path == sample), key=lambda s: s.line
    )
    assert [s.line for s in found] == [3, 5, 7, 9, 11, 13, 15], "\n".join(map(str, found))
