"""The response engine: a request and the items so far go in; a Response comes out.

A facade over the parts that decide: `rules/` (the conversation and its 400s), `model/` (the
`Model` that plays: the scripted one unless another is given), `storage/`, `conversations/`,
`usage.py`. `attempt()` does everything that can fail with a 400 before the first byte of a
streamed reply (the model's `plan` among it); `complete()` has the model play its plan and builds
and stores the Response. Program faults become `program_output.status = "incomplete"`, not
exceptions.

Nothing here knows HTTP; nothing here touches V8 except through the `Runner` protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import Cache
from ptc_emulator.emulator.conversations.service import Conversations
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.history.cursor import Extension
from ptc_emulator.emulator.history.stored import History, Room, as_input, as_response_item, not_found
from ptc_emulator.emulator.ids import new_id
from ptc_emulator.emulator.model import (
    Model,
    Plan,
    Prepared,
    Refused,
    Runner,
    Runtime,
    ScenarioRegistry,
    ScriptedModel,
    Trace,
)
from ptc_emulator.emulator.patterns import MATCH_BUDGET
from ptc_emulator.emulator.release import release
from ptc_emulator.emulator.responses.background import Background, interrupted
from ptc_emulator.emulator.responses.body import response_body
from ptc_emulator.emulator.responses.usage import (
    LONG_TEXT,
    PromptCache,
    count,
    count_long_texts,
    counts_much,
    definitions_text,
    model_read,
    output_tokens,
    prompt_segments,
    usage,
)
from ptc_emulator.emulator.rules import checks, contract
from ptc_emulator.emulator.rules.compaction import Compactor, Expanded, compact_threshold, triggered
from ptc_emulator.emulator.rules.configuration import in_effect
from ptc_emulator.emulator.rules.conversation import Conversation, analyse, check_message_parts, sealed_reasoning_id
from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.storage import ResponseStore, StoredResponse, StoreUnavailable, Turn, TurnRefused
from ptc_emulator.emulator.tools.kinds import answer_text
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import Item, Message, ReasoningItem
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus, echo_tools
from ptc_emulator.sandbox import Limits

__all__ = ["OFF_LOOP_ITEMS", "Engine", "Prepared", "Refused", "ResponseStatus", "Runner", "Trace", "new_id"]


def _resumes(conv: Conversation) -> bool:
    """Whether the request resumes a program that paused in its history."""
    return conv.open_program is not None and conv.open_index < conv.new_from


_HISTORY_PARAM = "previous_response_id"
"""What the rules name an item of the stored history by (`rules.conversation`, `tools.toolset`, ...)."""


def _named_by_conversation(error: EmulatorError, request: CreateRequest) -> None:
    """Name a refused item of a conversation's history by `conversation`: the rules name a history
    item by `previous_response_id`, which a request continuing a conversation cannot have sent
    (the two are refused together)."""
    param = error.param
    if request.conversation is None or param is None or not param.startswith(_HISTORY_PARAM):
        return
    if param[len(_HISTORY_PARAM) : len(_HISTORY_PARAM) + 1] in ("", ".", "["):
        error.param = "conversation" + param[len(_HISTORY_PARAM) :]


def _with(expanded: Expanded | None, conv: Conversation) -> Conversation:
    """`conv`, told what a compaction item read back in it changed (`Expanded`)."""
    if expanded is not None:
        conv.visible, conv.sent = expanded.visible, expanded.sent
    return conv


log = logging.getLogger(__name__)

T = TypeVar("T")

UNFINISHED = (ResponseStatus.QUEUED, ResponseStatus.IN_PROGRESS)

OFF_LOOP_ITEMS = 1000
"""A create whose input has more items than this is read into its conversation in a worker
thread (`attempt_off_loop`), and a response whose conversation and output together have more is
finished (usage, body, storing) in one (`complete`); shorter ones cost less than the hop."""


_LEFT_OUT_MEANS: dict[str, Any] = {
    "background": False,
    "store": True,
    "metadata": {},
    "temperature": 1.0,
    "top_p": 1.0,
    "parallel_tool_calls": True,
    "truncation": "disabled",
}
"""What a request that leaves each of these out is answered as (`body.response_body` echoes the
same either way): a request spelling it out is the same request as one leaving it out."""


def _digest(request: CreateRequest) -> str:
    """What names a request as the same one sent again: its body as validated, but for how its
    answer travels (a stream, a socket's lane), and with the values of `_LEFT_OUT_MEANS` spelt
    out taken as left out (a client resending a continuation with its defaults written in)."""
    spelt = {name: None for name, meant in _LEFT_OUT_MEANS.items() if getattr(request, name) == meant}
    if spelt:
        request = request.model_copy(update=spelt)
    body = request.model_dump_json(exclude={"stream", "stream_options", "stream_id"})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class Engine:
    def __init__(
        self,
        *,
        runner: Runner,
        store: ResponseStore,
        signer: Signer,
        scenarios: ScenarioRegistry | None = None,
        model: Model | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        ids: Callable[[str], str] = new_id,
        seeds: Callable[[], int] = lambda: secrets.randbits(128),
        strict_contract: bool = False,
    ) -> None:
        """`model` plays each response; without one, the scripted model plays `scenarios` (and
        `strict_contract` is its default for the contract checks of a client's tool outputs)."""
        self.runner = runner
        self.store = store
        self.signer = signer
        self.limits = limits or Limits()
        self.clock = clock
        self.ids = ids
        self.history = History(store)
        if model is None:
            runtime = Runtime(signer=signer, limits=self.limits, ids=ids, seeds=seeds, clock=clock)
            model = ScriptedModel(
                scenarios if scenarios is not None else ScenarioRegistry(),
                runtime,
                strict_contract=strict_contract,
            )
        self.model: Model = model
        self.background = Background()
        self.conversations = Conversations(
            store.conversations,
            ids=ids,
            clock=clock,
            as_item=self._as_stored,
            resolve=self.history.reference,
            as_input=as_input,
        )
        self.prompt_cache = PromptCache()
        self.compactor = Compactor(signer, ids)

    def caches(self) -> dict[str, Cache]:
        """The caches the engine owns, by name (for the app's registry, which reset clears)."""
        return {**self.history.caches(), "prompt cache": self.prompt_cache, "compaction windows": self.compactor}

    # ---- create -------------------------------------------------------------------------------

    @staticmethod
    async def read_ahead(request: CreateRequest, size: int | None = None) -> None:
        """Count the request's long texts (a large tool output, a long message) in a worker thread,
        before `attempt`: the counts `attempt` and `response` make on the event loop are then cache
        hits, and no other client waits on the tokenizer (docs/usage.md). A body of `size` bytes
        shorter than a long text holds none: no thread hop then."""
        if size is not None and size < LONG_TEXT:
            return
        await asyncio.to_thread(count_long_texts, (request.instructions, request.input))

    async def attempt_off_loop(
        self,
        request: CreateRequest,
        *,
        scope: str | None = None,
        generate: bool = True,
        local: ResponseStore | None = None,
        cursor: Extension | None = None,
        size: int | None = None,
    ) -> Prepared | Refused:
        """`attempt`, off the event loop when the request may read a long conversation (`off_loop`),
        or when matching it against the scenarios' patterns may cost more than a match on the
        event loop may (`patterns.MATCH_BUDGET`): their instructions (`Model.match_weight`) times
        the bytes of the request's texts, at most its body's `size` when it is known. Matching 150
        messages of 14,000 characters against one history pattern held the loop 3.7 s."""
        work = lambda: self.attempt(request, scope=scope, generate=generate, local=local, cursor=cursor)  # noqa: E731
        if generate and (self.model.plans_at_length(scope) or self._matching_heavy(request, scope, size)):
            return await asyncio.to_thread(work)
        return await self.off_loop(request, work)

    def _matching_heavy(self, request: CreateRequest, scope: str | None, size: int | None) -> bool:
        weight = self.model.match_weight(scope)
        if not weight:
            return False
        return weight * (size if size is not None else _text_bytes(request)) > MATCH_BUDGET

    @staticmethod
    async def off_loop(request: CreateRequest | CountTokensRequest | CompactRequest, work: Callable[[], T]) -> T:
        """`work()` (reading the request into its conversation), in a worker thread when the request
        may read a long one: an input of more than `OFF_LOOP_ITEMS` items, or stored history (a
        `previous_response_id` or a `conversation`, whose length is known only once read), or a
        tool output its tool's `output_schema` checks value by value, or tool schemas of more than
        `contract.OFF_LOOP_SCHEMA_VALUES` values (checked against the meta-schema; a pattern counts as
        `contract.PATTERN_VALUES`), or a custom tool's grammar (RE2's compile of a regex one; a lark
        one compiled, up to `contract.LARK_COMPILE_BUDGET` Python calls). Reading 200,000 short items
        takes seconds, which no other client then waits on; a short request with no history costs
        less than the hop."""
        given = request.input
        long_input = isinstance(given, list) and len(given) > OFF_LOOP_ITEMS
        history = request.previous_response_id is not None or getattr(request, "conversation", None) is not None
        instructions = getattr(request, "instructions", None)
        long_text = isinstance(instructions, str) and len(instructions) >= contract.OFF_LOOP_CHARS
        large = contract.holds_large_schemas(request) or contract.holds_lark_grammars(request)
        if long_input or history or long_text or _holds_long_text(given) or large or _counts_much(request):
            return await asyncio.to_thread(work)
        return work()

    def prepare(
        self,
        request: CreateRequest,
        *,
        scope: str | None = None,
        generate: bool = True,
        local: ResponseStore | None = None,
        cursor: Extension | None = None,
    ) -> Prepared:
        """`attempt()` for callers that keep no journal: the request's 400 is raised."""
        attempt = self.attempt(request, scope=scope, generate=generate, local=local, cursor=cursor)
        if isinstance(attempt, Refused):
            raise attempt.error
        return attempt

    def attempt(
        self,
        request: CreateRequest,
        *,
        scope: str | None = None,
        generate: bool = True,
        local: ResponseStore | None = None,
        cursor: Extension | None = None,
    ) -> Prepared | Refused:
        """Validate a create and decide what plays, or refuse it (with the request's 400 or an injected
        error) and say what was known by then.

        With `generate=False` nothing will play: the response only records its input, so its id
        can be continued. `local` is a connection's own store, looked up before the server's.
        `cursor`: what the body reader recognised of the request's input (`read_create`); a
        request that continues stored history gets the history's own."""
        trace = Trace()
        try:
            thread = checks.check_request(request)
            previous = request.previous_response_id
            room = Room.of(request)  # counted before any history is read (`MAX_CONTEXT_ITEMS`)
            if previous is not None:
                history, cursor = self.history.continuing(previous, local, scope, room)
            else:
                history = []
            version = None
            if thread is not None:
                version, history = self.conversations.versioned_history(
                    thread, scope, room=room.items, truncate=room.truncate
                )
            new_items = self.history.input(request, scope)
            if not history and not any(isinstance(i, Message) and i.role == "user" for i in new_items):
                history = self.history.recovered(new_items, scope, room)
            trigger = triggered(new_items)
            items = [*history, *new_items[: -1 if trigger else None]]
            threshold = compact_threshold(request.context_management)
            expanded = self.compactor.expand(items, len(history))
            if not generate:  # nothing reads the items now, but what is kept is held to the same rules
                for index, item in enumerate(new_items):
                    if isinstance(item, ReasoningItem):
                        sealed_reasoning_id(item, self.signer, f"input[{index}]")
                read_back = (expanded.items, expanded.new_from) if expanded is not None else (items, len(history))
                conv = _with(expanded, Conversation(*read_back, anchor=-1))
                toolset = Toolset.of(request, conv.items)
                return self._prepared(
                    request, conv, toolset, Trace("generate=false"), scope=scope, local=local, read=(thread, version)
                )
            if expanded is None:
                conv = analyse(items, len(history), self.signer, cursor)
            else:
                conv = analyse(expanded.items, expanded.new_from, self.signer, cursor, expanded.shift)
                _with(expanded, conv)
            if trigger:  # the response is the context's compaction item, and nothing plays
                # (the trigger is not stored: `ResponseItem`, what input_items lists, has no such type)
                toolset = Toolset.of(request, conv.items, conv.new_from)
                trace = Trace("compaction_trigger")
                return self._prepared(
                    request, conv, toolset, trace, scope=scope, local=local, read=(thread, version), compacts=True
                )
            continues = None
            if previous and _resumes(conv):  # the paused program's one continuation, or this one again
                continues, answered = self._continuation(request, previous, local)
                if answered is not None:
                    return self._answered(request, conv, answered, scope=scope, local=local, continues=continues)
            toolset = Toolset.of(request, conv.items, conv.new_from)
            plan = self.model.plan(request, conv, toolset, trace, scope=scope)
            compacts = threshold is not None and self._context_tokens(request, conv) >= threshold
            return self._prepared(
                request,
                conv,
                toolset,
                trace,
                scope=scope,
                local=local,
                plan=plan,
                read=(thread, version),
                compacts=compacts,
                continues=continues,
            )
        except EmulatorError as e:
            _named_by_conversation(e, request)
            # What the model knew when it refused, once it had chosen what plays (the journal's).
            return Refused(e, trace if trace.scenario is not None else None)

    def _prepared(
        self,
        request: CreateRequest,
        conv: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
        local: ResponseStore | None,
        read: tuple[str | None, int | None],
        plan: Plan | None = None,
        compacts: bool = False,
        continues: str | None = None,
    ) -> Prepared:
        """The prepared response, with the figures the journal takes from it; `read` is the
        request's conversation, and the version of its items (`Prepared.read_version`)."""
        seen = conv.visible if conv.visible is not None else conv.items
        prepared = Prepared(
            request=in_effect(request, seen),  # with the configuration the conversation's updates set
            response_id=self.ids("resp"),
            created_at=float(int(self.clock())),
            conversation=conv,
            toolset=toolset,
            trace=trace,
            scope=scope,
            local=local,
            plan=plan,
            conversation_id=read[0],
            read_version=read[1],
            compacts=compacts,
            continues=continues,
        )
        kept = [answer_text(item) for item in prepared.outputs_kept_out()]
        trace.kept_out_tokens = sum(count(text) for text in kept)
        if plan is not None:  # (bytes: of a response that plays)
            trace.kept_out_bytes = sum(len(text.encode("utf-8")) for text in kept)
        return prepared

    def _continuation(
        self, request: CreateRequest, previous: str, local: ResponseStore | None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """For a request that resumes the program paused in `previous`: the digest it is kept under
        (None: it is not kept), and the response this very request was answered with already, if
        it was. A continuation another request made, or one still running, is the lost race's 400."""
        target = self.store if request.store is not False else local
        if target is None:
            return None, None
        digest = _digest(request)
        kept = target.continuation(previous)
        if kept is None:
            return digest, None
        record = target.get(kept[0]) if kept[1] == digest else None
        if record is None or record.response.get("status") in UNFINISHED:
            raise messages.previous_response_continued(previous)
        return digest, record.response

    def _answered(
        self,
        request: CreateRequest,
        conv: Conversation,
        answer: dict[str, Any],
        *,
        scope: str | None,
        local: ResponseStore | None,
        continues: str | None,
    ) -> Prepared:
        """A continuation sent again after it was answered (a client resending what a broken
        connection cut off): the answer it had, played by nobody and stored again nowhere."""
        return Prepared(
            request=request,
            response_id=str(answer["id"]),
            created_at=float(answer.get("created_at") or int(self.clock())),
            conversation=conv,
            toolset=Toolset.of(request, conv.items, conv.new_from),
            trace=Trace(),
            scope=scope,
            local=local,
            continues=continues,
            answered=answer,
        )

    async def create(self, request: CreateRequest, *, scope: str | None = None) -> dict[str, Any]:
        return await self.run(self.prepare(request, scope=scope))

    async def run(self, prepared: Prepared) -> dict[str, Any]:
        """The finished response, or for `background: true` the queued one (it finishes later)."""
        if prepared.answered is not None:
            return prepared.answered
        if prepared.background:
            # Its lease claimed and its queued record kept in a worker thread: both wait on a
            # shared database, and on the loop they held every client while it was slow.
            queued = await asyncio.to_thread(self._queue_background, prepared)
            return self._start_background(prepared, queued)
        return await self.complete(prepared)

    async def complete(self, prepared: Prepared) -> dict[str, Any]:
        """Play the response and store it (`store: true`, or a connection's own store)."""
        if prepared.answered is not None:
            return prepared.answered
        delivery = prepared.delivery
        if delivery is not None and delivery.latency_ms:
            await asyncio.sleep(delivery.latency_ms / 1000)
        hosted = getattr(prepared.plan, "hosted", None)
        if hosted is not None and len(prepared.conversation.items) > OFF_LOOP_ITEMS:
            await asyncio.to_thread(hosted.read_ahead)  # its scans of every item, not on the loop
        output = await self.model.play(prepared, self.runner) if prepared.plan is not None else []
        long = len(prepared.conversation.items) + len(output) > OFF_LOOP_ITEMS
        if long or prepared.store or _counts_much(prepared.request) or counts_much(output):
            # A long conversation's usage, body and storing take their time (200,000 short items:
            # seconds): in a worker thread, so other clients are answered meanwhile. So does any
            # write to the server's store: it may wait for another request's long write to end.
            # And counting a long output the server made itself (a program's text() of up to
            # 1 MiB, a scenario's message): 340,000 CJK characters held the loop 0.1-0.2 s.
            response = await asyncio.to_thread(self._finish, prepared, output)
        else:
            response = self._finish(prepared, output)
        if prepared.background:  # its replica runs on: kept once the database is back, if away
            await self.background.keep(lambda: self._keep(prepared, response), off_loop=long or prepared.store)
        return response

    def _finish(self, prepared: Prepared, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The played response's body, recorded in its conversation and stored."""
        delivery = prepared.delivery
        if prepared.compacts:  # the context was compacted before the model's turn
            output = [self.compactor.item(prepared.conversation.items), *output]
        incomplete = (delivery.response_incomplete if delivery is not None else None) or prepared.trace.stopped
        if not incomplete and self._over_token_limit(prepared, output):
            incomplete = "max_output_tokens"
        if incomplete:
            for item in output:
                if item["type"] == "message":
                    item["status"] = "incomplete"
            response = self.response(
                prepared,
                output,
                status=ResponseStatus.INCOMPLETE,
                incomplete={"reason": incomplete},
            )
        else:
            response = self.response(prepared, output, status=ResponseStatus.COMPLETED)
        thread = prepared.conversation_id
        if prepared.background:  # kept by `complete`, which may wait
            if thread is not None:
                self._record(prepared, thread, response)
            return response
        # All or nothing: the response and its turn in its conversation are written in one
        # transaction of the store (`put_with_turn`): if the turn is refused (another writer's
        # turn, `conversation_locked`) or cannot be written (a busy database's 503), neither is.
        # Before, the response was stored, then its turn recorded, and the response deleted again
        # if that failed: a delete that failed too (another lock, the database gone) left the
        # response stored outside its conversation.
        turn = None
        if thread is not None:
            turn = self.conversations.turn(
                thread, self._input_items(prepared), response["output"], expected=prepared.read_version
            )
        self._keep(prepared, response, turn)
        return response

    def _record(self, prepared: Prepared, thread: str, response: dict[str, Any]) -> None:
        expected = prepared.read_version
        self.conversations.record(thread, self._input_items(prepared), response["output"], expected=expected)

    @staticmethod
    def _over_token_limit(prepared: Prepared, output: list[dict[str, Any]]) -> bool:
        """Whether the scripted model wrote more tokens than `max_output_tokens` allows (usage's
        `output_tokens`): the hosted model stops there and the response ends `incomplete`."""
        limit = prepared.request.max_output_tokens
        return limit is not None and prepared.trace.held_to_token_limit and output_tokens(output) > limit

    def response(
        self,
        prepared: Prepared,
        output: list[dict[str, Any]],
        *,
        status: ResponseStatus,
        error: dict[str, Any] | None = None,
        incomplete: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The Response object for `prepared` with this output and status."""
        made = prepared.made
        tools = echo_tools(prepared.request)  # made once: the prompt's segments and the body read the same
        definitions = definitions_text(tools) if status.finished else None  # what usage counts
        # What the model reads of the context: all that usage and the prompt's segments count.
        context = model_read(prepared.context, prepared.conversation) if status.finished else prepared.context
        if made.cached_tokens is None and status.finished:
            request = prepared.request
            segments = prompt_segments(
                instructions=request.instructions, tools=tools, input_items=context, definitions=definitions
            )
            made.cached_tokens = self.prompt_cache.served(prepared.scope, segments)
        return response_body(
            prepared.request,
            response_id=prepared.response_id,
            created_at=prepared.created_at,
            now=self.clock(),
            store=prepared.store,
            output=output,
            status=status,
            context=context,
            error=error,
            incomplete=incomplete,
            cached_tokens=made.cached_tokens or 0,
            tools=tools,
            definitions=definitions,
            conversation=prepared.conversation_id,
        )

    def _context_tokens(self, request: CreateRequest, conv: Conversation) -> int:
        """The input tokens of a create's context, as `context_management`'s threshold counts them."""
        seen = conv.visible if conv.visible is not None else conv.items
        counted = usage(instructions=request.instructions, tools=echo_tools(request), input_items=seen, output_items=[])
        return int(counted["input_tokens"])

    # ---- the other endpoints --------------------------------------------------------------------

    def compact(self, request: CompactRequest, *, scope: str | None = None) -> dict[str, Any]:
        """`POST /v1/responses/compact`: the window's user messages, then one compaction item that
        stands for the whole window (`rules/compaction.py`). Nothing is stored. Its input is
        checked as a create's: a `compaction_trigger` that is not last is the same 400, and the
        window is held to the item rules (`analyse`, not waiting on a model turn)."""
        previous = request.previous_response_id
        room = Room.of(request)  # held to a create's bound, with no truncation to offer
        history = self.history.load(previous, scope=scope, room=room) if previous is not None else []
        new_items = self.history.input(request, scope)
        triggered(new_items)
        items = [*history, *new_items]
        if not items:
            raise messages.nothing_to_compact()
        expanded = self.compactor.expand(items, len(history))
        # Held to a create's item rules, as `count_tokens` holds its items: a window that breaks one
        # (a forged reasoning item, an id twice, an output without its call) was compacted before,
        # and every create that sent the compaction item back was refused, naming the item it held.
        if expanded is None:
            analyse(items, len(history), self.signer, whole=False)
        else:
            analyse(expanded.items, expanded.new_from, self.signer, None, expanded.shift, whole=False)
        window = expanded.items if expanded is not None else items
        users = [as_response_item(i, self.ids) for i in window if isinstance(i, Message) and i.role == "user"]
        counted = usage(
            instructions=request.instructions,
            tools=[],
            input_items=expanded.visible if expanded is not None else items,
            output_items=[],
        )
        compacted: dict[str, Any] = {
            "id": self.ids("resp"),
            "object": "response.compaction",
            "created_at": int(self.clock()),
            "output": [*users, self.compactor.item(window)],
            "usage": counted,
        }
        for echoed in ("safety_identifier", "service_tier"):  # the CompactedResponse shows them when given
            if getattr(request, echoed) is not None:
                compacted[echoed] = getattr(request, echoed)
        return compacted

    def cancelled(self, response_id: str) -> bool:
        """Whether the stored response was cancelled (by any replica)."""
        record = self.store.get(response_id)
        return record is not None and record.response.get("status") == ResponseStatus.CANCELLED

    def retrieve(self, response_id: str, *, scope: str | None) -> dict[str, Any]:
        """The stored response, as a request in `scope` sees it (one of another scope is a 404)."""
        record = self.history.seen(response_id, scope)
        release(record.input_items)  # (not in the reply) freed a slice at a time, not in one call
        if record.response.get("status") in UNFINISHED and self.background.orphaned(response_id):
            failed = {**record.response, "status": ResponseStatus.FAILED, "error": interrupted()}  # its replica died
            kept = StoredResponse(response_id, failed, record.input_items, record.previous_response_id, record.scope)
            if self.store.replace_unfinished(kept):
                return failed
            return self.history.stored(response_id).response  # it finished meanwhile
        return record.response

    async def delete(self, response_id: str, *, scope: str | None) -> dict[str, Any]:
        # The record is read and deleted in worker threads (a long one takes its time: no other
        # client waits on it there); its task, if it runs, is stopped on the event loop.
        await asyncio.to_thread(self.history.seen, response_id, scope)
        self.background.cancel(response_id)
        if not await asyncio.to_thread(self.store.delete, response_id):
            raise not_found(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    async def cancel(self, response_id: str, *, scope: str | None) -> dict[str, Any]:
        # The store's reads and writes in worker threads (a shared database may be slow: on the
        # loop, every client waited on them); the task, if it runs here, stopped on the loop.
        record = await asyncio.to_thread(self.history.seen, response_id, scope)
        if not record.response.get("background"):
            raise messages.cancel_needs_background()
        if record.response.get("status") in UNFINISHED and await asyncio.to_thread(self._cancelled, record):
            await self.background.stopped(response_id)  # its task, here or on the replica running it
        response = (await asyncio.to_thread(self.history.stored, response_id)).response
        if response.get("status") in (ResponseStatus.COMPLETED, ResponseStatus.FAILED):  # finished first
            raise messages.cancel_finished(str(response["status"]))
        return response

    def _cancelled(self, record: StoredResponse) -> bool:
        """Store the unfinished background response as cancelled, unless it finished (or failed)
        meanwhile, whatever process wrote that: the store decides which came first."""
        response = {**record.response, "status": ResponseStatus.CANCELLED, "usage": None}
        kept = StoredResponse(record.id, response, record.input_items, record.previous_response_id, record.scope)
        return self.store.replace_unfinished(kept)

    def input_items(
        self,
        response_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
        scope: str | None,
    ) -> dict[str, Any]:
        return self.history.input_items(response_id, after=after, limit=limit, order=order, scope=scope)

    def count_tokens(self, request: CountTokensRequest, *, scope: str | None = None) -> dict[str, Any]:
        """`POST /v1/responses/input_tokens`: the body is checked as a create's (its conversation,
        its tools and tool_choice, a compaction_trigger that is not last, compaction items that do
        not verify: the same 400s), then its input is counted with its history, a compacted
        context as a create counts it (`Expanded.visible`)."""
        thread = checks.check_conversation(request)
        checks.check_tool_fields(request)
        Toolset.of(request)
        previous = request.previous_response_id
        room = Room.of(request)  # as a create's: refused past it, or (truncation auto) the newest counted
        history = self.history.load(previous, scope=scope, room=room) if previous is not None else []
        if thread is not None and previous is None:
            history = self.conversations.history(thread, scope, room=room.items, truncate=room.truncate)
        new_items = self.history.input(request, scope)
        triggered(new_items)
        items = [*history, *new_items]
        release(items)  # a long history's models freed a slice at a time once counted, not in one call
        expanded = self.compactor.expand(items, len(history))
        if expanded is None:  # its items are held to a create's rules (an output needs its call)
            analyse(items, len(history), self.signer, whole=False)
        else:
            analyse(expanded.items, expanded.new_from, self.signer, None, expanded.shift, whole=False)
        counted = usage(
            instructions=request.instructions,
            tools=echo_tools(request),
            input_items=expanded.visible if expanded is not None else items,
            output_items=[],
        )
        return {"object": "response.input_tokens", "input_tokens": counted["input_tokens"]}

    async def aclose(self) -> None:
        await self.background.aclose()

    # ---- storing --------------------------------------------------------------------------------

    def _input_items(self, prepared: Prepared) -> list[dict[str, Any]]:
        """This request's input items as stored (with ids), made once and only when stored."""
        made = prepared.made
        if made.input_items is None:
            made.input_items = [self._as_stored(item) for item in prepared.new_items]
        return made.input_items

    def _as_stored(self, item: Item, param: str = "input") -> dict[str, Any]:
        """An input item as it is stored (`as_response_item`); a reasoning item's sealed content
        is held to `sealed_reasoning_id` on the way in."""
        sealed = sealed_reasoning_id(item, self.signer, param) if isinstance(item, ReasoningItem) else None
        check_message_parts(item, param)
        return as_response_item(item, self.ids, sealed)

    def _keep(self, prepared: Prepared, response: dict[str, Any], turn: Turn | None = None) -> None:
        """Store the response where it belongs: the server's store, a connection's, or nowhere;
        with `turn`, its turn in its conversation too, in the same transaction of the server's store."""
        target = self.store if prepared.store else prepared.local
        if target is None:
            if turn is not None:
                self.conversations.append_turn(turn)
            return
        previous = prepared.request.previous_response_id
        record = StoredResponse(response["id"], response, self._input_items(prepared), previous, prepared.scope)
        if prepared.background and response.get("status") not in UNFINISHED:
            target.replace_unfinished(record)  # unless cancelled meanwhile, through any replica
            return
        # A response that resumes a program paused in `previous`: the store keeps one continuation
        # of it, the first to commit; the others are the lost race's 400, and are not kept.
        digest = prepared.continues if previous is not None else None
        if turn is not None and target is self.store:
            try:
                taken = target.put_with_turn(record, turn, digest)
            except TurnRefused:
                raise messages.conversation_locked() from None
        elif turn is not None:
            taken = self._keep_local(target, record, turn, digest)
        elif digest is not None:
            taken = target.put_continuation(record, digest)
        else:
            target.put(record)
            taken = None
        if taken is not None and previous is not None:
            raise messages.previous_response_continued(previous)

    def _keep_local(self, local: ResponseStore, record: StoredResponse, turn: Turn, digest: str | None) -> str | None:
        """A connection's own response (`store: false` over a WebSocket) and its turn in the
        server's conversation: two stores, so the response is kept first and deleted again if the
        turn is not recorded (the connection's store is this process's memory: its delete does
        not fail)."""
        if digest is not None:
            taken = local.put_continuation(record, digest)
            if taken is not None:
                return taken
        else:
            local.put(record)
        try:
            self.conversations.append_turn(turn)
        except BaseException:
            local.delete(record.id)
            raise
        return None

    def _queue_background(self, prepared: Prepared) -> dict[str, Any]:
        queued = self.response(prepared, [], status=ResponseStatus.QUEUED)
        self.background.claim(prepared.response_id)
        self._keep(prepared, queued)
        return queued

    def _start_background(self, prepared: Prepared, queued: dict[str, Any]) -> dict[str, Any]:

        async def work() -> dict[str, Any]:
            try:
                await self._started(prepared)
                return await self.complete(prepared)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a background failure is the response's own status
                message = getattr(e, "message", str(e))
                error = {"code": "server_error", "message": message}
                failed = self.response(prepared, [], status=ResponseStatus.FAILED, error=error)
                await self.background.keep(lambda: self._keep(prepared, failed))
                return failed

        self.background.start(prepared.response_id, work)
        return queued

    async def _started(self, prepared: Prepared) -> None:
        """A background response's task has begun: stored `in_progress` (the hosted API's
        queued, in_progress, then its end), unless it was cancelled meanwhile. In a worker
        thread (the write may wait); with the database away, it stays `queued` until its end."""
        target = self.store if prepared.store else prepared.local
        if target is None:
            return
        running = self.response(prepared, [], status=ResponseStatus.IN_PROGRESS)
        previous = prepared.request.previous_response_id
        record = StoredResponse(running["id"], running, self._input_items(prepared), previous, prepared.scope)
        with contextlib.suppress(StoreUnavailable):
            await asyncio.to_thread(target.replace_unfinished, record)


def _text_bytes(request: CreateRequest) -> int:
    """At most how many bytes the texts a scenario's patterns may match in this request hold
    (without stored history, which is read in a worker thread anyway): its instructions, model,
    and every string of its input's items."""
    total = _utf8(request.model or "") + _utf8(request.instructions if isinstance(request.instructions, str) else "")
    given = request.input
    if isinstance(given, str):
        return total + _utf8(given)
    stack: list[Any] = list(given) if isinstance(given, list) else []
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            total += _utf8(value)
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, BaseModel):
            stack.extend(getattr(value, name) for name in type(value).model_fields)
            stack.extend((value.model_extra or {}).values())
    return total


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _counts_much(request: Any) -> bool:
    """Whether counting the request's tokens (its usage, its prompt's segments, its input_tokens, a
    `context_management` threshold) may hold the event loop longer than a few milliseconds: it
    reads stored history (known only once read), or its instructions, input and tools hold
    `usage.COUNTED_ON_LOOP` characters in all (`usage.counts_much`). Such counts are made in a
    worker thread: `off_loop`, `attempt_off_loop` and `complete` hop there."""
    if request.previous_response_id is not None or getattr(request, "conversation", None) is not None:
        return True
    return counts_much(getattr(request, "instructions", None), request.input, getattr(request, "tools", None))


_PART_CHARS = 16
"""What a content part weighs in `_holds_long_text` besides its text (the smallest is 21 bytes)."""


def _holds_long_text(given: object) -> bool:
    """Whether an input holds a text long enough to be read in a worker thread
    (`contract.OFF_LOOP_CHARS`): a tool output its tool's `output_schema` checks value by value, or
    any text a scenario's patterns match (an input string, a message's content), which a worker
    thread may match at a larger cost than the event loop (`patterns.match_budget`). A part counts
    `_PART_CHARS` besides its text: a tool output of content parts is made into text (a JSON array of
    them) as it is read, and 700,000 bare parts with no text took over a second."""
    if isinstance(given, str):
        return len(given) >= contract.OFF_LOOP_CHARS
    if not isinstance(given, list):
        return False
    for item in given:
        for text in (getattr(item, "output", None), getattr(item, "content", None)):
            if isinstance(text, list):
                size = sum(len(getattr(part, "text", None) or "") + _PART_CHARS for part in text)
            else:
                size = len(text) if isinstance(text, str) else 0
            if size >= contract.OFF_LOOP_CHARS:
                return True
    return False
