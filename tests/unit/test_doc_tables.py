"""The docs' tables against what they describe: every bundled scenario file in scripted-model.md's
table, and no table anywhere listing one row twice."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_bundled_scenario_table_lists_every_bundled_file() -> None:
    text = (ROOT / "docs" / "scripted-model.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w.-]+\.yaml)` \|", text, flags=re.M))
    bundled = {p.name for p in (ROOT / "fixtures").glob("*.yaml")}
    assert bundled, "no bundled scenarios found"
    assert listed == bundled


def _tables(path: Path) -> list[list[str]]:
    """Each table's rows, after its header and rule."""
    tables, table = [], []
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            tables.append(table[2:])
        table = []
    return tables


def test_no_table_lists_a_row_twice() -> None:
    repeated = [f"{p.name}: {row}" for p in DOCS for t in _tables(p) for row in set(t) if t.count(row) > 1]
    assert repeated == []


def test_the_journal_tables_name_each_field_once() -> None:
    """pytest.md's tables of the journal's fields and figures: one row a field (a field described
    twice, with two wordings, was there before)."""
    repeated = []
    for table in _tables(ROOT / "docs" / "pytest.md"):
        keys = [row.split("|")[1].strip() for row in table]
        if any(key.startswith("`") for key in keys):
            repeated += sorted({key for key in keys if keys.count(key) > 1})
    assert repeated == []
