"""The scripted model, the first `model.core.Model`: scenarios (or a message's inline program)
decide what the "model" does; the player plays it.

`plan` chooses the script (`choose.py`), finds where the conversation stands in it
(`script.position`), and makes the checks that need the script: the open program's tools, the
finished programs' seals, the reasoning a `store: false` resume replays, the contract of the
client's tool outputs (strict per scenario or server), and an injected HTTP error. `play` hands
the plan to the player (`player.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.errors import InvalidRequest, NoScenarioMatched
from ptc_emulator.emulator.model.core import Prepared, Runner, Trace
from ptc_emulator.emulator.model.runtime.hidden_results import Memo
from ptc_emulator.emulator.model.runtime.hosted import Hosted
from ptc_emulator.emulator.model.runtime.programs import Programs
from ptc_emulator.emulator.model.scripted.choose import choose_script
from ptc_emulator.emulator.model.scripted.faults import FaultInjector, InjectedHTTPError
from ptc_emulator.emulator.model.scripted.player import Player
from ptc_emulator.emulator.model.scripted.scenario import ScenarioRegistry
from ptc_emulator.emulator.model.scripted.script import BoundTools, Script, ScriptedPlan
from ptc_emulator.emulator.model.scripted.walk import position, turn_items
from ptc_emulator.emulator.rules import checks
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.tools.mcp import McpPolicy
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.sandbox import Limits

__all__ = ["ScriptedModel"]


class ScriptedModel:
    """Plays the registered scenarios (see the module docstring)."""

    def __init__(
        self,
        scenarios: ScenarioRegistry,
        *,
        signer: Signer,
        limits: Limits,
        ids: Callable[[str], str],
        seeds: Callable[[], int],
        clock: Callable[[], float],
        strict_contract: bool = False,
        mcp: McpPolicy | None = None,
        memo: Memo | None = None,
    ) -> None:
        """`mcp`: the MCP client's policy; `memo`: the hidden call results' memo (its owner frees it)."""
        self.scenarios = scenarios
        self.signer = signer
        self.limits = limits
        self.strict_contract = strict_contract
        """The server's default; a scenario's own `strict_contract` wins."""
        programs = Programs(signer=signer, limits=limits, ids=ids, seeds=seeds, clock=clock)
        self.player = Player(programs, mcp=mcp, memo=memo)
        self.faults = FaultInjector()

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> ScriptedPlan:
        conv = conversation
        tools = BoundTools(request, toolset)
        try:
            script = choose_script(self.scenarios, conv, request, toolset, scope, tools.bindings)
        except NoScenarioMatched:
            if conv.open_program is not None:
                # A paused program continued with other tools matches no scenario (its `match.tools`
                # are gone): the precise 400 an inline program gets says what changed.
                checks.check_open_program(
                    conv,
                    self.signer,
                    allowed=sorted(tools.program_tools),
                    server_labels=set(),
                    max_tool_calls=self.limits.max_tool_calls,
                )
            raise
        trace.scenario = script.name
        turn, emitted = position(conv, script)
        hosted, open_indexes = self.check_programs(request, conv, toolset, tools, script, trace, scope)
        if request.store is False:
            reasoned = [first for first, scripted in turn_items(conv, script) if scripted.reasoning is not None]
            checks.check_reasoning(conv, self.signer, reasoned)
        strict = self.strict_contract
        if script.scenario is not None and script.scenario.strict_contract is not None:
            strict = script.scenario.strict_contract
        trace.contract.extend(checks.check_outputs(conv, toolset))
        if strict and trace.contract:
            raise InvalidRequest(trace.contract[0].describe(), param="input", code="contract_violation")
        fault = script.turns[turn].fault if conv.open_program is None and turn < len(script.turns) else None
        if fault is not None:
            try:
                trace.fault = self.faults.http_error(fault, (scope, script.name, turn), conv.items)
            except InjectedHTTPError as e:
                trace.fault = e.what
                raise
        return ScriptedPlan(
            script=script,
            hosted=hosted,
            tools=tools,
            open_indexes=tuple(open_indexes),
            turn=turn,
            emitted=emitted,
            fault=fault,
            strict_contract=strict,
        )

    def check_programs(
        self,
        request: CreateRequest,
        conv: Conversation,
        toolset: Toolset,
        tools: BoundTools,
        script: Script,
        trace: Trace,
        scope: str | None,
    ) -> tuple[Hosted, list[int]]:
        """The server-side tools `script` may use, and the checks of the conversation's programs: the
        open one's calls against the tools it may call (its call indexes), the finished ones' seals.
        Shared with the model upstream, whose programs are checked as scripted ones are."""
        hosted = self.player.hosted_tools(request, conv, toolset, script, trace, self.scenarios.hosted(scope))
        open_indexes: list[int] = []
        if conv.open_program is not None:
            open_indexes = checks.check_open_program(
                conv,
                self.signer,
                allowed=sorted({*tools.program_tools, *hosted.static_names()}),
                server_labels={label for label, tool in hosted.mcp_tools.items() if tool.programmatic},
                max_tool_calls=self.limits.max_tool_calls,
            )
        checks.check_finished_programs(conv, self.signer)
        return hosted, open_indexes

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        return await self.player.play(prepared, runner)
