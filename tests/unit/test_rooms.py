"""Every room of the package says what it holds and exports its face: each package folder of the
product code has an `__init__.py` with a docstring and an `__all__` whose every name resolves;
and a face never hides a module of its room behind a name of the same spelling."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"_root": "ptc_emulator", "api": "ptc_emulator.api", "emulator": "ptc_emulator.emulator"}
FOLDERS |= {"sandbox": "ptc_emulator.sandbox", "testing": "ptc_emulator.testing"}


def _rooms() -> list[tuple[Path, str]]:
    found = []
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            parts = init.parent.relative_to(base).parts
            found.append((init, ".".join((package, *parts))))
    return found


ROOMS = _rooms()


def test_the_rooms_are_found() -> None:
    names = {name for _, name in ROOMS}
    assert {"ptc_emulator.emulator.wire", "ptc_emulator.emulator.model.runtime", "ptc_emulator.api"} <= names


@pytest.mark.parametrize(("init", "name"), ROOMS, ids=[name for _, name in ROOMS])
def test_a_room_says_what_it_holds_and_exports_its_face(init: Path, name: str) -> None:
    tree = ast.parse(init.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring"
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{init.relative_to(ROOT)} has no __all__"
    for exported_name in exported:
        assert getattr(module, exported_name, None) is not None or importlib.import_module(f"{name}.{exported_name}")
    modules = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir() if p.is_dir()}
    imported = {
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert not (imported & modules), f"{name}'s face hides its modules {sorted(imported & modules)}"
