"""The request journal: what each client asked and what it got, for tests to assert on.

Kept in memory only (bounded, in the store's journal part), per caller scope, and never written to disk or logs
(but with a store that replicas share, in its database's unlogged tables: see docs/scale-out.md); a
`store: false` request appears here because a test author needs to see it, and leaves with the
process or the next `clear`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from ptc_emulator.emulator import jsonpieces, jsonreply
from ptc_emulator.emulator.storage import JournalLog, MemoryJournal
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.response import redacted

log = logging.getLogger("ptc_emulator.journal")

__all__ = ["Figures", "Journal", "JournalEntry", "RawJSON", "RawRequest", "dump_entry", "kept_request", "load_entry"]


@dataclass
class Figures:
    """Per response, the figures the guide's "Evaluate" section asks for."""

    model_turns: int = 0
    """Scripted turns played in this response (a program resumed to its end counts with its turn)."""
    direct_tool_calls: int = 0
    """Tool calls of every kind the scripted model made directly."""
    program_tool_calls: int = 0
    """Tool calls of every kind programs made (client-answered or settled by the server)."""
    tool_calls: dict[str, dict[str, int]] = field(default_factory=dict)
    """The same calls by kind (`function`, `custom`, `shell`, `apply_patch`, ...) and route:
    `{"custom": {"direct": 0, "program": 2}}`."""
    programs_run: int = 0
    """Programs started or resumed (by replay) while answering this request."""
    retries: int = 0
    """This request's retry count, as the SDK reports it (`x-stainless-retry-count`)."""
    kept_out_bytes: int = 0
    """Bytes of tool output that went to a program in this request instead of the model's context."""
    kept_out_tokens: int = 0
    """The same output in tokens: what the model would have read had it been a direct call's."""
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tool calls in the output by kind (the item type) and route: `{"function_call": {"direct": 1,
    "program": 2}}`."""
    latency_ms: float = 0.0
    """From the request's arrival to its journal entry (for a stream: to its last event)."""
    upstream_input_tokens: int = 0
    """Tokens a model upstream read for this response's turns, as it counted them (docs/any-model.md)."""
    upstream_output_tokens: int = 0


@dataclass
class JournalEntry:
    seq: int
    at: float
    scope: str | None
    method: str
    path: str
    status: int
    request: Any = None
    """The request body as the client set it (fields it left out are not shown)."""
    response: Any = None
    response_id: str | None = None
    scenario: str | None = None
    route: list[str] = field(default_factory=list)
    """What the scripted model did, in order: program, program_output, call, message, refusal, error."""
    figures: Figures = field(default_factory=Figures)
    near_miss: dict[str, Any] | None = None
    contract: list[dict[str, Any]] = field(default_factory=list)
    """Schema violations found in this request (tool outputs, program call arguments)."""
    images: list[str] = field(default_factory=list)
    """URLs a program emitted with image(...): validated, kept here, not sent to the client."""
    fault: str | None = None
    conversation: str | None = None
    """The run this request belongs to: set when the journal is read (`grouping.label`), as its
    conversation id, or the id of the first response of its `previous_response_id` chain or
    replayed item list."""
    hosted_calls: list[dict[str, Any]] = field(default_factory=list)
    """Calls the emulator answered on the server's side (MCP, code interpreter, hosted shell), with
    their route: a program's stay inside the runtime and appear only here."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JournalEntry:
        """An entry as `as_dict` (and `GET /_emulator/journal`) gave it: the typed view a test reads."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        figures = Figures.__dataclass_fields__
        values["figures"] = Figures(**{k: v for k, v in (data.get("figures") or {}).items() if k in figures})
        return cls(**values)

    @property
    def error(self) -> dict[str, Any] | None:
        """The error body's `error` (`message`, `type`, `param`, `code`), or None for a 200."""
        if isinstance(self.response, dict) and isinstance(self.response.get("error"), dict):
            return dict(self.response["error"])
        return None

    def as_dict(self) -> dict[str, Any]:
        if isinstance(self.request, RawRequest):
            self.request = self.request.validated()  # once: later reads parse its JSON text
        data = asdict(self)
        # The request is kept as it was validated and dumped only when the journal is read.
        if isinstance(self.request, BaseModel):
            data["request"] = self.request.model_dump(mode="json", by_alias=True, exclude_unset=True)
        # Recorded entries keep their bodies as compact JSON text, parsed only when read; a long one
        # a piece at a time (`jsonpieces`): the inspector reads every entry in a worker thread, and
        # one `json.loads` of a 16 MiB body held the interpreter, the event loop's thread included,
        # for the whole body.
        for name in ("request", "response"):
            value = getattr(self, name)
            if isinstance(value, RawJSON):
                long = len(value) >= jsonpieces.LONG_TEXT
                data[name] = jsonpieces.loads(jsonpieces.decode(value)) if long else json.loads(value)
        return data


class RawJSON(bytes):
    """A body kept as its JSON text: a few bytes per character instead of an object graph."""


class RawRequest(RawJSON):
    """A create request's body as the client sent it (bytes), kept instead of its validated model:
    no object graph while it waits in the journal, and no dump on the request's path. It is
    validated again, and dumped as the request model (fields the client set, by alias), only when
    the journal is read; the body already passed that validation when it was served."""

    def validated(self) -> RawJSON:
        request = CreateRequest.model_validate(json.loads(self))
        return RawJSON(request.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))


