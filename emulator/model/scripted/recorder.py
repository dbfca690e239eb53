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
import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ptc_emulator.emulator.model.scripted.recording import (
    Tape,
    empty_answer,
    file_name,
    scenario_from,
    to_yaml,
    unrecordable,
)
from ptc_emulator.emulator.model.scripted.scenario import Scenario, ScenarioError, ScenarioRegistry, load_scenario

__all__ = ["Recorder"]

log = logging.getLogger(__name__)


_KEEP_WRITTEN = 2_000


def _digest(response: dict[str, Any]) -> str:
    """What a response said: its status and output (a repeated identical terminal event is the same)."""
    said = json.dumps([response.get("status"), response.get("output")], sort_keys=True, default=str)
    return hashlib.sha256(said.encode("utf-8")).hexdigest()


class Recorder:
    """Writes the conversations that end into `directory` and adds them to `scenarios`."""

    def __init__(self, directory: Path, scenarios: ScenarioRegistry) -> None:
        self.directory = directory
        self.scenarios = scenarios
        self.tape = Tape(keep=2_000)
        self.written: OrderedDict[str, tuple[str, Path, str | None, str]] = OrderedDict()
        """Response id -> (the digest of its output, the file written, the scenario's scope and
        name), for the latest `_KEEP_WRITTEN`: a later terminal event for the same response that
        says otherwise (`response.completed`, then `response.failed`) withdraws the recording."""
        directory.mkdir(parents=True, exist_ok=True)

    async def exchange(self, request: dict[str, Any], response: dict[str, Any], model: str | None) -> Path | None:
        """Note one exchange; write its conversation if it ended there (the path written). The
        file is written, and read back as the scenario it must be, in a worker thread: a long
        answer takes seconds to turn into YAML and back (900 KB of text: 3 s), and no other
        request waits for it. The registry has it before this returns."""
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id in self.written:
            if self.written[response_id][0] == await asyncio.to_thread(_digest, response):
                return None  # the same answer again: recorded once
            self._withdraw(response_id)
            return None
        try:
            finished = self.tape.exchange(request, response)
            if finished is None:
                return None
            if (why := unrecordable(response)) is not None:
                log.warning("a finished conversation was not recorded: %s", why)
                return None
            scenario = scenario_from(finished, model=model)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        if scenario is None:
            return None
        if (empty := empty_answer(scenario)) is not None:  # replayed, a completed answer with nothing in it
            log.warning(
                "a finished conversation was not recorded: its %s at turns.%d is empty (or only whitespace)", empty[1], empty[0]
            )
            return None
        written = await asyncio.to_thread(self._write, scenario)
        if written is None:
            return None
        loaded, path = written
        self.scenarios.add(loaded, str(path))
        log.info("recorded %s", path)
        if isinstance(response_id, str):
            digest = await asyncio.to_thread(_digest, response)
            for older in [k for k, v in self.written.items() if v[1] == path]:
                del self.written[older]  # the file is this response's now
            self.written[response_id] = (digest, path, loaded.scope, loaded.name)
            while len(self.written) > _KEEP_WRITTEN:
                self.written.popitem(last=False)
        return path

    def _withdraw(self, response_id: str) -> None:
        """A response recorded at its terminal event, then ended again otherwise (a `failed` or
        different answer after its `completed`): which one the client took is not known, so
        neither is kept (the file removed, and the scenario)."""
        _, path, scope, name = self.written.pop(response_id)
        self.scenarios.remove(name, scope)
        with contextlib.suppress(OSError):
            path.unlink()
        log.warning(
            "a recorded conversation was withdrawn (%s removed): its response %s ended a second time, otherwise",
            path,
            response_id[:80],
        )

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
