"""What plays a response.

    core.py       the `Model` protocol and the engine's types (`Prepared`, `Trace`, `Runner`...)
    runtime/      the PTC runtime every model plays programs with (check, start, resume, run,
                  settle, the server-side tools, the MCP listings)
    scripted/     the first model: scenarios, their templates and patterns, where a conversation
                  stands in a script (the walk), the player, injected faults, recordings
    upstream/     the second: a real model behind an OpenAI-compatible endpoint writes the programs
    fallback.py   the scripted model for what its scripts match, a model upstream for the rest
                  (`with_upstream` makes one)

The two models import the runtime's face and never each other; the runtime imports neither
(the import contracts in pyproject.toml hold this). Outside `model/` nothing imports the rooms
above: the names below are the face (the registry the admin routes fill, the loader, the
recorder and the recording proxy's helpers, the runtime the engine makes).
"""

from pathlib import Path

from ptc_emulator.emulator.model.core import Delivery, Live, MadeOnce, Model, Plan, Prepared, Refused, Runner, Trace
from ptc_emulator.emulator.model.fallback import Fallback
from ptc_emulator.emulator.model.runtime import HiddenResults, HostedScript, Runtime
from ptc_emulator.emulator.model.scripted.faults import forget_counts as forget_fault_counts
from ptc_emulator.emulator.model.scripted.files import ScenarioFiles, ScenarioFilesError, Validation
from ptc_emulator.emulator.model.scripted.files import validate as validate_scenarios
from ptc_emulator.emulator.model.scripted.model import ScriptedModel
from ptc_emulator.emulator.model.scripted.recorder import Recorder
from ptc_emulator.emulator.model.scripted.recording import (
    empty_answer,
    file_name,
    full_match,
    items_of,
    match_context,
    readable_yaml,
    user_text,
)
from ptc_emulator.emulator.model.scripted.scenario import (
    MAX_SCENARIO_JSON_VALUES,
    Scenario,
    ScenarioError,
    ScenarioRegistry,
    TooManyNodes,
    load_scenario,
    load_yaml_without_aliases,
)
from ptc_emulator.emulator.model.scripted.scenario import Request as MatchRequest
from ptc_emulator.emulator.model.scripted.scenario import missing as missing_scenario_path
from ptc_emulator.emulator.model.upstream import DEFAULT_PROTOCOL as DEFAULT_UPSTREAM_PROTOCOL
from ptc_emulator.emulator.model.upstream import PROTOCOLS as UPSTREAM_PROTOCOLS
from ptc_emulator.emulator.model.upstream import (
    UpstreamClient,
    UpstreamConfig,
    UpstreamModel,
    UpstreamProtocol,
    protocol_named,
)
from ptc_emulator.emulator.model.upstream.redaction import MIN_REDACTED, Redaction

__all__ = [
    "MAX_SCENARIO_JSON_VALUES",
    "forget_fault_counts",
    "missing_scenario_path",
    "DEFAULT_UPSTREAM_PROTOCOL",
    "UPSTREAM_PROTOCOLS",
    "Delivery",
    "Fallback",
    "HostedScript",
    "Live",
    "MatchRequest",
    "TooManyNodes",
    "load_yaml_without_aliases",
    "HiddenResults",
    "Model",
    "Plan",
    "Prepared",
    "Recorder",
    "MIN_REDACTED",
    "Redaction",
    "Refused",
    "MadeOnce",
    "Runner",
    "Runtime",
    "Scenario",
    "ScenarioError",
    "ScenarioFiles",
    "ScenarioFilesError",
    "ScenarioRegistry",
    "ScriptedModel",
    "Trace",
    "UpstreamConfig",
    "UpstreamModel",
    "UpstreamProtocol",
    "Validation",
    "empty_answer",
    "file_name",
    "full_match",
    "items_of",
    "load_scenario",
    "match_context",
    "protocol_named",
    "readable_yaml",
    "user_text",
    "validate_scenarios",
    "with_upstream",
]


def with_upstream(scripted: ScriptedModel, config: UpstreamConfig | None, *, record: Path | None = None) -> Model:
    """The model the engine plays with: `scripted`, or with a model upstream for what its
    scenarios do not match (`record`: the directory its finished conversations are written to)."""
    if config is None:
        return scripted
    upstream = UpstreamModel(
        scripted.runtime,
        UpstreamClient(config),
        strict_contract=scripted.strict_contract,
        hosted=scripted.scenarios.hosted,
    )
    keyed = Redaction(config.api_key)
    recorder = (
        Recorder(record, scripted.scenarios, keyed.within if keyed.secret else None) if record is not None else None
    )
    return Fallback(scripted, upstream, recorder)
