"""Which script plays a request: the first scenario that matches, else the latest user message's
inline ```js block (or tool search), else a 400 that says what came closest."""

from __future__ import annotations

from typing import Any

from ..errors import NoScenarioMatched
from ..request import CreateRequest
from ..rules.conversation import Conversation
from ..toolkinds import bind
from ..toolset import Toolset
from .choice import next_turn_conflict
from .scenario import NearMiss, Request, Scenario, ScenarioRegistry
from .script import Script, inline_code, inline_search, position

__all__ = ["choose_script"]


def choose_script(
    scenarios: ScenarioRegistry, conv: Conversation, request: CreateRequest, toolset: Toolset, scope: str | None
) -> Script:
    text = conv.anchor_text

    def contradiction(scenario: Scenario) -> str | None:
        if conv.open_program is not None:
            return None  # resuming a program is not the model choosing
        script = Script(scenario.name, list(scenario.turns), {}, scenario)
        return next_turn_conflict(request, script.turns, lambda: position(conv, script)[0])

    found = scenarios.match(
        Request(
            text=text,
            tools=frozenset({*toolset.declared, *bind(request, toolset)}),
            ptc=request.ptc_enabled,
            model=request.model or "",
            metadata=request.metadata or {},
            scope=scope,
            deferred=frozenset(n for n in toolset.declared if toolset.not_loaded(n)),
            choice=contradiction,
        )
    )
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
        raise no_match(text, found, inline=f"the ```js block cannot run: {reason}")
    raise no_match(text, found)


def no_match(text: str, misses: list[NearMiss], inline: str | None = None) -> NoScenarioMatched:
    """The 400 for a request no script plays, with the near-miss report the journal keeps."""
    shown = text if len(text) <= 120 else text[:117] + "..."
    if misses:
        closest = "; ".join(f"'{m.scenario}' ({m.field}): {m.reason}" for m in misses[:3])
        message = f"No scenario matches this request. Closest: {closest}."
    else:
        message = "No scenario matches this request (no scenario is loaded)."
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
    return NoScenarioMatched(message, report)
