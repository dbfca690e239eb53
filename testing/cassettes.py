"""Cassettes per test: `@pytest.mark.ptc_record` records a test's conversations against an
upstream into a file named after the test, and replays them from it after.

    <the test file's folder>/cassettes/<module>/<test name>.yaml    # `scenarios:` a list of recordings

With an upstream (`--ptc-emulator-upstream URL`, which records into `--ptc-emulator-record DIR`),
mode `once` (the default) replays what the cassette holds and records only what is missing: a
conversation no recording matches goes upstream, and the file gains its recording when the test
ends. Mode `all` records everything again and rewrites the file; mode `none` only replays. With no
upstream every mode replays: a conversation the cassette lacks is the usual 400 no_scenario_matched.
The recordings are added to the test's own scope, so no other test sees them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MODES", "Cassette"]

MODES = ("once", "all", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Cassette:
    def __init__(self, path: Path, mode: str, staging: Path | None) -> None:
        """`staging`: the recording server's directory (None: no upstream, replay only)."""
        if mode not in MODES:
            raise ValueError(f"ptc_record mode is one of {', '.join(MODES)}, not {mode!r}")
        self.path, self.mode, self.staging = path, mode, staging
        self._before: dict[str, float] = {}

    @classmethod
    def for_test(cls, test_file: Path, test_name: str, folder: str, mode: str, staging: Path | None) -> Cassette:
        path = test_file.parent / folder / test_file.stem / f"{_UNSAFE.sub('_', test_name).strip('_')}.yaml"
        return cls(path, mode, staging)

    def recordings(self) -> list[dict[str, Any]]:
        """The cassette's scenarios (none when the file does not exist yet)."""
        if not self.path.is_file():
            return []
        data = yaml.safe_load(self.path.read_text(encoding="utf-8")) or {}
        scenarios = data.get("scenarios") if isinstance(data, dict) else None
        if not isinstance(scenarios, list):
            raise ValueError(f"{self.path}: a cassette is a mapping with a `scenarios` list")
        return [dict(s) for s in scenarios]

    def start(self) -> list[dict[str, Any]]:
        """What the test replays, and a note of the staging directory before it runs."""
        if self.staging is not None and self.mode != "none":
            self._before = _stamps(self.staging)
        return [] if self.mode == "all" and self.staging is not None else self.recordings()

    def finish(self) -> list[str]:
        """Move what the test recorded into the cassette; the names of the recordings added."""
        if self.staging is None or self.mode == "none":
            return []
        now = _stamps(self.staging)
        fresh = sorted(p for p, stamp in now.items() if self._before.get(p) != stamp)
        if not fresh:
            return []
        kept = {str(s.get("name")): s for s in (self.recordings() if self.mode == "once" else [])}
        added = []
        for name in fresh:
            source = self.staging / name
            scenario = yaml.safe_load(source.read_text(encoding="utf-8"))
            scenario.setdefault("name", source.stem)
            kept[str(scenario["name"])] = scenario
            added.append(str(scenario["name"]))
            source.unlink()  # it lives in the cassette now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = "# Recorded by @pytest.mark.ptc_record: this test's conversations (docs/record-replay.md).\n"
        text = yaml.safe_dump({"scenarios": list(kept.values())}, sort_keys=False, allow_unicode=True, width=100)
        temporary = self.path.with_suffix(".yaml.tmp")
        temporary.write_text(header + text, encoding="utf-8")
        temporary.replace(self.path)
        return added


def _stamps(directory: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.yaml")} if directory.is_dir() else {}
