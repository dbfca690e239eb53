"""What a test asserts on: the journal as typed entries, the tool calls in it, and the checks the
fixture runs (`assert_all_scenarios_used`, `assert_no_unmatched`), whose messages show what
happened instead.

    entries = ptc_emulator.requests(status=400)           # JournalEntry dataclasses
    [call] = ptc_emulator.calls("get_inventory", route="program")
    assert call.arguments == {"sku": "sku_123"} and call.output == {"sku": "sku_123", "available_units": 42}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from ptc_emulator.emulator.journal.entries import Figures, JournalEntry

__all__ = ["Figures", "JournalEntry", "ToolCall", "describe", "strict_failure", "tool_calls", "unmatched", "unused"]

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
