"""Cassettes per test: `@pytest.mark.ptc_record` records a test's conversations against an
upstream into a file named after the test, and replays them from it after.

    <the test file's folder>/cassettes/<module>/<test name>.yaml    # `scenarios:` a list of recordings

With an upstream (`--ptc-emulator-upstream URL`, which records into the record directory:
`--ptc-emulator-record DIR`, the ini option, or `ptc-recordings/` under the rootdir), mode
`once` (the default) replays what the cassette holds and records only what is missing: a
conversation no recording matches goes upstream, and the file gains its recording when the test
ends. Mode `all` records everything again and rewrites the file; mode `none` only replays. With no
upstream every mode replays: a conversation the cassette lacks is the usual 400 no_scenario_matched.
The recordings are added to the test's own scope, so no other test sees them.

The file is written as `--record` writes a recording (`recording.readable_yaml`): programs and
other multi-line text as YAML block scalars, keys in a fixed order. A scrubber (`Scrub`: text in,
text out) sees every text a recording holds before it is written: the user message it matches,
the model's messages, refusals and reasoning, the programs' code and the direct calls' arguments.
Where it changes the user message, the recording's match takes any text there (`.+?`), so the
test's own request still replays and the cassette keeps only the scrubbed text.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model import (
    TooManyNodes,
    empty_answer,
    file_name,
    full_match,
    load_yaml_without_aliases,
    readable_yaml,
)

__all__ = ["MAX_CASSETTE_BYTES", "MAX_CASSETTE_VALUES", "MODES", "Cassette", "CassetteError", "Scrub", "scrubbed"]

MODES = ("once", "all", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_HEADER = "# Recorded by @pytest.mark.ptc_record: this test's conversations (docs/record-replay.md).\n"

MAX_CASSETTE_BYTES = 16 * 2**20
"""A cassette's size, refused past it unread: 16 recordings at the scenario file bound (1 MiB),
thousands of the few kilobytes one recorded conversation takes. Loading YAML costs about 14
times its size in memory and a second or more a megabyte (62 MB of recordings took 842 MB and
over a minute), so a larger file would fail its test by time or memory, not by a line naming it."""

MAX_CASSETTE_VALUES = 800_000
"""The YAML values (scalars, lists, mappings; a long text is one) a cassette may hold, counted by
the C parser, and by Python's parser where the C one refuses (a text only Python's reads, `%YAML 1.3`),
before the loader builds any of them: 16 recordings at the scenario file bound
(50,000 values each). Python's loader spends some 50 µs and a kilobyte on each, so within 16 MiB
a file of short values (`[a,a,a,...]`: 2 bytes a value) took minutes and gigabytes: 1 MiB of
them 23 s and 400 MB, linear. An ordinary recording costs 20 to 50 bytes a value (one of a
program, its reasoning and a final message: 590 bytes, 23 values), so a 16 MiB cassette of
them holds about 600,000."""

Scrub = Callable[[str], str]
"""Text in, the text to keep out: `lambda text: re.sub(r"sk-\\w+", "<key>", text)`."""


class CassetteError(ValueError):
    """A cassette that cannot be replayed: the message names the file and what is wrong."""


class Cassette:
    def __init__(self, path: Path, mode: str, staging: Path | None, scrub: Scrub | None = None) -> None:
        """`staging`: the recording server's directory (None: no upstream, replay only)."""
        if mode not in MODES:
            raise ValueError(f"ptc_record mode is one of {', '.join(MODES)}, not {mode!r}")
        self.path, self.mode, self.staging, self.scrub = path, mode, staging, scrub
        self._before: dict[str, float] = {}

    @classmethod
    def for_test(
        cls, test_file: Path, test_name: str, folder: str, mode: str, staging: Path | None, scrub: Scrub | None = None
    ) -> Cassette:
        path = test_file.parent / folder / test_file.stem / f"{_UNSAFE.sub('_', test_name).strip('_')}.yaml"
        return cls(path, mode, staging, scrub)

    def recordings(self) -> list[dict[str, Any]]:
        """The cassette's scenarios (none when the file does not exist yet)."""
        raw = self._read()
        if raw is None:
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.unusable(messages.cassette_not_text(e.start)) from None
        try:
            # As scenario files are read: aliases refused (a few hundred bytes of them expand to
            # billions of values), as is a key given twice; the values counted before any is built,
            # and the nesting (a recording sits two levels down: `scenarios:`, its list).
            data = load_yaml_without_aliases(text, MAX_CASSETTE_VALUES, depth_above=2) or {}
        except TooManyNodes:
            raise self.unusable(messages.cassette_too_many_values(MAX_CASSETTE_VALUES)) from None
        except yaml.YAMLError as e:
            raise self.unusable(messages.cassette_not_yaml(" ".join(str(e).split()))) from None
        except RecursionError:  # Python's YAML composer recurses once per level of nesting
            raise self.unusable(messages.cassette_not_yaml("nested too deep")) from None
        except ValueError as e:  # a scalar's constructor: an integer past 4300 digits, 2024-02-30
            said = "an integer of more than 4300 digits" if "integer string conversion" in str(e) else str(e)
            raise self.unusable(messages.cassette_not_yaml(said)) from None
        scenarios = data.get("scenarios") if isinstance(data, dict) else None
        if not isinstance(scenarios, list):
            raise self.unusable(messages.cassette_not_cassette())
        named: dict[str, int] = {}
        for index, scenario in enumerate(scenarios):
            if not isinstance(scenario, dict):
                raise self.unusable(messages.cassette_not_mapping(index))
            name = scenario.get("name")
            if isinstance(name, str) and named.setdefault(name, index) != index:
                raise self.unusable(messages.cassette_duplicate_name(index, name, named[name]))
            found = _not_json(scenario)
            if found is not None:
                raise self.unusable(messages.cassette_not_json(index, *found))
            empty = empty_answer(scenario)
            if empty is not None:
                raise self.unusable(messages.cassette_empty_answer(index, *empty))
        return [dict(s) for s in scenarios]

    def _read(self) -> bytes | None:
        """The cassette's bytes, None when there is no file. Opened without blocking, then looked
        at: a FIFO (which `open` would wait on for a writer), a device or a directory is refused
        unread, as is a file past `MAX_CASSETTE_BYTES`, each with one line naming it."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise self.unusable(messages.cassette_not_a_file()) from None
        except OSError as e:
            raise self.unusable(messages.cassette_unreadable(e.strerror or type(e).__name__)) from None
        try:  # looked at before `fdopen`, which raises for a directory (read-only, `open` takes one)
            status = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        if not stat.S_ISREG(status.st_mode):
            os.close(fd)
            raise self.unusable(messages.cassette_not_a_file())
        with os.fdopen(fd, "rb") as file:
            if status.st_size > MAX_CASSETTE_BYTES:
                raise self.unusable(messages.cassette_too_large(MAX_CASSETTE_BYTES, status.st_size))
            raw = file.read(MAX_CASSETTE_BYTES + 1)
        if len(raw) > MAX_CASSETTE_BYTES:  # it grew while it was read
            raise self.unusable(messages.cassette_too_large(MAX_CASSETTE_BYTES, len(raw)))
        return raw

    def unusable(self, problem: str) -> CassetteError:
        """The error that fails a test replaying this cassette."""
        return CassetteError(messages.cassette_unusable(str(self.path), problem))

    def refused(self, index: int, scenario: dict[str, Any], message: str) -> CassetteError:
        """The error for a recording the emulator refuses as a scenario."""
        return self.unusable(messages.cassette_scenario_refused(index, str(scenario.get("name")), message))

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
            recorded = yaml.safe_load(source.read_text(encoding="utf-8"))
            scenario = {"name": recorded.pop("name", source.stem), **recorded}  # the name first, for the reader
            if self.scrub is not None:
                scenario = scrubbed(scenario, self.scrub)
            kept[str(scenario["name"])] = scenario
            added.append(str(scenario["name"]))
            source.unlink()  # it lives in the cassette now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".yaml.tmp")
        temporary.write_text(_HEADER + readable_yaml({"scenarios": list(kept.values())}), encoding="utf-8")
        temporary.replace(self.path)
        return added


_KINDS = {"bytes": "binary (!!binary)", "set": "a set (!!set)", "datetime": "a date and time"}


def _not_json(value: Any) -> tuple[str, str] | None:
    """The path and the kind of the first value in `value` a scenario cannot hold, as YAML makes
    them and JSON has none of: a date or time, binary (`!!binary`), a set (`!!set`), NaN or an
    infinity; None when there is none. Walked without recursion (a cassette may nest deep)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if not isinstance(key, (str, int, float, bool)) and key is not None:
                    return path or "(top)", f"a key that is {type(key).__name__}"
                stack.append((item, f"{path}.{key}" if path else str(key)))
        elif isinstance(node, list):
            stack.extend((item, f"{path}.{n}" if path else str(n)) for n, item in enumerate(node))
        elif isinstance(node, float) and not math.isfinite(node):
            return path, "NaN or an infinity"
        elif node is not None and not isinstance(node, (str, int, float, bool)):
            return path, _KINDS.get(type(node).__name__, f"a {type(node).__name__}")
    return None


