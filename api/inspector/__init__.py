"""The trace inspector: a page at `/_emulator/ui/` and the read endpoints behind it.

The page's files (`api/static/inspector/`) ship in the wheel and are served as they are: no build
step, nothing fetched from elsewhere. They hold no data, so the server hands them out without the
API key; everything the page shows comes from `/_emulator/inspector/...`, which sits behind the
same `Authorization: Bearer` check as the rest of the admin API (docs/inspector.md says how the
page carries the key).

The conversations are the journal's own (`emulator/journal/grouping.py`): the same grouping as the
journal's `conversation` field and its figures per conversation.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ptc_emulator.api.routes.admin import _scope
from ptc_emulator.api.sse import KEEP_ALIVE, EventStreamResponse
from ptc_emulator.emulator import collector, messages
from ptc_emulator.emulator.journal import grouping
from ptc_emulator.emulator.journal.grouping import (
    inputs,
    outputs,
    program_ids,
    replayed,
    request_of,
    response_of,
    retries,
)
from ptc_emulator.names import SCOPE_HEADER

__all__ = ["UI_PATH", "conversation", "group", "root_router", "router", "summarise"]

UI_PATH = "/_emulator/ui/"

router = APIRouter(prefix="/_emulator", tags=["emulator inspector"])
root_router = APIRouter()
"""`/`: a person who opens the server's address lands in the inspector."""

_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    "inspector.js": "text/javascript; charset=utf-8",
    "highlight.js": "text/javascript; charset=utf-8",
}
# Nothing but the page's own files: no inline script, no other origin.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
POLL_S = 0.25
"""How often the event stream looks for new journal entries."""
STREAM_S = 15.0
"""How long one event stream lasts; the page reconnects at once. A bound, so that a server
shutting down (which waits for open responses) never waits on an idle inspector."""
KEEPALIVE_S = 5.0

Entry = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Grouping


def group(entries: list[Entry]) -> list[list[Entry]]:
    """The entries as conversations (each oldest first), newest conversation first: the journal's
    one grouping (`grouping.group`), in the order the list shows."""
    return sorted(grouping.group(entries), key=lambda g: g[-1].get("seq", 0), reverse=True)


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _links(entries: list[Entry]) -> list[str]:
    """How the requests of a conversation are tied together, for the list's badges."""
    links: list[str] = []
    if any(program_ids(inputs(e)) | program_ids(outputs(e)) for e in entries):
        links.append("program")
    if any(isinstance(request_of(e).get("previous_response_id"), str) for e in entries):
        links.append("previous_response_id")
    if len(entries) > 1 and any(replayed(e) and request_of(e).get("store") is False for e in entries):
        links.append("store:false replay")
    if any(retries(e) > 0 for e in entries[1:]):
        links.append("retry")
    return links


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in _items(content):
        if isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part.get("refusal"), str):
            parts.append(part["refusal"])
    return " ".join(parts)


def _title(entries: list[Entry]) -> str:
    request = request_of(entries[0])
    value = request.get("input")
    if isinstance(value, str):
        return value
    for item in inputs(entries[0]):
        if item.get("role") == "user" and item.get("type", "message") == "message":
            return _text(item.get("content"))
    return str(entries[0].get("path", ""))


def _final(entries: list[Entry]) -> str | None:
    for entry in reversed(entries):
        for item in reversed(outputs(entry)):
            if item.get("type") == "message":
                return _text(item.get("content"))
    return None


_LINE = re.compile(r"\(line (\d+)\)")


def _failures(entries: list[Entry]) -> list[dict[str, Any]]:
    """The programs that did not complete (they threw, timed out, or ended `incomplete`), oldest
    first: a 200 response that carries a failed `program_output` is still a failed run."""
    found: list[dict[str, Any]] = []
    for entry in entries:
        for item in outputs(entry):
            if item.get("type") != "program_output" or item.get("status", "completed") == "completed":
                continue
            result = item.get("result")
            message = result if isinstance(result, str) else json.dumps(result)
            line = _LINE.search(message.splitlines()[0] if message else "")
            found.append(
                {
                    "call_id": item.get("call_id"),
                    "seq": entry.get("seq"),
                    "status": item.get("status"),
                    "message": message,
                    "line": int(line.group(1)) if line else None,
                }
            )
    return found


def _last_failure(entries: list[Entry]) -> dict[str, Any] | None:
    """The failure of the conversation's last program, if it did not complete: a later program
    (the model trying again) that completed, or still runs, supersedes an earlier one's failure."""
    failures = {(f["seq"], f["call_id"]): f for f in _failures(entries)}
    last: dict[str, Any] | None = None
    for entry in entries:
        for item in outputs(entry):
            if item.get("type") == "program":
                last = None
            elif item.get("type") == "program_output":
                last = failures.get((entry.get("seq"), item.get("call_id")))
    return last


