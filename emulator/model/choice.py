"""`tool_choice`: what the request lets the scripted model do next, and the turns that contradict it.

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

from typing import Any

from ..errors import EmulatorError
from ..request import (
    AllowedToolsChoice,
    CreateRequest,
    CustomToolChoice,
    FunctionToolChoice,
    KindToolChoice,
    ProgrammaticToolChoice,
)
from .scenario import Turn

__all__ = ["conflict", "describe", "next_turn_conflict"]


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
    if turn.kind in ("mcp", "code_interpreter"):
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
    tool_turn = turn.kind in ("program", "call", "mcp", "code_interpreter")
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
