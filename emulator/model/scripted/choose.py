"""Which script plays a request: the first scenario that matches, else the latest user message's
inline ```js block (or tool search), else no script: the near misses (`NoMatch`), for the caller
to decide (the scripted model answers with the 400 that says what came closest; a model upstream
behind it plays the request instead).

`tool_choice` (below): what the request lets the scripted model do next, and the turns that contradict it.

A hosted model obeys `tool_choice`; a scripted one cannot, so a scenario whose next turn does
what the request forbids does not match (the near-miss report says why), and an inline program
under `tool_choice: "none"` is refused. The choices and what they allow:

    none                              a message or a refusal; no program, no call
    required                          a program or a call
    {"type": "function", name}        a direct call of that function
    {"type": "custom", name}          a direct call of that custom tool
    {"type": "shell"|"apply_patch"}   a direct call of that tool
    {"type": "programmatic_tool_calling"}   a program
    {"type": "allowed_tools", mode, tools}  programs and calls of the listed tools only; with
                                      mode "required", a program or a call

A program the request resumes is not the model choosing, so it is never checked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ptc_emulator.emulator.errors import EmulatorError, NoScenarioMatched
from ptc_emulator.emulator.model.scripted.scenario import (
    NearMiss,
    Request,
    Said,
    Scenario,
    ScenarioRegistry,
    ToolOutput,
    Turn,
)
from ptc_emulator.emulator.model.scripted.script import Script, inline_code, inline_search
from ptc_emulator.emulator.model.scripted.walk import position
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.tools.kinds import Binding, answer_text, bind, kind_of_call
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.base import dump
from ptc_emulator.emulator.wire.items import OUTPUT_TYPES, Message
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.tools import (
    AllowedToolsChoice,
    CustomToolChoice,
    FunctionToolChoice,
    KindToolChoice,
    ProgrammaticToolChoice,
)

__all__ = ["NoMatch", "choose_script", "conflict", "describe", "next_turn_conflict"]


def choose_script(
    scenarios: ScenarioRegistry,
    conv: Conversation,
    request: CreateRequest,
    toolset: Toolset,
    scope: str | None,
    bindings: dict[str, Binding] | None = None,
) -> Script | NoMatch:
    """The script that plays the request, or the near misses (`bindings`: the request's tools as
    bound for `toolset` (`bind`), when the caller has them)."""
    text = conv.anchor_text

    def contradiction(scenario: Scenario) -> str | None:
        if conv.open_program is not None:
            return None  # resuming a program is not the model choosing
        script = Script(scenario.name, list(scenario.turns), {}, scenario)
        return next_turn_conflict(request, script.turns, lambda: position(conv, script)[0])

    asked = Request(
        text=text,
        tools=frozenset({*toolset.declared, *(bindings if bindings is not None else bind(request, toolset))}),
        ptc=request.ptc_enabled,
        model=request.model or "",
        metadata=request.metadata or {},
        scope=scope,
        deferred=frozenset(n for n in toolset.declared if toolset.not_loaded(n)),
        choice=contradiction,
        context=_Read(conv, request),
    )
    found = scenarios.match(asked)
    if not isinstance(found, list):
        scenario, captures = found
        return Script(scenario.name, list(scenario.turns), {"input": text, **captures}, scenario)
    code, search = inline_code(text), inline_search(text)
    if code is not None or search is not None:
        script = Script.inline(code, search)
        reason = None
        if conv.open_program is None:
            reason = next_turn_conflict(request, script.turns, lambda: position(conv, script)[0])
        if reason is None:
            return script
        return NoMatch(text, found, inline=f"the ```js block cannot run: {reason}", scoped=_scoped(scenarios, asked))
    return NoMatch(text, found, scoped=_scoped(scenarios, asked))


class _Read:
    """The request's `Context`, read from the conversation when a scenario first asks."""

    def __init__(self, conv: Conversation, request: CreateRequest) -> None:
        self._conv = conv
        self._request = request

    @functools.cached_property
    def instructions(self) -> tuple[str, ...]:
        given = [self._request.instructions] if self._request.instructions else []
        said = [i.text() for i in self._conv.items if isinstance(i, Message) and i.role in ("system", "developer")]
        return (*given, *said)

    @functools.cached_property
    def history(self) -> tuple[Said, ...]:
        earlier = self._conv.items[: self._conv.anchor]
        return tuple(Said(i.role, i.text()) for i in earlier if isinstance(i, Message) and i.role in _SPEAKERS)

    @functools.cached_property
    def outputs(self) -> tuple[ToolOutput, ...]:
        conv = self._conv
        since = {id(item) for item in conv.after_anchor() if isinstance(item, OUTPUT_TYPES)}
        found = []
        for call_id, output in conv.outputs.items():
            if id(output) in since:
                call = conv.calls.get(call_id)
                name = kind_of_call(call).call_name(call) if call is not None else ""
                found.append(ToolOutput(name, answer_text(output)))
        return tuple(found)

    @functools.cached_property
    def tool_choice(self) -> Any:
        choice = self._request.tool_choice
        if choice is None:
            return "auto"
        return choice if isinstance(choice, str) else dump(choice)


_SPEAKERS = ("user", "assistant")


