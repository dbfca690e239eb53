"""The engine's own types (re-exported by `engine.py`): what it prepares, what it records, and
what it runs programs with. (`ResponseStatus` is with the Response object, in `response.py`.)

A `Prepared` is built whole, once, by `Engine.prepare` and is not reassigned afterwards; what
playing it changes lives in objects made for that (the trace, the conversation's seals, the
toolset that a server-executed search grows, the memo of what was made once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.rules.contract import Violation
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.storage.responses import Store
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import Item, OutputItem, ProgramCaller
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.sandbox import Outcome, Program

if TYPE_CHECKING:  # the scripted model's own parts of a prepared response
    from ptc_emulator.emulator.model.scripted.hosted import Hosted
    from ptc_emulator.emulator.model.scripted.scenario import Fault
    from ptc_emulator.emulator.model.scripted.script import Script

__all__ = ["Prepared", "Refused", "ResponseMemo", "Runner", "Trace"]


class Runner(Protocol):
    """What the engine needs from the sandbox: the `sandbox.Pool` interface."""

    async def run(self, program: Program) -> Outcome: ...


@dataclass
class Trace:
    """What the scripted model did for one request, for the journal."""

    scenario: str
    route: list[str] = field(default_factory=list)
    """The output item types, in order."""
    model_turns: int = 0
    programs_run: int = 0
    images: list[str] = field(default_factory=list)
    kept_out_bytes: int = 0
    """Bytes of tool output in this request's input that went to a program, not to the model."""
    fault: str | None = None
    """The fault injected into this response, if any (see `model.scenario.Fault`)."""
    contract: list[Violation] = field(default_factory=list)
    hosted_calls: list[dict[str, Any]] = field(default_factory=list)
    """Calls answered on the server's side (MCP, code interpreter, hosted shell), in order."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(kind, route) of each tool call made in this response; route is `direct` or `program`."""


@dataclass
class ResponseMemo:
    """What is made once per response, the first time it is needed, so that a background response's
    queued and finished forms agree."""

    input_items: list[dict[str, Any]] | None = None
    """This request's input items as stored, with ids."""
    cached_tokens: int | None = None
    """The prompt-cache tokens of this response's usage."""


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """A validated create request, ready to play; nothing has run yet."""

    request: CreateRequest
    response_id: str
    created_at: float
    conversation: Conversation
    toolset: Toolset
    """What the model may call as this response starts; a server-executed search adds to it."""
    trace: Trace
    script: Script | None = None
    """None for `generate: false` (WebSocket mode): the response has no output."""
    hosted: Hosted | None = None
    """The server-side tools of this response (None when nothing plays)."""
    turn: int = 0
    """The next turn of the script to play (after resuming the open program, if any)."""
    emitted: int = 0
    """Direct calls of that turn already emitted (it is a `call` turn played one call at a time)."""
    scope: str | None = None
    fault: Fault | None = None
    """The fault of the turn this response starts (not of a program it resumes)."""
    strict_contract: bool = False
    local: Store | None = None
    """A connection's own store, where its `store: false` responses stay while it is open."""
    memo: ResponseMemo = field(default_factory=ResponseMemo)

    @property
    def store(self) -> bool:
        return self.request.store is not False

    @property
    def background(self) -> bool:
        return bool(self.request.background)

    @property
    def context(self) -> list[Item]:
        """Every item the model sees for this response: the history, then this request's input."""
        return self.conversation.items

    @property
    def new_items(self) -> list[Item]:
        """This request's own input items."""
        return self.conversation.items[self.conversation.new_from :]

    def outputs_kept_out(self) -> list[OutputItem]:
        """This request's tool outputs that went to a program rather than to the model."""
        return [
            item
            for item in self.conversation.latest_outputs()
            if isinstance(getattr(item, "caller", None), ProgramCaller)
        ]


@dataclass(frozen=True)
class Refused:
    """A create the engine refuses, with what it knew when it did (for the journal)."""

    error: EmulatorError
    trace: Trace | None
