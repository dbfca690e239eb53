"""What every model's plan hands the runtime: the response's tools as bound for it, its server-side
tools, and what the checks found of its open program.

A model's `Plan` (`model.core.Plan`) is its own type; a model whose responses run programs makes
it a `ProgramPlan` (the scripted model's `ScriptedPlan` adds the script and its place in it, the
upstream model's `UpstreamPlan` the author), and the runtime reads only these fields of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptc_emulator.emulator.model.core import Delivery, Prepared
from ptc_emulator.emulator.model.runtime.hosted import Hosted
from ptc_emulator.emulator.tools.kinds import Binding, bind
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["BoundTools", "ProgramPlan", "plan_of"]


class BoundTools:
    """A response's callable tools (`tools.kinds.bind`) and what a program started now may call,
    made once as the response starts and handed to each step that calls a tool (choosing the
    scenario, the open program's check, starting and running programs, direct calls). A
    server-executed tool search is the one thing that changes them while the response plays: it
    calls `rebind` after it loads tools."""

    def __init__(self, request: CreateRequest, toolset: Toolset) -> None:
        self.request = request
        self.toolset = toolset
        self.bindings: dict[str, Binding] = {}
        self.program_tools: tuple[str, ...] = ()
        """By the names a program calls them, sorted (a fingerprint binds this tuple; none without PTC)."""
        self.rebind()

    def rebind(self) -> None:
        self.bindings = bind(self.request, self.toolset)
        self.program_tools = (
            tuple(sorted(b.name for b in self.bindings.values() if b.program_visible))
            if self.request.ptc_enabled
            else ()
        )


@dataclass(frozen=True, kw_only=True)
class ProgramPlan:
    """The part of a model's plan the runtime reads (a `model.core.Plan`)."""

    hosted: Hosted
    """The server-side tools of this response."""
    tools: BoundTools
    """The request's tools as bound for this response (see `BoundTools`)."""
    open_indexes: tuple[int, ...] = ()
    """The open program's calls' positions in its issue order, as the checks found them."""
    strict_contract: bool = False
    """Whether a call the model makes that breaks its tool's schema refuses the request."""

    @property
    def delivery(self) -> Delivery | None:
        return None


def plan_of(prepared: Prepared) -> ProgramPlan:
    """The plan of a response whose programs the runtime runs."""
    plan = prepared.plan
    assert isinstance(plan, ProgramPlan), "a response that runs programs has a ProgramPlan"
    return plan