def _scoped(scenarios: ScenarioRegistry, request: Request) -> int:
    """For a request with no scope: how many scoped scenarios it would match (names not shown: they
    are other callers')."""
    return scenarios.scoped_matches(request) if request.scope is None else 0


@dataclass(frozen=True)
class NoMatch:
    """A request no script plays: its latest user message, the scenarios that came closest, why
    its inline block cannot run (if it has one), and how many scenarios of a scope would match it
    (`scoped`, the request having no scope)."""

    text: str
    misses: list[NearMiss]
    inline: str | None = None
    scoped: int = 0

    def error(self) -> NoScenarioMatched:
        """The 400 that says so, with the near-miss report the journal keeps."""
        text, misses, inline, scoped = self.text, self.misses, self.inline, self.scoped
        shown = text if len(text) <= 120 else text[:117] + "..."
        if misses:
            closest = "; ".join(f"'{m.scenario}' ({m.field}): {m.reason}" for m in misses[:3])
            message = f"No scenario matches this request. Closest: {closest}."
        else:
            message = "No scenario matches this request (no scenario is loaded)."
        if scoped:
            message = (
                f"This request has no scope, and {scoped} scenario{'' if scoped == 1 else 's'} of a scope would match "
                "it: send it in the test's scope, with the base URL http://HOST:PORT/scopes/<scope>/v1 (the pytest "
                "fixture's base_url, or its env for code that builds its own client) or the x-ptc-emulator-scope "
                "header. " + message
            )
        if inline is None:
            message += " The latest user message has no ```js code block to run inline either."
        else:
            message += f" The latest user message has a ```js code block, but {inline}."
        report: dict[str, Any] = {
            "input": shown,
            "near_misses": [m.as_dict() for m in misses],
            "inline_code": inline is not None,
        }
        if inline is not None:
            report["inline_conflict"] = inline
        if scoped:
            report["scoped_matches"] = scoped
        return NoScenarioMatched(message, report)


# tool_choice: what the request lets the scripted model do next


def describe(choice: Any) -> str:
    """The choice as a message shows it."""
    if isinstance(choice, str):
        return f"'{choice}'"
    if isinstance(choice, FunctionToolChoice | CustomToolChoice):
        return f"the {choice.type} tool '{choice.name}'"
    if isinstance(choice, KindToolChoice):
        return f"the {choice.type} tool"
    if isinstance(choice, ProgrammaticToolChoice):
        return "programmatic_tool_calling"
    if isinstance(choice, AllowedToolsChoice):
        return f"allowed_tools ({choice.mode})"
    return f"'{getattr(choice, 'type', choice)}'"


def _what(turn: Turn) -> str:
    if turn.kind == "program":
        return "runs a program"
    if turn.kind == "call":
        names = ", ".join(f"'{c.name}'" for c in turn.calls)
        return f"calls {names}"
    if turn.kind in ("mcp", "code_interpreter", "shell"):
        return f"makes a direct {turn.kind} call"
    return f"is a {turn.kind}"


def _allowed_names(choice: AllowedToolsChoice) -> tuple[set[str], bool]:
    names: set[str] = set()
    programs = False
    for tool in choice.tools:
        kind = tool.get("type")
        if kind == "programmatic_tool_calling":
            programs = True
        elif kind in ("function", "custom"):
            names.add(str(tool.get("name")))
        elif isinstance(kind, str):
            names.add(kind)
    return names, programs


def conflict(choice: Any, turn: Turn, number: int) -> str | None:
    """Why turn `number` (1-based) does what `choice` forbids, or None."""
    if choice is None or choice == "auto":
        return None
    tool_turn = turn.kind in ("program", "call", "mcp", "code_interpreter", "shell")
    ok: bool
    if choice == "none":
        ok = not tool_turn
    elif choice == "required":
        ok = tool_turn
    elif isinstance(choice, FunctionToolChoice | CustomToolChoice):
        ok = turn.kind == "call" and all(c.name == choice.name for c in turn.calls)
    elif isinstance(choice, KindToolChoice):
        ok = turn.kind == "call" and all(c.name == choice.type for c in turn.calls)
    elif isinstance(choice, ProgrammaticToolChoice):
        ok = turn.kind == "program"
    elif isinstance(choice, AllowedToolsChoice):
        names, programs = _allowed_names(choice)
        if turn.kind == "program":
            ok = programs
        elif turn.kind == "call":
            ok = all(c.name in names for c in turn.calls)
        else:
            ok = choice.mode == "auto"
    else:
        return None  # a hosted tool's choice: nothing a scenario can do
    if ok:
        return None
    return f"tool_choice is {describe(choice)}, but turn {number} {_what(turn)}"


def next_turn_conflict(request: CreateRequest, turns: list[Turn], position: Any) -> str | None:
    """`conflict` for the turn a response would start with; `position()` gives that turn (it may
    raise for a conversation that does not follow these turns: then nothing is reported here)."""
    choice = request.tool_choice
    if choice is None or choice == "auto":
        return None
    try:
        turn = position()
    except EmulatorError:
        return None
    if turn >= len(turns):
        return None
    return conflict(choice, turns[turn], turn + 1)
