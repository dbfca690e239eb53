"""What plays a response: the `Model` protocol and the engine's types (`core.py`), and the
scripted model, its first implementation (`scripted/`: scenarios, their templates and patterns,
where a conversation stands in a script, the player, injected faults, recordings), and the
upstream model, its second (`upstream/`: a real model behind an OpenAI-compatible endpoint
writes the programs for what no scenario matches; `with_upstream` makes one around the scripted
model, which still answers what its scenarios match).

Outside `model/` nothing imports `model.scripted`: the names below are the scripted model's
public face (the registry the admin routes fill, the loader, the recording proxy's helpers).
"""

from pathlib import Path

from ptc_emulator.emulator.model.core import Delivery, Live, Model, Plan, Prepared, Refused, ResponseMemo, Runner, Trace
from ptc_emulator.emulator.model.runtime.hosted import HostedScript
from ptc_emulator.emulator.model.scripted.files import ScenarioFiles, Validation
from ptc_emulator.emulator.model.scripted.files import validate as validate_scenarios
from ptc_emulator.emulator.model.scripted.model import ScriptedModel
from ptc_emulator.emulator.model.scripted.recording import Tape, file_name, items_of, scenario_from, to_yaml, user_text
from ptc_emulator.emulator.model.scripted.scenario import Request as MatchRequest
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError, ScenarioRegistry, load_scenario
from ptc_emulator.emulator.model.scripted.script import clear_caches
from ptc_emulator.emulator.model.upstream import UpstreamClient, UpstreamConfig, UpstreamModel
from ptc_emulator.emulator.model.upstream.record import Recording

__all__ = [
    "Delivery",
    "HostedScript",
    "Live",
    "MatchRequest",
    "Model",
    "Plan",
    "Prepared",
    "Refused",
    "ResponseMemo",
    "Runner",
    "ScenarioError",
    "ScenarioFiles",
    "ScenarioRegistry",
    "ScriptedModel",
    "Tape",
    "Trace",
    "UpstreamConfig",
    "UpstreamModel",
    "Validation",
    "clear_caches",
    "file_name",
    "items_of",
    "load_scenario",
    "scenario_from",
    "to_yaml",
    "user_text",
    "validate_scenarios",
    "with_upstream",
]


def with_upstream(scripted: ScriptedModel, config: UpstreamConfig | None, *, record: Path | None = None) -> Model:
    """The model the engine plays with: `scripted`, or with a model upstream for what its
    scenarios do not match (`record`: the directory its finished conversations are written to)."""
    if config is None:
        return scripted
    recording = Recording(record, scripted.scenarios) if record is not None else None
    return UpstreamModel(scripted, UpstreamClient(config), recording)
