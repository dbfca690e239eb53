"""The PTC runtime every model plays programs with, whatever model wrote them.

    programs.py         `Runtime`: check the conversation's programs against the tools, start a
                        program, resume the open one, run or replay one in the sandbox and settle
                        the calls that need no client, list the MCP servers' tools, check a call
                        the model makes; `Output`, what a response emits
    hosted.py           the tools that run on the server's side (MCP, code interpreter, a hosted
                        shell): their listings, their scripted results (`HostedScript`), the
                        results a paused program carries sealed in its response
    hidden_results.py   the hidden call results the process keeps, for a retried request
    plan.py             what a model's plan hands the runtime (`ProgramPlan`, `BoundTools`)

The models (`model/scripted/`, `model/upstream/`) reach it through the names below and nothing
else; it imports no model (the import contracts in pyproject.toml hold both).

Rejected: the runtime inside the scripted model, with the model upstream subclassing its plan and
reaching into its player (where it began): a third model would have copied that.
"""

from ptc_emulator.emulator.model.runtime.hidden_results import HiddenResults
from ptc_emulator.emulator.model.runtime.hosted import (
    CodeInterpreterSpec,
    Hosted,
    HostedPatternTooCostly,
    HostedScript,
    ShellSpec,
    Unscripted,
    hosted_shell_call,
)
from ptc_emulator.emulator.model.runtime.plan import BoundTools, ProgramPlan, plan_of
from ptc_emulator.emulator.model.runtime.programs import Output, Runtime

__all__ = [
    "BoundTools",
    "CodeInterpreterSpec",
    "Hosted",
    "HostedPatternTooCostly",
    "HostedScript",
    "HiddenResults",
    "Output",
    "ProgramPlan",
    "Runtime",
    "ShellSpec",
    "Unscripted",
    "hosted_shell_call",
    "plan_of",
]
