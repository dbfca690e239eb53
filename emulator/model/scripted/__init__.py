"""The scripted model: scenarios decide what the "model" does, and it plays them on the runtime.

    scenario.py     scenario files' shape, loading one, the registry and its matching
    files.py        directories of scenario files (load, validate, reload)
    patterns.py     scenario regular expressions (RE2)
    choose.py       which script plays a request, or the near misses (`NoMatch`)
    script.py       a script and its templates (`templating.py`: bounded Jinja rendering)
    walk.py         where a conversation stands in a script
    model.py        `ScriptedModel`: plan (the script, its place, the checks), play
    player.py       plays the turns (`shell.py`: a hosted shell's direct call)
    faults.py       injected failures
    recording.py    recorded conversations become scenarios (`recorder.py`: written to a directory)

Reached from outside `model/` only through `emulator.model`'s names.
"""

from ptc_emulator.emulator.model.scripted.choose import NoMatch
from ptc_emulator.emulator.model.scripted.files import ScenarioFiles
from ptc_emulator.emulator.model.scripted.model import ScriptedModel
from ptc_emulator.emulator.model.scripted.recorder import Recorder
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError, ScenarioRegistry, load_scenario

__all__ = [
    "NoMatch",
    "Recorder",
    "ScenarioError",
    "ScenarioFiles",
    "ScenarioRegistry",
    "ScriptedModel",
    "load_scenario",
]
