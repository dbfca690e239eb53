"""The engine's own types (re-exported by `engine.py`): what it prepares, what it records, what
it runs programs with, and the `Model` it asks for each response's turn. (`ResponseStatus` is
with the Response object, in `wire/response.py`.)

A `Prepared` is built whole, once, by `Engine.attempt` and is not reassigned afterwards; what
playing it changes lives in objects made for that (the trace, the conversation's seals, the
toolset that a server-executed search grows, what is made once).

Nothing here names a model's own types: a `Prepared` carries its model's `Plan` opaquely, and the
engine reads of it only the `Delivery` (what happens to the response on its way out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.rules.contract import Violation
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.storage import ResponseStore
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import Item, OutputItem, ProgramCaller
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.sandbox import Outcome, Program

__all__ = ["Delivery", "Live", "Model", "Plan", "Prepared", "Refused", "MadeOnce", "Runner", "Trace"]


class Runner(Protocol):
    """What the engine needs from the sandbox: the `sandbox.Pool` interface. `client` is the
    request's scope ("" without one): waiting programs are served by client (docs/limits.md)."""

    async def run(self, program: Program, client: str = "") -> Outcome: ...


class Live(Protocol):
    """Where a streamed response is told while it plays, by a model that writes its output as it
    arrives (the upstream model): each output item as it is made, in output order, and a message's
    text as it is written. A model that reports nothing here (the scripted model) is told from the
    finished response, as is any response whose output the engine changes after the model played.

    The calls come in this grammar: `item(x)`, or `opened(m)`, `delta(text)`..., `item(m')`, where
    `m` is a message whose one output_text part is still empty and `m'` is the same message (the
    same id) finished; nothing else comes between."""

    def item(self, item: dict[str, Any]) -> None:
        """The next output item, finished, as the response's output will hold it."""

    def opened(self, message: dict[str, Any]) -> None:
        """A message that is the next output item, before its text: its one output_text part's
        `text` is still empty."""

    def delta(self, text: str) -> None:
        """More of the opened message's text."""


@dataclass
class Trace:
    """What the model did for one request, for the journal."""

    scenario: str | None = None
    """What the model plays (the scripted model: the scenario's name); None until it has chosen."""
    route: list[str] = field(default_factory=list)
    """The output item types, in order."""
    model_turns: int = 0
    programs_run: int = 0
    images: list[str] = field(default_factory=list)
    kept_out_bytes: int = 0
    """Bytes of tool output in this request's input that went to a program, not to the model."""
    kept_out_tokens: int = 0
    """The same tool output in tokens."""
    fault: str | None = None
    """The fault injected into this response, if any (the scripted model's `Fault`)."""
    contract: list[Violation] = field(default_factory=list)
    hosted_calls: list[dict[str, Any]] = field(default_factory=list)
    """Calls answered on the server's side (MCP, code interpreter, hosted shell), in order."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(kind, route) of each tool call made in this response; route is `direct` or `program`."""
    upstream_tokens: tuple[int, int] = (0, 0)
    """(input, output) tokens a model upstream counted for this response's turns, summed."""
    stopped: str | None = None
    """Why a model upstream stopped its last turn short (`incomplete_details.reason`): the
    response ends `incomplete` with it, as after a scripted `response_incomplete` fault."""
    held_to_token_limit: bool = False
    """Whether the engine holds what the model wrote to the request's `max_output_tokens`: the
    scripted model writes what its script says whatever the limit, so a response whose output
    counts more tokens ends `incomplete` (`max_output_tokens`), as a hosted one cut there does.
    A model upstream is held to the limit by the upstream itself (`stopped`)."""
    live: Live | None = field(default=None, repr=False, compare=False)
    """Where a streamed response is told while it plays, if it is told live (`Live`); set by the
    stream before the model plays, not journaled."""


