"""The guide's "Evaluate" section, from the request journal: figures per conversation, and a
comparison of a direct-calling baseline with a programmatic run of the same task.

A conversation here is one run of a task, as `grouping` finds them (the grouping the trace
inspector shows). `conversations()` and `compare()` read journal entries as dicts (what
`JournalEntry.as_dict()` gives), so they do not depend on how the journal keeps them.
"""

from __future__ import annotations

from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.journal.grouping import label

__all__ = ["compare", "conversations"]

_SUMMED = (
    "model_turns",
    "direct_tool_calls",
    "program_tool_calls",
    "programs_run",
    "retries",
    "kept_out_bytes",
    "kept_out_tokens",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "total_tokens",
    "latency_ms",
)


def _final_answer(entry: dict[str, Any]) -> str | None:
    response = entry.get("response") or {}
    texts = [
        str(part.get("text", part.get("refusal", "")))
        for item in response.get("output") or []
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict)
    ]
    return "".join(texts) if texts else None


def conversations(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of each conversation in these journal entries, in order of their first request."""
    found: dict[str, dict[str, Any]] = {}
    for entry in label(entries):
        key = entry.get("conversation")
        if key is None:
            continue
        summary = found.get(key)
        if summary is None:
            summary = found[key] = {
                "conversation": key,
                "scenario": entry.get("scenario"),
                "requests": 0,
                "responses": [],
                "errors": 0,
                **{name: 0 for name in _SUMMED},
                "calls": {},
                "first_at": entry.get("at"),
                "last_at": entry.get("at"),
                "final_answer": None,
            }
        summary["requests"] += 1
        summary["last_at"] = entry.get("at")
        if entry.get("status", 200) >= 400:
            summary["errors"] += 1
        if entry.get("response_id"):
            summary["responses"].append(entry["response_id"])
        figures = entry.get("figures") or {}
        for name in _SUMMED:
            summary[name] += figures.get(name) or 0
        for kind, routes in (figures.get("calls") or {}).items():
            into = summary["calls"].setdefault(kind, {"direct": 0, "program": 0})
            for route, n in routes.items():
                into[route] = into.get(route, 0) + n
        answer = _final_answer(entry)
        if answer is not None:
            summary["final_answer"] = answer
    for summary in found.values():
        summary["route"] = "programmatic" if summary["programs_run"] else "direct"
        summary["latency_ms"] = round(summary["latency_ms"], 3)
    return list(found.values())


def _find(summaries: list[dict[str, Any]], name: str, param: str) -> dict[str, Any]:
    for summary in summaries:
        if summary["conversation"] == name or name in summary["responses"]:
            return summary
    raise messages.journal_names_nothing(name, param)


def _pick(summaries: list[dict[str, Any]], route: str, param: str) -> dict[str, Any]:
    matching = [s for s in summaries if s["route"] == route]
    if not matching:
        raise messages.journal_has_no_route(route, param)
    return matching[-1]


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def _line(label: str, s: dict[str, Any]) -> str:
    return (
        f"{label} ({s['conversation']}): {len(s['responses'])} responses, {s['model_turns']} model turns, "
        f"{s['direct_tool_calls']} direct and {s['program_tool_calls']} program tool calls, "
        f"{s['programs_run']} program runs, {s['retries']} retries; input {s['input_tokens']:,} tokens "
        f"({s['cached_tokens']:,} cached), output {s['output_tokens']:,}, total {s['total_tokens']:,}; "
        f"{s['latency_ms']:,.0f} ms in the emulator."
    )


def compare(entries: list[dict[str, Any]], *, direct: str | None = None, ptc: str | None = None) -> dict[str, Any]:
    """Two runs of the same task side by side: a direct-calling baseline and a programmatic run.

    `direct` and `ptc` name a conversation or any response in it; left out, the latest
    conversation that ran no program, and the latest that ran one."""
    summaries = conversations(entries)
    base = _find(summaries, direct, "direct") if direct else _pick(summaries, "direct", "direct")
    cand = _find(summaries, ptc, "ptc") if ptc else _pick(summaries, "programmatic", "ptc")
    if base is cand:
        raise messages.compare_same_conversation()
    difference = {name: cand[name] - base[name] for name in _SUMMED}
    saved = base["input_tokens"] - cand["input_tokens"]
    kept = cand["kept_out_tokens"]
    same = base["final_answer"] is not None and base["final_answer"] == cand["final_answer"]
    lines = [_line("Direct", base), _line("PTC", cand)]
    if saved >= 0:
        lines.append(
            f"PTC used {saved:,} fewer input tokens than direct ({_percent(saved, base['input_tokens'])} less) "
            f"and {-difference['total_tokens']:,} fewer total tokens."
        )
    else:
        lines.append(f"PTC used {-saved:,} more input tokens than direct.")
    lines.append(
        f"Tool output that programs consumed and the model never read: {cand['kept_out_bytes']:,} bytes, "
        f"{kept:,} tokens; the input saving is {_percent(saved, kept)} of that."
    )
    lines.append(
        "Final answers: "
        + ("the same." if same else "they differ (or one run has none): check correctness before efficiency.")
    )
    return {
        "object": "emulator.comparison",
        "direct": base,
        "ptc": cand,
        "difference": difference,
        "input_tokens_saved": saved,
        "total_tokens_saved": -difference["total_tokens"],
        "kept_out_tokens": kept,
        "saving_to_kept_out": round(saved / kept, 4) if kept else None,
        "same_final_answer": same,
        "summary": "\n".join(lines),
    }
