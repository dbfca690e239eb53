"""Recorded transcripts replayed against the sandbox, in the style of Temporal's replay tests.

Each file in `transcripts/` holds a program (code as a list of lines, tools, seed, clock_ms,
optional limits), the journal a client built for it, and the exact outcome replay must give:
completed, suspended on the next call, or failed (divergent transcripts must be caught). A
transcript that stops matching means replay changed what it decides for recorded histories.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.sandbox import Limits, Program, ToolResult
from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import outcome_json

TRANSCRIPTS = sorted((Path(__file__).resolve().parent / "transcripts").glob("*.json"))


def load(path: Path) -> tuple[Program, dict[str, Any]]:
    t = json.loads(path.read_text(encoding="utf-8"))
    code = "\n".join(t["code"]) if isinstance(t["code"], list) else t["code"]
    journal = tuple(ToolResult(j["name"], j["arguments"], j["output"], j.get("is_error", False)) for j in t["journal"])
    prog = Program(code, tuple(t["tools"]), int(t["seed"]), t["clock_ms"], journal, Limits(**t.get("limits", {})))
    expected: dict[str, Any] = t["expected"]
    return prog, expected


def test_there_are_transcripts_including_divergent_ones() -> None:
    kinds = [load(p)[1].get("kind") for p in TRANSCRIPTS]
    assert len(TRANSCRIPTS) >= 5
    assert kinds.count("divergence") >= 1
    assert {load(p)[1]["status"] for p in TRANSCRIPTS} >= {"completed", "suspended", "failed"}


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript_replays_to_its_recorded_outcome(pool: SyncPool, path: Path) -> None:
    prog, expected = load(path)
    assert outcome_json(pool.run(prog)) == expected