def _refusal(entry: Entry) -> str:
    error = response_of(entry).get("error")
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    head = f"{entry.get('status')}" + (f" {code}" if isinstance(code, str) else "")
    return f"{head}: {message}" if isinstance(message, str) else head


def _error(entries: list[Entry]) -> str | None:
    """What went wrong, for the top of a failed conversation: the last request's refusal, else
    the last program that failed."""
    last = entries[-1]
    if int(last.get("status", 200)) >= 400:
        return f"Request #{last.get('seq')} was refused: {_refusal(last)}"
    failure = _last_failure(entries)
    if failure is not None:
        where = f"(response #{failure['seq']})"
        return f"Program {failure['call_id']} ended {failure['status']} {where}: {failure['message']}"
    status = response_of(last).get("status")
    if status in ("failed", "incomplete"):
        return f"Response #{last.get('seq')} ended {status}."
    return None


def _state(entries: list[Entry]) -> str:
    """`failed` (the last request was refused, or the last program threw or ended `incomplete`),
    `waiting` (the last response asked for tool outputs), `completed`, or the last response's status."""
    last = entries[-1]
    if int(last.get("status", 200)) >= 400 or _last_failure(entries) is not None:
        return "failed"
    output = outputs(last)
    if any(item.get("type") in ("function_call", "custom_tool_call") for item in output):
        return "waiting"
    status = response_of(last).get("status")
    return str(status) if isinstance(status, str) else "completed"


def _errors(entry: Entry) -> bool:
    return (
        int(entry.get("status", 200)) >= 400
        or bool(entry.get("contract"))
        or bool(entry.get("fault"))
        or bool(_failures([entry]))
    )


