"""Journals each create request, whatever way it ends (JSON, stream, socket, error),
and logs one line per HTTP request (`RequestLog`, below)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from types import TracebackType
from typing import Any

from ptc_emulator.api import scopes
from ptc_emulator.emulator.errors import EmulatorError, NoScenarioMatched
from ptc_emulator.emulator.journal.entries import Figures, Journal, JournalEntry, RawJSON, kept_request
from ptc_emulator.emulator.responses.engine import Prepared, Refused, Trace
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.names import SCOPE_HEADER

__all__ = ["JsonFormatter", "Journaling", "RequestLog", "line", "note"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _retries(headers: Any) -> int:
    value = headers.get("x-stainless-retry-count") if headers is not None else None
    # Only a small decimal count: `str.isdigit` also takes other scripts' digits, and `int` of a
    # long enough string raises.
    text = str(value) if value is not None else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0


class Journaling:
    """`with Journaling(...) as journaling:` around a create; `journaling.admit(engine.attempt(...))`,
    then set `journaling.response`.

    A request the engine refuses (an injected HTTP error, a strict contract check, no matching
    scenario) has no `Prepared`; what the engine knew then comes with the refusal, as its `trace`."""

    def __init__(
        self,
        journal: Journal,
        *,
        method: str,
        path: str,
        headers: Any,
        body: Any,
        scope: str | None,
        raw: bytes | None = None,
    ) -> None:
        """`raw`: the bytes `body` was validated from, which the journal keeps in its place."""
        self.journal = journal
        self.raw = raw
        self.entry = JournalEntry(
            seq=journal.next_seq(),
            at=time.time(),
            scope=scope,
            method=method,
            path=path,
            status=200,
            request=body,
            figures=Figures(retries=_retries(headers)),
        )
        self.prepared: Prepared | None = None
        self._trace: Trace | None = None
        self.response: dict[str, Any] | None = None
        self.rendered: bytes | None = None
        """`response` as the client was sent it (compact JSON), when it was sent whole."""
        self._done = False
        self.written: concurrent.futures.Future[None] | None = None
        """The entry's write under way in the journal's writer thread, if it went there."""

    def __enter__(self) -> Journaling:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(error, EmulatorError):
            self.fail(error)
        elif error is None and self.response is not None:
            self.finish(self.response)

    def admit(self, attempt: Prepared | Refused) -> Prepared:
        """The prepared create, or the refusal recorded and its error raised."""
        if isinstance(attempt, Refused):
            self.refuse(attempt)
            raise attempt.error
        self.prepared = attempt
        return attempt

    def refuse(self, refused: Refused) -> None:
        self._trace = refused.trace
        self.fail(refused.error)

    def fail(self, error: EmulatorError, status: int | None = None) -> None:
        self.entry.status = status or error.status
        self.entry.response = error.body()
        if isinstance(error, NoScenarioMatched):
            self.entry.near_miss = error.report
        self._write()

    def finish(self, response: dict[str, Any]) -> None:
        if self._done:  # (journaled already: a long reply's entry is made in a worker thread)
            return
        self.entry.response = response
        self.entry.response_id = response.get("id")
        figures = self.entry.figures
        for item in response.get("output", []):
            kind = item.get("type", "")
            if kind.endswith("_call"):
                caller = item.get("caller") or {}
                route = "program" if caller.get("type") == "program" else "direct"
                counts = figures.calls.setdefault(kind, {"direct": 0, "program": 0})
                counts[route] += 1  # the totals by route come from the trace (see _write)
        counted = response.get("usage") or {}
        figures.input_tokens = counted.get("input_tokens", 0)
        figures.cached_tokens = (counted.get("input_tokens_details") or {}).get("cached_tokens", 0)
        figures.output_tokens = counted.get("output_tokens", 0)
        figures.total_tokens = counted.get("total_tokens", 0)
        self._write()

    def _write(self) -> None:
        if self._done:
            return
        self._done = True
        trace = self.prepared.trace if self.prepared is not None else self._trace
        if trace is not None:
            self.entry.scenario = trace.scenario
            self.entry.route = list(trace.route)
            self.entry.images = list(trace.images)
            self.entry.fault = trace.fault
            self.entry.contract = [v.as_dict() for v in trace.contract]
            figures = self.entry.figures
            figures.model_turns = trace.model_turns
            figures.programs_run = trace.programs_run
            figures.kept_out_bytes = trace.kept_out_bytes
            figures.kept_out_tokens = trace.kept_out_tokens
            figures.upstream_input_tokens, figures.upstream_output_tokens = trace.upstream_tokens
            self.entry.hosted_calls = list(trace.hosted_calls)
            calls = [*trace.calls, *((c["kind"], c["route"]) for c in trace.hosted_calls if _counts(c))]
            for kind, route in calls:
                by_route = figures.tool_calls.setdefault(kind, {"direct": 0, "program": 0})
                by_route[route] = by_route.get(route, 0) + 1
                if route == "program":
                    figures.program_tool_calls += 1
                else:
                    figures.direct_tool_calls += 1
        self.entry.figures.latency_ms = round((time.time() - self.entry.at) * 1000, 3)
        note(scenario=self.entry.scenario, route=self.entry.route, unmatched=self.entry.near_miss is not None)
        if isinstance(self.entry.request, CreateRequest):  # (an mcp tool's credentials are not kept)
            self.entry.request = kept_request(self.entry.request, self.raw)
        if self.rendered is not None and self.entry.response is self.response and _as_kept(self.rendered):
            self.entry.response = RawJSON(self.rendered)  # the text the journal would have made
        self.written = self.journal.record_off_loop(self.entry)

    async def stored(self) -> None:
        """Wait for the entry's write, when it was handed to the journal's writer thread (a shared
        journal, recorded on the event loop): the reply goes once its entry is in the journal, or
        once its write failed (logged as not kept, `entries._reported`). A failed write never
        changes the reply: the entry records a request already answered, whose work (a stored
        response, a conversation's items) is committed before it; a 503 for the journal said
        "nothing was done" over a turn that was kept, and the SDK's retry stored it twice."""
        if self.written is not None:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(self.written)


def _as_kept(rendered: bytes) -> bool:
    """Whether the reply's bytes are exactly the journal's own compact JSON of it: they differ only
    where the reply leaves characters outside printable ASCII unescaped (the journal escapes
    them), so bytes within ` `..`~` and the escapes they share are the same text."""
    return rendered.isascii() and b"\x7f" not in rendered


def _counts(call: dict[str, Any]) -> bool:
    """A program's call the server answered (a denied one never ran; direct ones are items, counted
    with the output)."""
    return call["route"] == "program" and call.get("status") != "denied"


# ---- the request log -----------------------------------------------------------------------------
# One log line per HTTP request, for a person or (`--log-format json`) for CI.
#
#     POST /v1/responses scope=test-1a2b scenario=shortage route=program,function_call -> 200 (12.4 ms)
#     POST /v1/responses scope=- no match -> 400 no_scenario_matched: No scenario matches ... (3.1 ms)
#
# The middleware sits outside everything else, so a request the edge refuses (a bad key, a foreign
# Host) has its line too. What only the engine knows (the scenario, the route) reaches the line
# through `note`, called where the journal entry is recorded; the error code and reason are read
# from the error body the client got. Logged on `ptc_emulator.requests` at INFO.

log = logging.getLogger("ptc_emulator.requests")


_NOTES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("ptc_emulator_notes", default=None)
_ERROR_BODY_BYTES = 64 * 1024
_REASON_CHARS = 300
_HEADER = SCOPE_HEADER.encode("latin-1")


def note(**fields: Any) -> None:
    """Add fields to the current request's log line (a no-op outside a logged request)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.update(fields)


def _scope_name(scope: Scope) -> str | None:
    path: str = scope.get("path", "")
    if path.startswith(scopes.PREFIX):
        return path[len(scopes.PREFIX) :].partition("/")[0] or None
    for key, value in scope.get("headers", []):
        if key.lower() == _HEADER:
            return str(value.decode("latin-1"))
    return None


def _error(body: bytes) -> tuple[str | None, str | None]:
    try:
        error = json.loads(body)["error"]
        return error.get("code") or error.get("type"), error.get("message")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None


def line(fields: dict[str, Any]) -> str:
    """The text form of a request's fields."""
    parts = [f"{fields['method']} {fields['path']}", f"scope={fields['scope'] or '-'}"]
    if fields.get("scenario"):
        parts.append(f"scenario={fields['scenario']}")
    elif fields.get("unmatched"):
        parts.append("no match")
    if fields.get("route"):
        parts.append("route=" + ",".join(fields["route"]))
    outcome = f"-> {fields['status']}"
    if fields.get("code") or fields.get("reason"):
        outcome += f" {fields.get('code') or 'error'}: {fields.get('reason') or ''}".rstrip()
    parts.append(outcome)
    parts.append(f"({fields['ms']} ms)")
    return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """Every record as one JSON object: `level`, `logger`, and a request's fields or `message`."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "request", None)
        data: dict[str, Any] = {"level": record.levelname.lower(), "logger": record.name}
        data.update(fields if isinstance(fields, dict) else {"message": record.getMessage()})
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


class RequestLog:
    """Logs each HTTP request when its response has been sent (a stream: at its end)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method, path, who = scope.get("method", ""), scope.get("path", ""), _scope_name(scope)
        notes: dict[str, Any] = {}
        token = _NOTES.set(notes)
        status = 500
        body = bytearray()
        logged = False

        def emit() -> None:
            nonlocal logged
            logged = True
            code, reason = _error(bytes(body)) if body else (None, None)
            fields = {
                "method": method,
                "path": path,
                "scope": who,
                "scenario": notes.get("scenario"),
                "unmatched": bool(notes.get("unmatched")),
                "route": list(notes.get("route") or []),
                "status": status,
                "code": code,
                "reason": reason[:_REASON_CHARS] if isinstance(reason, str) else None,
                "ms": round((time.perf_counter() - started) * 1000, 1),
            }
            log.info("%s", line(fields), extra={"request": fields})

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                if status >= 400 and len(body) < _ERROR_BODY_BYTES:
                    body.extend(message.get("body", b"")[: _ERROR_BODY_BYTES - len(body)])
                if not message.get("more_body", False) and not logged:
                    emit()  # before the last bytes go: a client that has its answer can read the line
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            _NOTES.reset(token)
            if not logged:
                emit()