def kept_request(request: CreateRequest, raw: bytes | None) -> Any:
    """What the journal keeps of a create request: the bytes it was validated from (`raw`, when
    given), or the request itself; but never an `mcp` tool's credentials: a request that carries
    any is kept as its dump with each tool `redacted` (as the Response echoes it)."""
    if not any(getattr(tool, "type", None) == "mcp" and _credentialed(tool) for tool in request.tools or ()):
        return RawRequest(raw) if raw is not None else request
    data = request.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["tools"] = [redacted(tool) for tool in data["tools"]]
    return data


def _credentialed(tool: Any) -> bool:
    return getattr(tool, "authorization", None) is not None or getattr(tool, "headers", None) is not None


def _compact(value: Any) -> Any:
    if value is None or isinstance(value, RawJSON):
        return value
    if isinstance(value, BaseModel):
        return RawJSON(value.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))
    if jsonreply.long(value):  # (json.dumps's text, made a piece at a time: a 7 MB reply is one long call)
        return RawJSON("".join(jsonreply.texts(value)).encode("utf-8"))
    return RawJSON(json.dumps(value, separators=(",", ":")).encode("utf-8"))


_ENTRY_OVERHEAD = 1024
"""What an entry costs besides its bodies (the record, its figures and lists), roughly."""


class Journal:
    """Bounded by entries and by bytes: the oldest entries leave first. The entries are kept in
    the store's journal part (`storage.JournalLog`); this adds their compaction."""

    def __init__(self, limit: int = 10_000, max_bytes: int = 64 * 2**20, *, log: JournalLog | None = None) -> None:
        self.log: JournalLog = log if log is not None else MemoryJournal(limit, max_bytes)
        self.shared = hasattr(self.log, "codec")
        """Whether the log is kept outside the process (a shared database): its entries are text,
        numbered as they are written, and written off the event loop (`record_off_loop`)."""
        if hasattr(self.log, "codec"):
            self.log.codec = (dump_entry, load_entry)
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._writer_lock = threading.Lock()

    @property
    def limit(self) -> int:
        return self.log.limit

    @property
    def max_bytes(self) -> int:
        return self.log.max_bytes

    @property
    def bytes(self) -> int:
        return self.log.bytes

    def next_seq(self) -> int:
        """The next entry's number; 0 for a shared log, which numbers an entry as it writes it (a
        round trip to the database for the number, made on the event loop as a request began,
        held the loop, and every client with it, while the database was slow)."""
        return 0 if self.shared else self.log.next_seq()

    def record(self, entry: JournalEntry) -> None:
        entry.request = _compact(entry.request)
        entry.response = _compact(entry.response)
        size = _ENTRY_OVERHEAD + len(entry.request or b"") + len(entry.response or b"")
        self.log.append(entry.scope, entry, size)

    def record_off_loop(self, entry: JournalEntry) -> concurrent.futures.Future[None] | None:
        """`record(entry)`: at once for a log in this process, or on the event loop's thread for a
        shared log, in the journal's writer thread (one, so entries are written in the order
        recorded): the future of the write. A shared log's write that fails is logged, never
        raised (`_missed`). The write waits on the database; on the loop it held
        every client of the server while the database was slow."""
        if not self.shared:
            self.record(entry)
            return None
        if not _on_loop():  # (a worker thread's: a shared log's failure is logged, never raised)
            try:
                self.record(entry)
            except Exception as error:
                _missed(error)
            return None
        with self._writer_lock:
            if self._writer is None:
                self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ptc-emulator-journal")
            written = self._writer.submit(self.record, entry)
        written.add_done_callback(_reported)
        return written

    def _written(self) -> None:
        """Wait for the writes this process has handed to the writer thread: a read of the journal
        here sees every request this server has answered."""
        writer = self._writer
        if writer is not None:
            writer.submit(lambda: None).result()

    def entries(self, scope: str | None = None) -> list[JournalEntry]:
        self._written()
        return self.log.entries(scope)

    def clear(self, scope: str | None = None) -> int:
        self._written()
        return self.log.clear(scope)


def _reported(written: concurrent.futures.Future[None]) -> None:
    error = None if written.cancelled() else written.exception()
    if error is not None:
        _missed(error)


def _missed(error: BaseException) -> None:
    """A shared log's write that failed (its table locked past the server's limit, the database
    away): the entry is not kept, and logged so. The request it records was answered as it went:
    its work is committed before its entry is written, so failing the request for its entry would
    answer "not done" over work that was done."""
    log.warning("a journal entry was not kept: %s", error)


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def dump_entry(entry: JournalEntry) -> str:
    """An entry as JSON text, for a journal kept outside the process: its bodies as the text they
    are kept as (a raw request is validated only when read, as in memory)."""
    data: dict[str, Any] = {f.name: getattr(entry, f.name) for f in fields(entry)}
    data["figures"] = asdict(entry.figures)
    for name in ("request", "response"):
        value = data[name]
        if isinstance(value, RawRequest):
            data[name] = {"raw_request": value.decode("utf-8")}
        elif isinstance(value, RawJSON):
            data[name] = {"raw": value.decode("utf-8")}
        else:
            if isinstance(value, BaseModel):
                value = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
            data[name] = {"value": value}
    return json.dumps(data, separators=(",", ":"))


def load_entry(text: str) -> JournalEntry:
    data = json.loads(text)
    data["figures"] = Figures(**data["figures"])
    for name in ("request", "response"):
        kept = data[name]
        if "raw_request" in kept:
            data[name] = RawRequest(kept["raw_request"].encode("utf-8"))
        elif "raw" in kept:
            data[name] = RawJSON(kept["raw"].encode("utf-8"))
        else:
            data[name] = kept["value"]
    return JournalEntry(**data)