def _figures(entries: list[Entry]) -> dict[str, Any]:
    """The conversation's figures: per-request figures summed, and calls counted by kind and route."""
    totals: dict[str, Any] = {}
    for entry in entries:
        for key, value in (entry.get("figures") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    calls: dict[str, int] = {}
    for entry in entries:
        for item in outputs(entry):
            kind = item.get("type")
            if not isinstance(kind, str) or not (kind.endswith("_call") or kind == "program"):
                continue
            caller = item.get("caller")
            route = "program" if isinstance(caller, dict) and caller.get("type") == "program" else "direct"
            label = f"{kind} ({route})" if kind != "program" else "program"
            calls[label] = calls.get(label, 0) + 1
    totals["requests"] = len(entries)
    totals["calls"] = calls
    totals["span_ms"] = round((entries[-1].get("at", 0) - entries[0].get("at", 0)) * 1000, 3)
    return totals


def summarise(entries: list[Entry]) -> dict[str, Any]:
    """One row of the list: what a person scans for."""
    first = entries[0]
    return {
        "id": f"c{first.get('seq', 0)}",
        "scope": first.get("scope"),
        "title": _title(entries)[:200],
        "started_at": first.get("at"),
        "updated_at": entries[-1].get("at"),
        "requests": len(entries),
        "seqs": [e.get("seq") for e in entries],
        "scenarios": sorted({e["scenario"] for e in entries if isinstance(e.get("scenario"), str)}),
        "statuses": [e.get("status") for e in entries],
        "state": _state(entries),
        "errors": any(_errors(e) for e in entries),
        "error": _error(entries),
        "links": _links(entries),
        "final": _final(entries),
    }


def conversation(entries: list[Entry]) -> dict[str, Any]:
    """A conversation in full: its summary, figures, programs with their pauses, and the entries.

    A program's pause is a response that carries calls the program issued; the outputs that
    came back are the `function_call_output` items with those call ids in later requests."""
    programs: dict[str, dict[str, Any]] = {}
    calls: dict[str, dict[str, Any]] = {}

    def program(call_id: str, seq: Any) -> dict[str, Any]:
        return programs.setdefault(
            call_id, {"call_id": call_id, "code": None, "seq": seq, "pauses": [], "failure": None}
        )

    for entry in entries:
        seq = entry.get("seq")
        pause: list[dict[str, Any]] = []
        for item in outputs(entry):
            kind = item.get("type")
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not isinstance(kind, str):
                continue
            if kind == "program":
                program(call_id, seq)["code"] = item.get("code")
            elif kind == "program_output":
                program(call_id, seq)["output"] = {**item, "seq": seq}
            elif kind.endswith("_call"):
                caller = item.get("caller") if isinstance(item.get("caller"), dict) else None
                issued: dict[str, Any] = {
                    "seq": seq,
                    "type": kind,
                    "call_id": call_id,
                    "name": item.get("name"),
                    "arguments": item.get("arguments", item.get("input")),
                    "caller": caller,
                    "route": "program" if caller and caller.get("type") == "program" else "direct",
                    "output": None,
                    "violations": [],
                }
                calls[call_id] = issued
                if issued["route"] == "program":
                    pause.append(issued)
        for program_id in dict.fromkeys(str(c["caller"]["caller_id"]) for c in pause):
            mine = [c for c in pause if c["caller"]["caller_id"] == program_id]
            program(program_id, seq)["pauses"].append({"seq": seq, "calls": mine})
        refused = int(entry.get("status", 200)) >= 400
        for item in inputs(entry):
            answered = calls.get(str(item.get("call_id")))
            kind = item.get("type")
            if not (isinstance(kind, str) and kind.endswith("_call_output") and answered):
                continue
            # An output the emulator refused (its request was a 4xx) never reached the program:
            # it is shown as refused until a later request sends one that is taken.
            before = answered["output"]
            if before is None or (before.get("refused") and not refused):
                answered["output"] = {"output": item.get("output"), "seq": seq}
                if refused:
                    answered["output"].update(refused=True, status=entry.get("status"), error=_refusal(entry))
        for violation in _items(entry.get("contract")):
            concerned = calls.get(str(violation.get("call_id")))
            if concerned is not None:
                concerned["violations"].append(violation)
    for failure in _failures(entries):
        if isinstance(failure["call_id"], str):
            program(failure["call_id"], failure["seq"])["failure"] = failure
    figures = _figures(entries)
    # Programs, not program steps: the journal's `programs_run` counts every start and resume.
    figures["programs"] = len(programs)
    return {
        "summary": summarise(entries),
        "figures": figures,
        "programs": list(programs.values()),
        "calls": list(calls.values()),
        "entries": entries,
    }


def _matches(summary: dict[str, Any], entries: list[Entry], query: dict[str, str]) -> bool:
    scenario = query.get("scenario")
    if scenario and scenario not in summary["scenarios"]:
        return False
    status = query.get("status")
    if status:
        codes = [str(s) for s in summary["statuses"]]
        if status in ("2xx", "4xx", "5xx"):
            if not any(code.startswith(status[0]) for code in codes):
                return False
        elif status in ("completed", "waiting", "failed", "incomplete", "in_progress"):
            if summary["state"] != status:
                return False
        elif status not in codes:
            return False
    if query.get("errors") in ("1", "true", "yes") and not summary["errors"]:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Endpoints


@router.get("/inspector/conversations")
async def list_conversations(request: Request) -> dict[str, Any]:
    """Conversations newest first, filtered by `?scope=`, `scenario=`, `status=` (a code, 2xx/4xx/5xx,
    or completed/waiting/failed) and `errors=1`; with the scopes and scenarios seen, for the filters.

    A caller in a scope (the scope header, or a `/scopes/<scope>/` URL: how a test's client is
    scoped) sees that scope alone: its conversations, and its own name, scenarios and latest seq,
    nothing of another scope. A caller in none (the server's owner, who gave the key where the
    server has one; the page is such a caller) sees every scope, `?scope=` a filter of the list."""
    caller = request.headers.get(SCOPE_HEADER)
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, caller)
    collector.hold_for_request()  # (see `trace_page`)
    # A full journal is 64 MiB of bodies: parsed, grouped and summarised in a worker thread, so
    # the event loop answers others meanwhile (on it, health waited 0.4 s for a listing).
    return await asyncio.to_thread(_listing, kept, _scope(request), dict(request.query_params))


def _listing(kept: list[Any], wanted: str | None, query: dict[str, str]) -> dict[str, Any]:
    everything = [e.as_dict() for e in kept]
    rows = []
    for entries in group([e for e in everything if wanted is None or e.get("scope") == wanted]):
        summary = summarise(entries)
        if _matches(summary, entries, query):
            rows.append(summary)
    return {
        "object": "list",
        "data": rows,
        "scopes": sorted({str(e["scope"]) for e in everything if e.get("scope") is not None}),
        "scenarios": sorted({str(e["scenario"]) for e in everything if e.get("scenario") is not None}),
        "latest_seq": max((e.get("seq", 0) for e in everything), default=0),
    }


@router.get("/inspector/conversations/{conversation_id}")
async def read_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
    """One conversation by its id (`c<seq of its first request>`), or by the seq of any of its requests."""
    wanted = conversation_id[1:] if conversation_id.startswith("c") else conversation_id
    if not (wanted.isascii() and wanted.isdigit()) or len(wanted) > 18:  # a seq: `int` takes it, SQLite holds it
        raise messages.inspector_conversation_id_invalid(conversation_id)
    seq = int(wanted)
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, _scope(request))
    collector.hold_for_request()  # (see `trace_page`)

    def find() -> dict[str, Any] | None:  # in a worker thread, as the listing is
        for entries in group([e.as_dict() for e in kept]):
            if any(e.get("seq") == seq for e in entries):
                return conversation(entries)
        return None

    found = await asyncio.to_thread(find)
    if found is None:
        raise messages.inspector_conversation_not_found(conversation_id)
    return found


