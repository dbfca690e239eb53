"""`--record DIR` with a model upstream: each conversation the upstream model finishes becomes a
scenario file in DIR (the scripted model's recording format, `scripted/recording.py`), added to
the registry at once, so the same conversation replays offline, with the upstream stopped.

What is written comes from the request and the response bodies only (the user message, the tool
names, the programs' code, the call arguments, the message text): never a header or a key.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ptc_emulator.emulator.model.core import Prepared
from ptc_emulator.emulator.model.scripted.recording import Tape, file_name, scenario_from, to_yaml
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError, ScenarioRegistry, load_scenario

__all__ = ["Recording"]

log = logging.getLogger(__name__)


class Recording:
    def __init__(self, directory: Path, scenarios: ScenarioRegistry) -> None:
        self.directory = directory
        self.scenarios = scenarios
        self.tape = Tape(keep=2_000)
        directory.mkdir(parents=True, exist_ok=True)

    def exchange(self, prepared: Prepared, output: list[dict[str, Any]], model: str) -> Path | None:
        """Note one response the upstream played; write its conversation if it ended there."""
        request = prepared.request.model_dump(mode="json", exclude_none=True, by_alias=True)
        response = {"id": prepared.response_id, "status": "completed", "output": output}
        try:
            finished = self.tape.exchange(request, response)
            if finished is None:
                return None
            scenario = scenario_from(finished, model=model)
            if scenario is None:
                return None
            path = self.directory / file_name(scenario)
            text = to_yaml(scenario)
            loaded = load_scenario(text, default_name=path.stem)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        temporary = path.with_suffix(".yaml.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
        self.scenarios.add(loaded, str(path))
        log.info("recorded %s", path)
        return path
