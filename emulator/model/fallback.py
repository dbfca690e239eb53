"""The scripted model first, a model upstream for the rest (docs/any-model.md).

Scenarios, and a user message's inline ```js block, still win: the scripted model is asked which
script plays the request (`ScriptedModel.plan_matched`); a request none plays goes to the model
upstream. With `--record DIR`, each conversation the upstream finishes is written to DIR as a
scenario (`scripted/recorder.py`) and added to the registry, so it replays offline.

The two models never meet: this module is the only place that holds both.
"""

from __future__ import annotations

from typing import Any

from ptc_emulator.emulator.model.core import Plan, Prepared, Runner, Trace
from ptc_emulator.emulator.model.scripted.choose import NoMatch
from ptc_emulator.emulator.model.scripted.model import ScriptedModel
from ptc_emulator.emulator.model.scripted.recorder import Recorder
from ptc_emulator.emulator.model.upstream import UpstreamModel
from ptc_emulator.emulator.model.upstream.model import UpstreamPlan
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["Fallback"]


class Fallback:
    """A `model.core.Model`: `scripted` plays what its scripts match, `upstream` the rest."""

    def __init__(self, scripted: ScriptedModel, upstream: UpstreamModel, recorder: Recorder | None = None) -> None:
        """`recorder`: where the conversations the upstream finishes are written (`--record`)."""
        self.scripted = scripted
        self.upstream = upstream
        self.recorder = recorder

    def plans_at_length(self, scope: str | None) -> bool:
        return self.scripted.plans_at_length(scope)

    def match_weight(self, scope: str | None) -> int:
        return self.scripted.match_weight(scope)

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> Plan:
        found = self.scripted.plan_matched(request, conversation, toolset, trace, scope=scope)
        if isinstance(found, NoMatch):
            return self.upstream.plan(request, conversation, toolset, trace, scope=scope)
        return found

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        plan = prepared.plan
        if not isinstance(plan, UpstreamPlan):
            return await self.scripted.play(prepared, runner)
        output = await self.upstream.play(prepared, runner)
        if self.recorder is not None:
            request = prepared.request.model_dump(mode="json", exclude_none=True, by_alias=True)
            # A turn the upstream stopped short (its token limit, its content filter) ends the
            # response `incomplete`: not a finished conversation, so not written down as one.
            status = "incomplete" if prepared.trace.stopped is not None else "completed"
            response = {"id": prepared.response_id, "status": status, "output": output}
            await self.recorder.exchange(request, response, plan.author)
        return output

    async def aclose(self) -> None:
        await self.upstream.aclose()
