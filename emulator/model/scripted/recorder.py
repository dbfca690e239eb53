"""Recording: each conversation a recorder follows to its end becomes a scenario file in a
directory, added to the registry at once, so the same conversation replays offline.

One writer for both ways of recording: the recording proxy in front of a real service
(`serve --upstream URL --record DIR`, `api/proxy.py`) and a model upstream's `--record DIR`
(`model/fallback.py`). Each hands it the exchanges it saw, a create request's body and the final
response; the tape (`recording.Tape`) follows the conversations and `recording.scenario_from`
writes what is kept. What is written comes from the bodies only (the user message, the tool
names, the programs' code, the call arguments, the message text): never a header or a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from ptc_emulator.emulator.model.scripted.recording import Tape, empty_answer, file_name, scenario_from, to_yaml
from ptc_emulator.emulator.model.scripted.scenario import Scenario, ScenarioError, ScenarioRegistry, load_scenario

__all__ = ["Recorder"]

log = logging.getLogger(__name__)


class Recorder:
    """Writes the conversations that end into `directory` and adds them to `scenarios`."""

    def __init__(self, directory: Path, scenarios: ScenarioRegistry) -> None:
        self.directory = directory
        self.scenarios = scenarios
        self.tape = Tape(keep=2_000)
        directory.mkdir(parents=True, exist_ok=True)

    async def exchange(self, request: dict[str, Any], response: dict[str, Any], model: str | None) -> Path | None:
        """Note one exchange; write its conversation if it ended there (the path written). The
        file is written, and read back as the scenario it must be, in a worker thread: a long
        answer takes seconds to turn into YAML and back (900 KB of text: 3 s), and no other
        request waits for it. The registry has it before this returns."""
        try:
            finished = self.tape.exchange(request, response)
            if finished is None:
                return None
            scenario = scenario_from(finished, model=model)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        if scenario is None:
            return None
        if (empty := empty_answer(scenario)) is not None:  # replayed, a completed answer with nothing in it
            log.warning("a finished conversation was not recorded: its %s at turns.%d is empty", empty[1], empty[0])
            return None
        written = await asyncio.to_thread(self._write, scenario)
        if written is None:
            return None
        loaded, path = written
        self.scenarios.add(loaded, str(path))
        log.info("recorded %s", path)
        return path

    def _write(self, scenario: dict[str, Any]) -> tuple[Scenario, Path] | None:
        try:
            path = self.directory / file_name(scenario)
            text = to_yaml(scenario)
            loaded = load_scenario(text, default_name=path.stem)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        temporary = path.with_suffix(".yaml.tmp")
        try:
            temporary.write_text(text, encoding="utf-8")
            temporary.replace(path)
        except OSError as e:
            # A full disk, a folder gone or read-only: the conversation is not recorded, and the
            # client, whose answer this is, still gets it whole.
            log.warning("a finished conversation could not be written to %s: %s", path, e.strerror or e)
            with contextlib.suppress(OSError):
                temporary.unlink()
            return None
        return loaded, path