@dataclass(frozen=True)
class Delivery:
    """What happens to a response on its way out, apart from what it says: a wait before it is
    played, an `incomplete` status, a stream cut short. The engine and the stream apply it, whatever
    model played (the scripted model makes one from a turn's fault)."""

    latency_ms: int = 0
    response_incomplete: str | None = None
    """The `incomplete_details.reason` the response ends with, if it ends incomplete."""
    cut_stream_after: int | None = None
    """Close a streamed response after this many events, without a terminal event."""


class Plan(Protocol):
    """What a model decided for one response before anything plays (see `Model`). Opaque to the
    engine, which keeps it on `Prepared` and hands it back to the model that made it."""

    @property
    def delivery(self) -> Delivery | None: ...


class Model(Protocol):
    """What plays a response's turn: the engine asks it, given the prepared conversation.

    Two steps, because the engine answers in two: everything that can refuse the request (a 400,
    an injected HTTP error) must happen before the first byte of a streamed reply, and playing
    (running programs, asking a model upstream) happens after it, maybe in the background.

    `plan` decides what this response plays and makes every check that needs that decision. It
    sees only what any model would: the validated request, the conversation as the rules read it,
    the tools it may call, and the scope. It writes what it chose into `trace` (`trace.scenario`
    first, so a refusal after that is journaled with what was known). Its `Plan` is its own type.

    `play` plays the plan and returns the output items. Programs run on the engine's `runner`,
    passed in, not owned: the engine decides where programs run and with which limits, and any
    model (scripted, or one upstream that writes programs) replays them the same way."""

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> Plan: ...

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]: ...

    def plans_at_length(self, scope: str | None) -> bool:
        """Whether choosing what to play may take long whatever the request (a scripted model's
        many scenarios, each matched in turn): the engine then plans in a worker thread."""
        ...

    def match_weight(self, scope: str | None) -> int:
        """The RE2 instructions of the patterns choosing what to play may match a request's texts
        against (a scripted model's scenarios'; 0: none): times the texts' bytes, a bound on what
        matching costs, past which the engine plans in a worker thread."""
        ...


@dataclass
class MadeOnce:
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
    plan: Plan | None = None
    """What the model decided to play (`Model.plan`); None for `generate: false` (WebSocket mode):
    the response has no output."""
    conversation_id: str | None = None
    """The id in the request's `conversation`, read once (the engine, the body and the journal use it)."""
    read_version: int | None = None
    """The version of its conversation's items, as they were read: the response is kept only if
    they are still at it (no concurrent continuation was kept in between)."""
    continues: str | None = None
    """For a request that resumes a program paused in its `previous_response_id` (and is stored):
    the digest of the request. The store keeps one continuation per paused program; the same
    request sent again once that one finished is answered with it (`answered`)."""
    answered: dict[str, Any] | None = None
    """The response this very continuation was answered with already: nothing plays, nothing is
    stored, and it is the answer again."""
    scope: str | None = None
    local: ResponseStore | None = None
    """A connection's own store, where its `store: false` responses stay while it is open."""
    made: MadeOnce = field(default_factory=MadeOnce)
    compacts: bool = False
    """Its context reached the request's `context_management` compaction threshold: its output
    starts with a compaction item that stands for the context (`rules/compaction.py`)."""

    @property
    def store(self) -> bool:
        return self.request.store is not False

    @property
    def background(self) -> bool:
        return bool(self.request.background)

    @property
    def delivery(self) -> Delivery | None:
        """What happens to this response on its way out, if anything (an injected fault's)."""
        return self.plan.delivery if self.plan is not None else None

    @property
    def context(self) -> list[Item]:
        """Every item the model sees for this response: the history, then this request's input
        (after a compaction item, as a hosted model's context holds them: what usage counts)."""
        conv = self.conversation
        return conv.visible if conv.visible is not None else conv.items

    @property
    def new_items(self) -> list[Item]:
        """This request's own input items (as sent, when a compaction item among them was read back)."""
        conv = self.conversation
        return conv.sent if conv.sent is not None else conv.items[conv.new_from :]

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
