"""What a test asserts on: the journal as typed entries, the tool calls in it, the verifications
(`called`, `requested`: how many calls or requests there were of a kind) and the checks the fixture
runs (`assert_all_scenarios_used`, `assert_no_unmatched`), whose messages show what happened
instead.

    entries = ptc_emulator.requests(status=400)           # JournalEntry dataclasses
    [call] = ptc_emulator.calls("get_inventory", route="program")
    assert call.arguments == {"sku": "sku_123"} and call.output == {"sku": "sku_123", "available_units": 42}
    ptc_emulator.assert_called("get_inventory", times=2, args={"sku": "sku_123"})
    ptc_emulator.assert_requests(times=1, instructions="(?i)stock clerk")
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ptc_emulator.emulator.journal.entries import Figures, JournalEntry
from ptc_emulator.emulator.jsontext import includes

__all__ = [
    "Figures",
    "JournalEntry",
    "ToolCall",
    "called",
    "describe",
    "requested",
    "strict_failure",
    "tool_calls",
    "unmatched",
    "unused",
]

Route = Literal["program", "direct"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model or a program made, as the client received it."""

    name: str
    """The tool's name (`get_inventory`, `ns.tool`); for a tool kind without names, the kind (`shell`)."""
    arguments: Any
    """The arguments, parsed (a function call's JSON), or the text a custom tool got."""
    route: Route
    """`program`: a program made it (its `caller.type` is `program`); `direct`: the model did."""
    type: str
    """The output item's type: `function_call`, `custom_tool_call`, `shell_call`, ..."""
    call_id: str
    program: str | None
    """The calling program's `call_id` (route `program`), else None."""
    seq: int
    """The journal entry (`seq`) whose response carried the call."""
    output: Any = None
    """What the client sent back for it (a later request's `*_output` item, parsed when JSON), or
    None while it has none."""


