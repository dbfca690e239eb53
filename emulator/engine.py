"""The response engine: a request and the items so far go in; a Response comes out.

`prepare()` does everything that can fail with a 400 before the first byte of a streamed reply
(validation, history, the conversation rules, choosing the script, fingerprints, contract
checks, an injected HTTP error). `complete()` plays the scripted model's next step (`player.py`),
running or replaying a program in the sandbox, and builds and stores the Response. Program
faults become `program_output.status = "incomplete"`, not exceptions.

Nothing here knows HTTP; nothing here touches V8 except through the `Runner` protocol.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from ptc_emulator.sandbox import Limits

from .choice import next_turn_conflict
from .contract import Violation, check_output, check_tools
from .conversation import Conversation, analyse
from .conversations import Conversations, conversation_id
from .errors import EmulatorError, InvalidRequest, NoScenarioMatched
from .faults import FaultInjector, InjectedHTTPError
from .history import History, as_input, as_response_item, not_found
from .items import FunctionCall, FunctionCallOutput, Message, ProgramCaller, ReasoningItem
from .player import REASONING_DOMAIN, Player, Prepared, Runner, Trace, call_indexes
from .request import (
    CountTokensRequest,
    CreateRequest,
    CustomTool,
    CustomToolChoice,
    FunctionToolChoice,
    KindToolChoice,
    ProgrammaticToolChoice,
)
from .response import echo_tools, response_body
from .scenario import NearMiss, Request, Scenario, ScenarioRegistry
from .script import Script, inline_code, inline_search, position, turn_items
from .signing import Signer
from .store import Store, StoredResponse
from .toolkinds import answer_text, bind, duplicate_names, program_tools
from .toolset import Toolset, call_name
from .usage import PromptCache, prompt_segments, usage

__all__ = ["Engine", "Prepared", "Runner", "Trace"]


_ids = random.Random(secrets.randbits(256))


def new_id(prefix: str) -> str:
    """`resp_…`, `call_…`: 48 hex digits, unique, from a generator seeded once from the OS.

    Ids name things; they guard nothing (what must not be forged is signed, see `signing.py`),
    so they need no system call each."""
    return f"{prefix}_{_ids.getrandbits(192):048x}"


class Engine:
    def __init__(
        self,
        *,
        runner: Runner,
        store: Store,
        signer: Signer,
        scenarios: ScenarioRegistry,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        ids: Callable[[str], str] = new_id,
        seeds: Callable[[], int] = lambda: secrets.randbits(128),
        strict_contract: bool = False,
    ) -> None:
        self.store = store
        self.signer = signer
        self.scenarios = scenarios
        self.limits = limits or Limits()
        self.clock = clock
        self.ids = ids
        self.strict_contract = strict_contract
        self.history = History(store)
        self.player = Player(runner=runner, signer=signer, limits=self.limits, ids=ids, seeds=seeds, clock=clock)
        self.faults = FaultInjector()
        self._background: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self.conversations = Conversations(
            store.conversations,
            ids=ids,
            clock=clock,
            as_item=lambda item: as_response_item(item, ids),
            resolve=self.history.reference,
            as_input=as_input,
        )
        self.prompt_cache = PromptCache()

    # ---- create -------------------------------------------------------------------------------

    def prepare(
        self,
        request: CreateRequest,
        *,
        scope: str | None = None,
        generate: bool = True,
        local: Store | None = None,
    ) -> Prepared:
        """Validate a create and decide what plays; raises the request's 400 (or injected error).

        With `generate=False` nothing will play: the response only records its input, so its id
        can be continued. `local` is a connection's own store, looked up before the server's."""
        _check_request(request)
        previous = request.previous_response_id
        history = self.history.load(previous, local) if previous else []
        thread = conversation_id(request.conversation)
        if thread is not None:
            history = self.conversations.history(thread)
        new_items = self.history.input(request)
        if not history and not any(isinstance(i, Message) and i.role == "user" for i in new_items):
            history = self.history.recovered(new_items)
        items = [*history, *new_items]
        if not generate:
            conv = Conversation(items, len(history), anchor=-1)
            return self._prepared(request, conv, None, Trace("generate=false"), scope=scope, local=local)
        conv = analyse(items, len(history), self.signer)
        toolset = Toolset.of(request, conv.items, conv.new_from)
        script = self._script(conv, request, toolset, scope)
        trace = Trace(script.name)
        try:
            turn, emitted = position(conv, script)
            if conv.open_program is not None:
                self._check_open_program(conv, toolset, request)
            self._check_finished_programs(conv)
            if request.store is False:
                self._check_reasoning(conv, script)
            strict = self.strict_contract
            if script.scenario is not None and script.scenario.strict_contract is not None:
                strict = script.scenario.strict_contract
            trace.contract.extend(_check_outputs(conv, toolset))
            if strict and trace.contract:
                raise InvalidRequest(trace.contract[0].describe(), param="input", code="contract_violation")
            fault = script.turns[turn].fault if conv.open_program is None and turn < len(script.turns) else None
            if fault is not None:
                trace.fault = self.faults.http_error(fault, (scope, script.name, turn), items)
        except EmulatorError as e:
            if isinstance(e, InjectedHTTPError):
                trace.fault = e.what
            e.trace = trace  # what was known when it failed, for the journal
            raise
        trace.kept_out_bytes = sum(
            len(answer_text(item).encode("utf-8"))
            for item in conv.latest_outputs()
            if isinstance(getattr(item, "caller", None), ProgramCaller)
        )
        prepared = self._prepared(request, conv, script, trace, scope=scope, local=local)
        prepared.toolset = toolset
        prepared.turn, prepared.emitted, prepared.fault, prepared.strict_contract = turn, emitted, fault, strict
        prepared.hosted_script = self.scenarios.hosted(scope)
        return prepared

    def _prepared(
        self,
        request: CreateRequest,
        conv: Conversation,
        script: Script | None,
        trace: Trace,
        *,
        scope: str | None,
        local: Store | None,
    ) -> Prepared:
        return Prepared(
            request=request,
            response_id=self.ids("resp"),
            created_at=float(int(self.clock())),
            conversation=conv,
            script=script,
            turn=0,
            emitted=0,
            scope=scope,
            trace=trace,
            local=local,
        )

    async def create(self, request: CreateRequest, *, scope: str | None = None) -> dict[str, Any]:
        return await self.run(self.prepare(request, scope=scope))

    async def run(self, prepared: Prepared) -> dict[str, Any]:
        """The finished response, or for `background: true` the queued one (it finishes later)."""
        if prepared.request.background:
            return self._start_background(prepared)
        return await self.complete(prepared)

    async def complete(self, prepared: Prepared) -> dict[str, Any]:
        """Play the response and store it (`store: true`, or a connection's own store)."""
        fault = prepared.fault
        if fault is not None and fault.latency_ms:
            await asyncio.sleep(fault.latency_ms / 1000)
        output = await self.player.play(prepared)
        if fault is not None and fault.response_incomplete:
            for item in output:
                if item["type"] == "message":
                    item["status"] = "incomplete"
            response = self.response(
                prepared, output, status="incomplete", incomplete={"reason": fault.response_incomplete}
            )
        else:
            response = self.response(prepared, output, status="completed")
        target = self.store if prepared.store else prepared.local
        if target is not None:
            previous = prepared.request.previous_response_id
            target.put(StoredResponse(response["id"], response, self._input_items(prepared), previous))
        thread = conversation_id(prepared.request.conversation)
        if thread is not None:
            self.conversations.record(thread, self._input_items(prepared), response["output"])
        return response

    def response(
        self,
        prepared: Prepared,
        output: list[dict[str, Any]],
        *,
        status: str,
        error: dict[str, Any] | None = None,
        incomplete: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The Response object for `prepared` with this output and status."""
        if prepared.cached_tokens is None and status in ("completed", "incomplete", "failed"):
            request = prepared.request
            segments = prompt_segments(
                instructions=request.instructions, tools=echo_tools(request), input_items=prepared.conversation.items
            )
            prepared.cached_tokens = self.prompt_cache.served(prepared.scope, segments)
        return response_body(
            prepared.request,
            response_id=prepared.response_id,
            created_at=prepared.created_at,
            now=self.clock(),
            store=prepared.store,
            output=output,
            status=status,
            context=prepared.conversation.items,
            error=error,
            incomplete=incomplete,
            cached_tokens=prepared.cached_tokens or 0,
        )

    # ---- the other endpoints --------------------------------------------------------------------

    def retrieve(self, response_id: str) -> dict[str, Any]:
        return self.history.stored(response_id).response

    def delete(self, response_id: str) -> dict[str, Any]:
        task = self._background.pop(response_id, None)
        if task is not None:
            task.cancel()
        if not self.store.delete(response_id):
            raise not_found(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    async def cancel(self, response_id: str) -> dict[str, Any]:
        record = self.history.stored(response_id)
        if not record.response.get("background"):
            raise InvalidRequest("Only responses created with background=true can be cancelled.")
        task = self._background.pop(response_id, None)
        if task is not None and not task.done():
            task.cancel()
            response = {**record.response, "status": "cancelled", "usage": None}
            self.store.put(StoredResponse(response_id, response, record.input_items, record.previous_response_id))
            return response
        return self.history.stored(response_id).response

    def input_items(
        self, response_id: str, *, after: str | None = None, limit: int = 20, order: str = "desc"
    ) -> dict[str, Any]:
        items = list(self.history.stored(response_id).input_items)
        if order == "desc":
            items.reverse()
        if after is not None:
            index = next((i for i, item in enumerate(items) if item.get("id") == after), None)
            if index is None:
                raise InvalidRequest(
                    f"No item with id '{after}' in the input of response '{response_id}'.", param="after"
                )
            items = items[index + 1 :]
        page = items[:limit]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }

    def count_tokens(self, request: CountTokensRequest) -> dict[str, Any]:
        _check_conversation(request)
        previous = request.previous_response_id
        thread = conversation_id(request.conversation)
        history = self.conversations.history(thread) if thread is not None else []
        items = [*(self.history.load(previous) if previous else history), *self.history.input(request)]
        counted = usage(
            instructions=request.instructions,
            tools=echo_tools(request),
            input_items=items,
            output_items=[],
        )
        return {"object": "response.input_tokens", "input_tokens": counted["input_tokens"]}

    async def aclose(self) -> None:
        for task in self._background.values():
            task.cancel()
        await asyncio.gather(*self._background.values(), return_exceptions=True)

    # ---- checks ---------------------------------------------------------------------------------

    def _check_open_program(self, conv: Conversation, toolset: Toolset, request: CreateRequest) -> None:
        program = conv.open_program
        assert program is not None
        seal = conv.seals[program.call_id]
        hosted = self.player.hosted(self._prepared(request, conv, None, Trace(""), scope=None, local=None))
        labels = {label for label, tool in hosted.mcp_tools.items() if tool.programmatic}
        started = [t for t in seal.tools if not ("." in t and t.partition(".")[0] in labels)]
        allowed = sorted({*program_tools(request, toolset), *hosted.static_names()})
        if started != allowed:
            raise InvalidRequest(
                f"The tools a program may call changed while program {program.call_id} was running: it started "
                f"with {list(seal.tools)}, this request allows {allowed}.",
                param="tools",
            )
        call_indexes(self.signer, program, conv.program_calls(program.call_id), self.limits.max_tool_calls)

    def _check_finished_programs(self, conv: Conversation) -> None:
        """A finished program's calls are the ones it made: one attached to it afterwards is refused."""
        for call_id in conv.programs:
            if call_id not in conv.program_outputs:
                continue
            for index, call in enumerate(conv.program_calls(call_id)):
                if call.call_id != self.signer.program_call_id(call_id, index):
                    raise InvalidRequest(
                        f"Function call {call.call_id} was not issued by program {call_id}, which has finished: "
                        "replay the program's function calls unmodified and in order.",
                        param="input",
                    )

    def _check_reasoning(self, conv: Conversation, script: Script) -> None:
        """Without storage, reasoning items must come back with the items they preceded."""
        reasoning = {item.id: item for item in conv.items if isinstance(item, ReasoningItem)}
        for item in reasoning.values():
            # Sealed with its own id: another reasoning item's content does not verify here.
            sealed = (
                None if item.encrypted_content is None else self.signer.unseal(REASONING_DOMAIN, item.encrypted_content)
            )
            if sealed is None or sealed.get("id") != item.id:
                raise InvalidRequest(
                    f"The encrypted content for item {item.id} could not be verified.",
                    param="input",
                    code="invalid_encrypted_content",
                )
        for first, turn in turn_items(conv, script):
            required = self.signer.reasoning_id(first.call_id or "")
            if turn.reasoning is not None and required not in reasoning:
                raise InvalidRequest(
                    f"Item '{first.id or first.call_id}' of type '{first.type}' was provided without its required "
                    f"'reasoning' item: '{required}'.",
                    param="input",
                )

    # ---- the scripted model ---------------------------------------------------------------------

    def _script(self, conv: Conversation, request: CreateRequest, toolset: Toolset, scope: str | None) -> Script:
        text = conv.anchor_text

        def contradiction(scenario: Scenario) -> str | None:
            if conv.open_program is not None:
                return None  # resuming a program is not the model choosing
            script = Script(scenario.name, list(scenario.turns), {}, scenario)
            return next_turn_conflict(request, script.turns, lambda: position(conv, script)[0])

        found = self.scenarios.match(
            Request(
                text=text,
                tools=frozenset({*toolset.declared, *bind(request, toolset)}),
                ptc=request.ptc_enabled,
                model=request.model or "",
                metadata=request.metadata or {},
                scope=scope,
                deferred=frozenset(n for n in toolset.declared if toolset.not_loaded(n)),
                choice=contradiction,
            )
        )
        if not isinstance(found, list):
            scenario, captures = found
            return Script(scenario.name, list(scenario.turns), {"input": text, **captures}, scenario)
        code, search = inline_code(text), inline_search(text)
        if code is not None or search is not None:
            script = Script.inline(code, search)
            reason = None
            if conv.open_program is None:
                reason = next_turn_conflict(request, script.turns, lambda: position(conv, script)[0])
            if reason is None:
                return script
            raise _no_match(text, found, inline=f"the ```js block cannot run: {reason}")
        raise _no_match(text, found)

    def _input_items(self, prepared: Prepared) -> list[dict[str, Any]]:
        """This request's input items as stored (with ids), made once and only when stored."""
        if prepared.input_items is None:
            conv = prepared.conversation
            prepared.input_items = [as_response_item(item, self.ids) for item in conv.items[conv.new_from :]]
        return prepared.input_items

    # ---- background -----------------------------------------------------------------------------

    def _start_background(self, prepared: Prepared) -> dict[str, Any]:
        queued = self.response(prepared, [], status="queued")
        previous = prepared.request.previous_response_id
        self.store.put(StoredResponse(prepared.response_id, queued, self._input_items(prepared), previous))

        async def work() -> dict[str, Any]:
            try:
                return await self.complete(prepared)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a background failure is the response's own status
                message = getattr(e, "message", str(e))
                error = {"code": "server_error", "message": message}
                failed = self.response(prepared, [], status="failed", error=error)
                self.store.put(StoredResponse(prepared.response_id, failed, self._input_items(prepared), previous))
                return failed
            finally:
                self._background.pop(prepared.response_id, None)

        self._background[prepared.response_id] = asyncio.ensure_future(work())
        return queued


def _check_conversation(request: CreateRequest | CountTokensRequest) -> None:
    if request.conversation is not None:
        if request.previous_response_id is not None:
            raise InvalidRequest(
                "Parameters 'previous_response_id' and 'conversation' cannot be used together.", param="conversation"
            )
        conversation_id(request.conversation)  # a string or {"id": ...}


def _check_request(request: CreateRequest) -> None:
    if request.model is None and request.prompt is None:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    _check_conversation(request)
    if request.background and request.store is False:
        raise InvalidRequest("Background mode requires store=true.", param="background")
    for name in duplicate_names(request):
        raise InvalidRequest(f"Duplicate tool name: '{name}'.", param="tools")
    names = {t.name for t in request.function_tools}
    choice = request.tool_choice
    if isinstance(choice, FunctionToolChoice) and choice.name not in names:
        raise InvalidRequest(
            f"Tool choice 'function' with name '{choice.name}' not found in 'tools' parameter.", param="tool_choice"
        )
    check_tools(request)
    if isinstance(choice, CustomToolChoice) and choice.name not in {
        t.name for t in request.tools or () if isinstance(t, CustomTool)
    }:
        raise InvalidRequest(
            f"Tool choice 'custom' with name '{choice.name}' not found in 'tools' parameter.", param="tool_choice"
        )
    if isinstance(choice, KindToolChoice) and not any(
        getattr(t, "type", None) == choice.type for t in request.tools or ()
    ):
        raise InvalidRequest(f"Tool choice '{choice.type}' not found in 'tools' parameter.", param="tool_choice")
    if isinstance(choice, ProgrammaticToolChoice) and not request.ptc_enabled:
        raise InvalidRequest(
            "Tool choice 'programmatic_tool_calling' not found in 'tools' parameter.", param="tool_choice"
        )


def _check_outputs(conv: Conversation, toolset: Toolset) -> list[Violation]:
    """The newly answered tool outputs against their tools' output_schema."""
    found = []
    for item in conv.latest_outputs():
        call = conv.calls.get(item.call_id or "") if isinstance(item, FunctionCallOutput) else None
        if isinstance(item, FunctionCallOutput) and isinstance(call, FunctionCall):
            tool = toolset.function(call_name(call))
            violation = check_output(tool, call.call_id, item.output_text()) if tool else None
            if violation is not None:
                found.append(violation)
    return found


def _no_match(text: str, misses: list[NearMiss], inline: str | None = None) -> NoScenarioMatched:
    shown = text if len(text) <= 120 else text[:117] + "..."
    if misses:
        closest = "; ".join(f"'{m.scenario}' ({m.field}): {m.reason}" for m in misses[:3])
        message = f"No scenario matches this request. Closest: {closest}."
    else:
        message = "No scenario matches this request (no scenario is loaded)."
    if inline is None:
        message += " The latest user message has no ```js code block to run inline either."
    else:
        message += f" The latest user message has a ```js code block, but {inline}."
    report: dict[str, Any] = {
        "input": shown,
        "near_misses": [m.as_dict() for m in misses],
        "inline_code": inline is not None,
    }
    if inline is not None:
        report["inline_conflict"] = inline
    return NoScenarioMatched(message, report)
