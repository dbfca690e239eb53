"""Directories of scenario files: what the server loads at startup, `ptc-emulator validate`
checks, and `--watch` and `POST /_emulator/reset` load again when the files changed.

A directory's `*.yaml`, `*.yml` and `*.json` files are scenarios, one per file (a JSON file holds
the same mapping as a YAML one). Two files that give the same scenario name in the same scope are
refused, naming both: one would silently replace the other. A reload that fails leaves the
scenarios as they were, and says why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from pydantic import ValidationError

from ptc_emulator import sandbox
from ptc_emulator.emulator import jsontext, messages
from ptc_emulator.emulator.checking import checked
from ptc_emulator.emulator.model.scripted.scenario import (
    MAX_SCENARIO_JSON_VALUES,
    Scenario,
    ScenarioError,
    ScenarioRegistry,
    load_scenario,
    missing,
    read_text,
)
from ptc_emulator.emulator.model.scripted.script import placeholder_code

__all__ = [
    "SUFFIXES",
    "ScenarioFiles",
    "Reload",
    "ScenarioFilesError",
    "Validation",
    "load_directories",
    "scenario_files",
    "validate",
]

log = logging.getLogger("ptc_emulator")

SUFFIXES = (".yaml", ".yml", ".json")


def scenario_files(directory: Path) -> list[Path]:
    """The scenario files of a directory (not its subdirectories' files), by name: every name with
    a scenario suffix, so that one which is no readable file (a dangling or looping symlink, a
    FIFO, a device, a directory named `x.yaml`) is read and refused with its reason, never left
    out unsaid. A hidden name that is no file (an editor's lock link, `.#name.yaml`) is left alone."""
    return sorted(
        p for p in directory.iterdir() if p.suffix.lower() in SUFFIXES and (p.is_file() or not p.name.startswith("."))
    )


def read(path: Path) -> Scenario:
    """The scenario in one file (YAML, or JSON by its suffix); a ScenarioError names the file."""
    if path.suffix.lower() != ".json":
        return load_scenario(path)
    text = read_text(path, MAX_JSON_FILE_BYTES)
    try:
        # a long file a piece at a time (`jsonpieces`): in one call, 15 MB of empty arrays held
        # every client, the event loop too, 1.5-2.2 s from the thread reading it
        data = jsontext.loads_in_pieces(text, object_pairs_hook=_once_each, max_values=MAX_SCENARIO_JSON_VALUES)
    except _GivenTwice as e:
        raise ScenarioError(f"{path}: invalid JSON: the key {e.key!r} is given twice in one object") from e
    except jsontext.TooDeep as e:
        raise ScenarioError(f"{path}: JSON nested too deep") from e
    except jsontext.TooMany as e:
        raise ScenarioError(f"{path}: {messages.scenario_json_too_many_values(MAX_SCENARIO_JSON_VALUES)}") from e
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{path}: invalid JSON: {e}") from e
    except ValueError as e:  # what Python's parser raises for the one number it will not read
        raise ScenarioError(f"{path}: invalid JSON: an integer of more than 4300 digits") from e
    except RecursionError as e:
        raise ScenarioError(f"{path}: JSON nested too deep") from e
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping with `match` and `turns`")
    return load_scenario(data, default_name=path.stem, source=str(path))


class _GivenTwice(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (Python's parser keeps the last of a key given
    twice and drops the others without a word)."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        raise _GivenTwice(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return made


def _all_errors(path: Path, error: ScenarioError) -> list[str]:
    """Every field a file gets wrong (the loader names only the first)."""
    cause = error.__cause__
    if not isinstance(cause, ValidationError):
        return [str(error)]
    return [f"{path}: {'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in cause.errors()]


def _duplicates(found: Iterable[tuple[Scenario, str]]) -> list[str]:
    first: dict[tuple[str | None, str], str] = {}
    problems = []
    for scenario, source in found:
        key = (scenario.scope, scenario.name)
        if key in first:
            scope = f" in scope {scenario.scope!r}" if scenario.scope is not None else ""
            problems.append(
                f"{source}: name: duplicate scenario name {scenario.name!r}{scope}: {first[key]} already has it"
            )
        else:
            first[key] = source
    return problems


class ScenarioFilesError(ScenarioError):
    """Every problem of a set of scenario directories, one line each (file: field: why); its text
    is the problems joined by "; ", for a log line."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = [" ".join(problem.split()) for problem in problems]  # one line each (YAML's span several)
        super().__init__("; ".join(self.problems))


def _read_each(paths: Iterable[Path], loaded: list[tuple[Scenario, str]]) -> list[str]:
    """Read every file into `loaded` (with its file); every problem of those that cannot be used."""
    problems: list[str] = []
    for path in paths:
        try:
            loaded.append((read(path), str(path)))
        except ScenarioError as error:
            problems += _all_errors(path, error)
    return problems


def load_directories(directories: Sequence[Path]) -> list[tuple[Scenario, str]]:
    """Every scenario of these directories with its file, in order; a ScenarioFilesError naming every
    file that cannot be used (each with its problems, as `validate` does), every missing directory
    and every name two files give."""
    loaded: list[tuple[Scenario, str]] = []
    problems: list[str] = []
    for directory in directories:
        if not directory.is_dir():  # a missing directory is a mistake to report, never an empty registry
            problems.append(_no_directory(directory))
            continue
        problems += _read_each(scenario_files(directory), loaded)
    problems += _duplicates(loaded)
    if problems:
        raise ScenarioFilesError(problems)
    return loaded


def _no_directory(directory: Path) -> str:
    """Why a scenario directory given to the server is none: a symlink loop or a dangling link
    said as such (as `validate` says it), else that it does not exist (or is no directory)."""
    why = missing(directory) if not directory.exists() else None
    return why or f"scenario directory {str(directory)!r} does not exist"


@dataclass
class Validation:
    """What `validate` found: the files it read, the scenarios they hold, and every problem."""

    files: int = 0
    scenarios: int = 0
    errors: list[str] = field(default_factory=list)


def validate(paths: Sequence[Path]) -> Validation:
    """Check directories (or single files) of scenarios as the server would load them, reporting
    every problem with its file and field instead of stopping at the first."""
    result = Validation()
    loaded: list[tuple[Scenario, str]] = []
    for given in paths:
        if given.is_dir():
            files = scenario_files(given)
            if not files:
                result.errors.append(f"{given}: no scenario files (*.yaml, *.yml, *.json) in this directory")
        elif given.is_file():
            files = [given]
        elif given.exists():  # a FIFO or a device: refused unread, never waited on
            result.errors.append(f"{given}: not a regular file or a directory")
            continue
        else:
            result.errors.append(missing(given) or f"{given}: no such file or directory")
            continue
        result.files += len(files)
        result.errors += _read_each(files, loaded)
    result.errors += _duplicates(loaded)
    result.errors += _programs_that_do_not_parse(loaded)
    result.errors = [" ".join(error.split()) for error in result.errors]  # one line each (YAML's span several)
    result.scenarios = len(loaded)
    return result


def _programs_that_do_not_parse(loaded: Sequence[tuple[Scenario, str]]) -> list[str]:
    """`file: turns.N.program: SyntaxError: ... (line L): the line` for each program turn whose
    JavaScript V8 does not parse (its templates rendered with placeholders first)."""
    programs: list[tuple[str, str]] = []
    for scenario, source in loaded:
        for i, turn in enumerate(scenario.turns):
            code = placeholder_code(turn.program) if turn.program is not None else None
            if code is not None:
                programs.append((f"{source}: turns.{i}.program", code))
    if not programs:
        return []
    found = sandbox.syntax_errors([code for _, code in programs])
    return [
        f"{where}: JavaScript does not parse: " + ": ".join(line.strip() for line in error.splitlines()[:2])
        for (where, _), error in zip(programs, found, strict=True)
        if error is not None
    ]


MAX_JSON_FILE_BYTES = 16 * 2**20
"""A JSON scenario file (a YAML one: `MAX_SCENARIO_BYTES`); larger is refused unread."""


_SETTLED_NS = 2 * 10**9
"""A file modified this recently is hashed at each check whatever its status says: two edits
within one tick of the file system's clock can leave the same time and size."""


class _Fingerprints:
    """Each scenario file's content hash, read again only when the file's modification time,
    size or inode moved since, or it was modified in the last two seconds (`_SETTLED_NS`: an
    edit within the file system's time resolution that keeps the size is still seen); a file
    over the bound is not read at all."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple[int, int, int], str]] = {}

    def __call__(self, directories: Sequence[Path]) -> dict[str, str]:
        found: dict[str, str] = {}
        for directory in directories:
            if directory.is_dir():
                for path in scenario_files(directory):
                    found[str(path)] = self._digest(path)
        self._known = {key: value for key, value in self._known.items() if key in found}
        return found

    def _digest(self, path: Path) -> str:
        try:
            stat = path.stat()
        except OSError:
            return "unreadable"
        key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        known = self._known.get(str(path))
        settled = time.time_ns() - stat.st_mtime_ns > _SETTLED_NS
        if known is not None and known[0] == key and settled:
            return known[1]
        if not S_ISREG(stat.st_mode):  # a FIFO swapped in since the listing: never read (it would wait)
            digest = f"not a regular file: {key}"
        elif stat.st_size > MAX_JSON_FILE_BYTES:
            digest = f"too large: {key}"
        else:
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                digest = "unreadable"
        self._known[str(path)] = (key, digest)
        return digest


@dataclass(frozen=True)
class Reload:
    """The scenario files as `ScenarioFiles.prepare` read them: their fingerprints before and now,
    and what they hold (or why they cannot be used)."""

    before: dict[str, str]
    seen: dict[str, str]
    loaded: list[tuple[Scenario, str]]
    error: ScenarioError | None


class ScenarioFiles:
    """The scenario directories a server loaded into its registry, loaded again when they change."""

    def __init__(self, registry: ScenarioRegistry, directories: Sequence[Path], labels: Sequence[str] = ()) -> None:
        self.registry = registry
        self.directories = list(directories)
        self.labels = list(labels) + [""] * (len(self.directories) - len(labels))
        """How the banner names each directory ("bundled demos", ...), or nothing."""
        self.counts: list[int] = []
        self.error: str | None = None
        """Why the last reload failed (the scenarios stayed as they were), or None."""
        self._seen: dict[str, str] = {}
        self._fingerprint = _Fingerprints()
        self._reading = threading.Lock()
        """One reading of the files at a time (`--watch` and a reset may both read them)."""

    def load(self) -> ScenarioFiles:
        """Load every directory now; a ScenarioError leaves the registry as it was."""
        with self._reading:
            seen = self._fingerprint(self.directories)
            loaded = load_directories(self.directories)
        self._apply(seen, loaded)
        return self

    def _apply(self, seen: dict[str, str], loaded: list[tuple[Scenario, str]]) -> None:
        self.registry.replace_files(loaded)
        self.counts = [sum(1 for _, src in loaded if Path(src).parent == d) for d in self.directories]
        self._seen, self.error = seen, None

    def changed(self) -> bool:
        """Whether a file was added, edited or removed since the last load (reads only)."""
        with self._reading:
            return self._fingerprint(self.directories) != self._seen

    def check(self) -> bool:
        """Reload when the files changed: True when it did. A file that cannot be used now keeps
        the scenarios as they were, in `error` and the log, until the files change again."""
        return self.apply(self.prepare())

    async def recheck(self) -> bool:
        """`check` for a server: the files are read and parsed in a worker thread (a large
        scenario file takes seconds to parse; no other request waits for it), the registry is
        replaced here, on the event loop, between requests. With no folder there is nothing to
        read, and no thread to wake (the pytest plugin's teardown asks after every test)."""
        if not self.directories:
            return False
        return self.apply(await checked(self.prepare))  # on the checking threads: `emulator/checking.py`

    def prepare(self) -> Reload | None:
        """What `check` reads (None: nothing changed): the files read and parsed, any thread."""
        with self._reading:
            before = self._seen
            seen = self._fingerprint(self.directories)
            if seen == before:
                return None
            try:
                return Reload(before, seen, load_directories(self.directories), None)
            except ScenarioError as error:
                return Reload(before, seen, [], error)

    def apply(self, reload: Reload | None) -> bool:
        """A prepared reload into the registry (on the event loop, in a server): True when it did.
        One prepared before another reload was applied is dropped (it read older files)."""
        if reload is None or reload.before is not self._seen:
            return False
        if reload.error is not None:
            self._seen, self.error = reload.seen, str(reload.error)
            log.warning("scenario files not reloaded (the previous ones stay): %s", reload.error)
            return False
        self._apply(reload.seen, reload.loaded)
        log.info("scenario files reloaded: %s", self.banner())
        return True

    def banner(self) -> str:
        """How many scenarios loaded from where, for the startup line."""
        total = sum(self.counts)
        parts = [
            f"{n} from {d}" + (f" ({label})" if label else "")
            for d, n, label in zip(self.directories, self.counts, self.labels, strict=True)
        ]
        noun = "scenario" if total == 1 else "scenarios"
        return f"{total} {noun} loaded" + (": " + ", ".join(parts) if parts else " (no scenario directories)")