def _trace_entries(kept: list[Any]) -> list[Entry]:
    """The caller's scope's journal as `GET /_emulator/journal` returns it (what a trace holds)."""
    return grouping.label(e.as_dict() for e in kept)


@router.get("/inspector/trace.json", include_in_schema=False)
async def trace_data(request: Request, test: str = "") -> Response:
    """The caller's scope's trace as the JSON file a failed test leaves (`test`: the test's id, kept
    in it): the same text the pytest plugin writes, for a client that writes its own trace files.
    Made in a worker thread (a full journal is 64 MiB: on the loop, health waited a second)."""
    from ptc_emulator.api.inspector.trace import trace_json

    scope = _scope(request)
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, scope)
    collector.hold_for_request()  # (see `trace_page`)
    text = await asyncio.to_thread(lambda: trace_json(_trace_entries(kept), test=test, scope=scope).encode("utf-8"))
    return Response(text, media_type="application/json", headers={"Cache-Control": "no-store"})


@router.get("/inspector/trace.html", include_in_schema=False)
async def trace_page(request: Request, test: str = "") -> Response:
    """The caller's scope's trace as the self-contained HTML file a failed test leaves (`test`: its
    title), sent with the policy it carries inside (its own inline scripts and style, nothing else).
    Made in a worker thread, as `trace.json` is, and encoded there: the loop only sends the bytes.

    While it is made, full collections are held off (`collector`): a 31 MB page from three
    maximum-size conversations is millions of objects, and a full pass started in the worker walks
    them all holding the interpreter (health waited 0.9-1.4 s in 2 runs of 6)."""
    from ptc_emulator.api.inspector.trace import trace_html, trace_policy

    headers = {
        "Content-Security-Policy": trace_policy() + "; frame-ancestors 'none'",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, _scope(request))
    collector.hold_for_request()
    page = await asyncio.to_thread(lambda: trace_html(_trace_entries(kept), title=test).encode("utf-8"))
    return Response(page, media_type="text/html; charset=utf-8", headers=headers)


async def _changes(request: Request) -> AsyncIterator[bytes]:
    """What changed in the caller's scope's journal (every scope's, for a caller in none)."""
    journal, scope = request.app.state.emulator.journal, request.headers.get(SCOPE_HEADER)

    def mark() -> tuple[int, int]:
        entries = journal.entries(scope)
        return len(entries), max((e.seq for e in entries), default=0)

    seen = await asyncio.to_thread(mark)
    yield _event("hello", {"latest_seq": seen[1]})
    started = quiet = time.monotonic()
    while time.monotonic() - started < STREAM_S:
        await asyncio.sleep(POLL_S)
        now = await asyncio.to_thread(mark)
        if now != seen:
            seen = now
            quiet = time.monotonic()
            yield _event("journal", {"entries": now[0], "latest_seq": now[1]})
        elif time.monotonic() - quiet > KEEPALIVE_S:
            quiet = time.monotonic()
            yield KEEP_ALIVE
    yield _event("reconnect", {})


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


# A stream, not a JSON operation: kept out of the OpenAPI schema (its clients are the page and tests).
@router.get("/inspector/events", include_in_schema=False)
async def journal_events(request: Request) -> EventStreamResponse:
    """Server-sent events: `journal` whenever requests were recorded (or the journal cleared).

    Read by the page with `fetch` (so the API key travels in the Authorization header, as for
    every other call), not `EventSource`, which cannot send headers."""
    return EventStreamResponse(_changes(request))


@root_router.get("/", include_in_schema=False)
async def site_root() -> RedirectResponse:
    return RedirectResponse(UI_PATH, status_code=307)


@router.get("/ui", include_in_schema=False)
async def ui_root() -> RedirectResponse:
    return RedirectResponse(UI_PATH, status_code=308)


@router.get("/ui/", include_in_schema=False)
async def ui_index() -> Response:
    return _static("index.html")


@router.get("/ui/{name}", include_in_schema=False)
async def ui_file(name: str) -> Response:
    if name not in _STATIC:
        raise messages.inspector_file_not_found(name)
    return _static(name)


def _static(name: str) -> Response:
    data = resources.files("ptc_emulator.api").joinpath("static", "inspector", name).read_bytes()
    headers = {"Content-Security-Policy": _CSP, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    return Response(data, media_type=_STATIC[name], headers=headers)