# ---- scrubbing ----------------------------------------------------------------------------------------

_TURN_TEXTS = ("message", "refusal", "reasoning", "program")
_TOKEN = re.compile(r"\s+|\S+")  # words with their punctuation, and the spaces between
_ESCAPED = re.compile(r"\\(.)", re.S)


def scrubbed(scenario: dict[str, Any], scrub: Scrub) -> dict[str, Any]:
    """The recording with `scrub` applied to each text it holds (a new dict; tool names and
    numbers are left as they are). A recording's generated name, made from its message, is made
    again from the scrubbed one."""
    out = dict(scenario)
    match = dict(out.get("match") or {})
    if isinstance(match.get("input"), str):
        generated = out.get("name") == file_name(out).removesuffix(".yaml")
        match["input"] = _scrubbed_match(match["input"], scrub)
        out["match"] = match
        if generated:
            out["name"] = file_name(out).removesuffix(".yaml")
    if isinstance(out.get("description"), str):
        out["description"] = scrub(out["description"])
    turns = []
    for turn in out.get("turns") or ():
        turn = dict(turn)
        for key in _TURN_TEXTS:
            if isinstance(turn.get(key), str):
                turn[key] = scrub(turn[key])
        if "call" in turn:
            calls = turn["call"] if isinstance(turn["call"], list) else [turn["call"]]
            done = [{**c, "arguments": _scrub_values(c.get("arguments"), scrub)} for c in calls]
            turn["call"] = done if isinstance(turn["call"], list) else done[0]
        turns.append(turn)
    out["turns"] = turns
    return out


def _scrub_values(value: Any, scrub: Scrub) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_values(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_values(v, scrub) for k, v in value.items()}
    return value


def _scrubbed_match(pattern: str, scrub: Scrub) -> str:
    """A recording's anchored, escaped match of one message, scrubbed: the words the scrubber kept
    stay literal, and each run of words it changed matches any text (`.+?`), so the message the
    test sends still replays. A pattern that is not such a match is scrubbed as it is."""
    text = _ESCAPED.sub(r"\1", pattern[1:-1]) if pattern.startswith("^") and pattern.endswith("$") else None
    if text is None or full_match(text) != pattern:
        return scrub(pattern)
    clean = scrub(text)
    if clean == text:
        return pattern
    before, after = _TOKEN.findall(text), _TOKEN.findall(clean)
    parts: list[str] = []
    for op, _, _, low, high in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(full_match("".join(after[low:high]))[1:-1])
        elif op != "insert" and parts[-1:] != [".+?"]:  # what the scrubber only added matches nothing
            parts.append(".+?")
    return "^" + "".join(parts) + "$"


def _stamps(directory: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.yaml")} if directory.is_dir() else {}