def _parsed(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def tool_calls(entries: list[JournalEntry]) -> list[ToolCall]:
    """Every `*_call` item of the entries' responses, in order, with the output sent back for it."""
    outputs: dict[str, Any] = {}
    for entry in entries:
        items = entry.request.get("input") if isinstance(entry.request, dict) else None
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_output") and "call_id" in item:
                outputs[str(item["call_id"])] = _parsed(item.get("output"))
    calls = []
    for entry in entries:
        output = entry.response.get("output") if isinstance(entry.response, dict) else None
        for item in output if isinstance(output, list) else ():
            kind = str(item.get("type", ""))
            if not kind.endswith("_call") or "call_id" not in item:
                continue
            caller = item.get("caller") or {}
            program = caller.get("caller_id") if caller.get("type") == "program" else None
            call_id = str(item["call_id"])
            calls.append(
                ToolCall(
                    name=str(item.get("name") or kind.removesuffix("_call")),
                    arguments=_parsed(item["arguments"])
                    if "arguments" in item
                    else item.get("input", item.get("action")),
                    route="program" if program is not None else "direct",
                    type=kind,
                    call_id=call_id,
                    program=program,
                    seq=entry.seq,
                    output=outputs.get(call_id),
                )
            )
    return calls


def describe(entry: JournalEntry, number: int | None = None) -> str:
    """One line for an entry: `#3 POST /v1/responses 'input...' -> scenario 'x' (200, program, message)`,
    numbered `number` (the entry's place among the test's requests, from 1), else by its `seq`."""
    label = f"#{entry.seq if number is None else number}"
    text = (entry.near_miss or {}).get("input") or _latest_input(entry.request)
    shown = f" {text[:60]!r}" if text else ""
    error = entry.error
    if entry.near_miss is not None:
        misses = entry.near_miss.get("near_misses") or []
        closest = f"; closest '{misses[0]['scenario']}' ({misses[0]['field']}): {misses[0]['reason']}" if misses else ""
        return f"{label} {entry.method} {entry.path}{shown} -> no match ({entry.status}{closest})"
    what = f"scenario '{entry.scenario}'" if entry.scenario else "no scenario"
    detail = (
        f"{entry.status} {error.get('code')}: {error.get('message')}"
        if error
        else ", ".join([str(entry.status), *entry.route])
    )
    return f"{label} {entry.method} {entry.path}{shown} -> {what} ({detail})"


def _latest_input(request: Any) -> str:
    if not isinstance(request, dict):
        return ""
    given = request.get("input")
    if isinstance(given, str):
        return given
    for item in reversed(given if isinstance(given, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _what_happened(entries: list[JournalEntry]) -> str:
    if not entries:
        return "  (no request reached the emulator)"
    return "\n".join(f"  {describe(e, number)}" for number, e in enumerate(entries, 1))


def unused(added: list[str], entries: list[JournalEntry]) -> str | None:
    """The failure message when some of the test's scenarios (`added`) answered no request."""
    used = {e.scenario for e in entries}
    never = [name for name in added if name not in used]
    if not never:
        return None
    names = ", ".join(repr(n) for n in never)
    return (
        f"{len(never)} of this test's scenarios answered no request: {names}. The requests:\n{_what_happened(entries)}"
    )


def unmatched(entries: list[JournalEntry]) -> str | None:
    """The failure message when some requests matched no scenario."""
    missed = [(number, e) for number, e in enumerate(entries, 1) if e.near_miss is not None]
    if not missed:
        return None
    lines = []
    for number, entry in missed:
        message = (entry.error or {}).get("message", "")
        lines.append(f"  {describe(entry, number)}\n    {message}")
    return f"{len(missed)} of {len(entries)} requests matched no scenario:\n" + "\n".join(lines)


def strict_failure(
    added: list[str], entries: list[JournalEntry], *, unmatched_requests: bool = True, unused_scenarios: bool = True
) -> str | None:
    """What strict mode reports for a test (None when all is well): a first line that counts what
    failed, then every failed check's message. The requests are numbered from 1, in the order the
    test made them."""
    missed = unmatched(entries) if unmatched_requests else None
    never = unused(added, entries) if unused_scenarios else None
    problems = [p for p in (missed, never) if p is not None]
    if not problems:
        return None
    # Each message's own first clause: "1 of 2 requests matched no scenario", "1 of this test's ...".
    summary = "; ".join(p.split(":", 1)[0] for p in problems)
    return "\n".join([f"{summary}.", *problems])


# ---- verification: how many calls or requests of a kind ---------------------------------------------

Pattern = str | re.Pattern[str]
"""A regular expression (`re.search`), as text or compiled."""


def called(
    entries: list[JournalEntry],
    name: str,
    *,
    times: int | None = None,
    args: dict[str, Any] | Callable[[Any], bool] | None = None,
    route: str | None = None,
) -> tuple[list[ToolCall], str | None]:
    """The calls of tool `name` (by `route`, if given) whose arguments have `args` (the entries of
    an object, as `match.outputs[].json` means it) or satisfy it (a function of the arguments), and
    the failure message when there are not `times` of them (not at least one, `times` left out)."""
    if times is not None and times < 0:
        raise ValueError(f"times is a count (0 or more), not {times}")
    if route not in (None, "program", "direct"):
        raise ValueError(f"route is 'program' or 'direct', not {route!r}")
    calls = tool_calls(entries)
    named = [c for c in calls if c.name == name and route in (None, c.route)]
    if args is None:
        found = named
    elif callable(args):
        found = [c for c in named if args(c.arguments)]
    else:
        found = [c for c in named if includes(c.arguments, args)]
    if (len(found) > 0) if times is None else (len(found) == times):
        return found, None
    wanted = "not to be called" if times == 0 else f"to be called {'at least once' if times is None else _times(times)}"
    if route is not None:
        wanted += " by a program" if route == "program" else " directly"
    if args is not None:
        wanted += f" with arguments {_described(args)}"
    made = f"it was called {_times(len(found))}"
    if args is not None and len(named) != len(found):
        made += f" ({_times(len(named))} whatever the arguments)"
    message = f"Expected {name} {wanted}, but {made}.\n"
    if calls:
        message += "The requests of this test and their tool calls:\n" + _with_calls(entries, calls)
    else:
        message += "This test made no tool call. Its requests:\n" + _what_happened(entries)
    return found, message


def requested(
    entries: list[JournalEntry],
    *,
    times: int | None = None,
    instructions: Pattern | None = None,
    input: Pattern | None = None,
    model: Pattern | None = None,
    scenario: str | None = None,
    status: int | None = None,
    where: Callable[[JournalEntry], bool] | None = None,
) -> tuple[list[JournalEntry], str | None]:
    """The requests that have all that is given: `instructions` found in the request's
    instructions or one of its system or developer messages, `input` in its latest user message,
    `model` matching its model in full, answered by `scenario`, with `status`, and `where` true of
    the entry; and the failure message when there are not `times` of them (not at least one,
    `times` left out)."""
    if times is not None and times < 0:
        raise ValueError(f"times is a count (0 or more), not {times}")
    tests: list[tuple[str, Callable[[JournalEntry], bool]]] = []
    if instructions is not None:
        found_in = _compiled(instructions)
        tests.append(
            (
                f"whose instructions match /{found_in.pattern}/",
                lambda e: any(found_in.search(t) for t in _instructions(e.request)),
            )
        )
    if input is not None:
        searched = _compiled(input)
        tests.append(
            (
                f"whose latest user message matches /{searched.pattern}/",
                lambda e: searched.search(_latest_input(e.request)) is not None,
            )
        )
    if model is not None:
        named = _compiled(model)
        tests.append((f"for model /{named.pattern}/", lambda e: named.fullmatch(_model(e.request)) is not None))
    if scenario is not None:
        tests.append((f"answered by scenario '{scenario}'", lambda e: e.scenario == scenario))
    if status is not None:
        tests.append((f"with status {status}", lambda e: e.status == status))
    if where is not None:
        tests.append((f"for which {_predicate(where)} is true", where))
    found = [e for e in entries if all(test(e) for _, test in tests)]
    if (len(found) > 0) if times is None else (len(found) == times):
        return found, None
    kind = " and ".join(label for label, _ in tests)
    count = len(found)
    if times is None:
        wanted = "at least one request"
    elif times == 0:
        wanted = "no request"
    else:
        wanted = f"exactly {times} request{'' if times == 1 else 's'}"
    numbers = ", ".join(f"#{n}" for n, e in enumerate(entries, 1) if e in found)
    made = "none did" if count == 0 else f"{count} did ({numbers})"
    if not tests:
        made = f"there {'was' if count == 1 else 'were'} {count}"
    message = f"Expected {wanted}{' ' + kind if kind else ''}, but {made}.\nThe requests of this test:\n"
    lines = []
    for number, entry in enumerate(entries, 1):
        lines.append(f"  {describe(entry, number)}")
        if instructions is not None:
            said = _instructions(entry.request)
            lines.append("      instructions: " + ("; ".join(_short(t) for t in said) if said else "(none)"))
        if model is not None:
            lines.append(f"      model: {_short(_model(entry.request))}")
    message += "\n".join(lines) if lines else "  (no request reached the emulator)"
    return found, message


def _times(n: int) -> str:
    return f"{n} time{'' if n == 1 else 's'}"


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _predicate(function: Callable[..., Any]) -> str:
    name = getattr(function, "__name__", "")
    return f"{name}()" if name and name != "<lambda>" else "the predicate"


def _described(args: Any) -> str:
    if callable(args):
        return f"for which {_predicate(args)} is true"
    return f"including {_compact(args)}"


def _compiled(pattern: Pattern) -> re.Pattern[str]:
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


def _with_calls(entries: list[JournalEntry], calls: list[ToolCall]) -> str:
    """Every request, numbered from 1, with the tool calls its response carried under it."""
    lines = []
    for number, entry in enumerate(entries, 1):
        lines.append(f"  {describe(entry, number)}")
        for call in calls:
            if call.seq == entry.seq:
                lines.append(f"      {call.name}({_compact(call.arguments)}) [{call.route}]")
    return "\n".join(lines)


def _model(request: Any) -> str:
    return str(request.get("model") or "") if isinstance(request, dict) else ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _instructions(request: Any) -> list[str]:
    """The request body's `instructions`, then each system or developer message's text."""
    if not isinstance(request, dict):
        return []
    given = request.get("instructions")
    found = [given] if isinstance(given, str) and given else []
    items = request.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("role") in ("system", "developer"):
            found.append(_text(item.get("content")))
    return found
