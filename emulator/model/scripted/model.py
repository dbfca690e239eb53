"""The scripted model, the first `model.core.Model`: scenarios (or a message's inline program)
decide what the "model" does; the player plays it, on the runtime every model shares.

`plan` chooses the script (`choose.py`), finds where the conversation stands in it
(`walk.position`), and makes the checks that need the script: the runtime's checks of the
conversation's programs (the open one's tools, the finished ones' seals), the reasoning a
`store: false` resume replays, the contract of the client's tool outputs (strict per scenario or
server), and an injected HTTP error. `plan_matched` is the same, except that a request no script
plays gets its near misses back (`choose.NoMatch`) instead of the 400. `play` hands the plan to
the player (`player.py`).
"""

from __future__ import annotations

from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.core import Prepared, Runner, Trace
from ptc_emulator.emulator.model.runtime import BoundTools, Runtime
from ptc_emulator.emulator.model.scripted.choose import NoMatch, choose_script
from ptc_emulator.emulator.model.scripted.faults import FaultInjector, InjectedHTTPError
from ptc_emulator.emulator.model.scripted.player import Player
from ptc_emulator.emulator.model.scripted.scenario import ScenarioRegistry
from ptc_emulator.emulator.model.scripted.script import Script, ScriptedPlan
from ptc_emulator.emulator.model.scripted.walk import position, turn_items, turn_request
from ptc_emulator.emulator.rules import checks
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.storage import Counts
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["ScriptedModel"]


MANY_SCENARIOS = 64
"""More scenarios than this a request may match (its scope's and the unscoped ones): it is planned
in a worker thread, not on the event loop."""


class ScriptedModel:
    """Plays the registered scenarios (see the module docstring)."""

    def __init__(
        self,
        scenarios: ScenarioRegistry,
        runtime: Runtime,
        *,
        strict_contract: bool = False,
        fault_counts: Counts | None = None,
    ) -> None:
        """`fault_counts`: where the requests an HTTP fault answered are counted (the store's, so
        that replicas count together); without it, in this process."""
        self.scenarios = scenarios
        self.runtime = runtime
        self.strict_contract = strict_contract
        """The server's default; a scenario's own `strict_contract` wins."""
        self.player = Player(runtime)
        self.faults = FaultInjector(counts=fault_counts)

    def plans_at_length(self, scope: str | None) -> bool:
        """Matching tries the scenarios one by one: with thousands added, a request held the event
        loop for seconds (docs/limits.md)."""
        return self.scenarios.count(scope) > MANY_SCENARIOS

    def match_weight(self, scope: str | None) -> int:
        return self.scenarios.match_weight(scope)

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> ScriptedPlan:
        found = self.plan_matched(request, conversation, toolset, trace, scope=scope)
        if isinstance(found, NoMatch):
            raise found.error()
        return found

    def plan_matched(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> ScriptedPlan | NoMatch:
        """`plan`, or for a request no script plays, its near misses."""
        conv, runtime = conversation, self.runtime
        tools = BoundTools(request, toolset)
        script = choose_script(self.scenarios, conv, request, toolset, scope, tools.bindings)
        if isinstance(script, NoMatch):
            # A paused program continued with other tools matches no scenario (its `match.tools`
            # are gone): the precise 400 an inline program gets says what changed.
            runtime.check_open(conv, tools)
            return script
        trace.scenario = script.name
        trace.held_to_token_limit = True
        turn, emitted = position(conv, script)
        scripted = script.scenario.hosted if script.scenario is not None else None
        hosted = runtime.hosted(request, conv, toolset, trace, scripted or self.scenarios.hosted(scope), scope)
        open_indexes = runtime.check(conv, tools, hosted)
        checks.check_direct_approvals(conv, runtime.signer)  # the scripted model issued them
        if request.store is False:
            reasoned = [first for first, scripted in turn_items(conv, script) if scripted.reasoning is not None]
            checks.check_reasoning(conv, runtime.signer, reasoned)
        strict = self.strict_contract
        if script.scenario is not None and script.scenario.strict_contract is not None:
            strict = script.scenario.strict_contract
        trace.contract.extend(checks.check_outputs(conv, toolset))
        if strict and trace.contract:
            raise messages.contract_violation(trace.contract[0].describe(), "input")
        fault = script.turns[turn].fault if self._starts_turn(conv, script, turn, emitted) else None
        if fault is not None:
            try:
                own = script.scenario.scope if script.scenario is not None else None
                trace.fault = self.faults.http_error(fault, (own, script.name, scope, turn), conv.items)
            except InjectedHTTPError as e:
                trace.fault = e.what
                raise
        return ScriptedPlan(
            script=script,
            hosted=hosted,
            tools=tools,
            open_indexes=open_indexes,
            turn=turn,
            emitted=emitted,
            fault=fault,
            strict_contract=strict,
        )

    @staticmethod
    def _starts_turn(conv: Conversation, script: Script, turn: int, emitted: int) -> bool:
        """Whether this response starts turn `turn`, whose `fault` it then gets: not one that
        resumes a program the turn started, nor one that plays a later call of a call turn played a
        call a response (`parallel_tool_calls: false`), nor the one that plays a direct MCP call
        whose approval the turn asked (`times: 1` answered each of these with its error again)."""
        if conv.open_program is not None or turn >= len(script.turns) or emitted > 0:
            return False
        return script.turns[turn].mcp is None or turn_request(conv, script, turn) is None

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        return await self.player.play(prepared, runner)
