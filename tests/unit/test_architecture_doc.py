"""docs/architecture.md's walk of a store:false resume names functions that exist, in at most 25
stops: when code moves, the walk must move with it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
REF = re.compile(r"`([\w/]+\.py):([\w.]+)`")


def _walk() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## A store:false resume", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. (.*(?:\n {3,}.*)*)", section, flags=re.M)


def test_the_walk_has_at_most_25_stops_each_naming_a_function() -> None:
    stops = _walk()
    assert 10 <= len(stops) <= 25
    for stop in stops:
        assert REF.search(stop), stop


def test_every_function_the_walk_names_exists() -> None:
    missing = []
    for stop in _walk():
        for path, name in REF.findall(stop):
            source = (ROOT / path).read_text(encoding="utf-8")
            for part in name.split("."):
                if not re.search(
                    rf"^\s*(?:async def|def|class) {re.escape(part)}\b|^{re.escape(part)} = ", source, re.M
                ):
                    missing.append(f"{path}:{name} ({part})")
    assert missing == []
