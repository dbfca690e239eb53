"""The response engine: a request and the items so far go in; a Response comes out.

`prepare()` does everything that can fail with a 400 before the first byte of a streamed reply
(validation, history, the conversation rules, choosing the script, fingerprints). `complete()`
plays the scripted model's next step, running or replaying a program in the sandbox, and builds
the Response. Program faults become `program_output.status = "incomplete"`, not exceptions.

Nothing here knows HTTP; nothing here touches V8 except through the `Runner` protocol.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import TypeAdapter, ValidationError

from sandbox import Completed, Failed, ImageOutput, Limits, Outcome, Program, Suspended, TextOutput, ToolResult

from . import usage as usage_
from .contract import Violation, check_arguments, check_output
from .conversation import Conversation, analyse
from .errors import InvalidRequest, NoScenarioMatched, NotFound, PreviousResponseNotFound, ScriptedError
from .items import (
    FunctionCall,
    FunctionCallOutput,
    InputItem,
    Item,
    ItemReference,
    Message,
    OutputText,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ReasoningItem,
    Refusal,
    SummaryText,
    dump,
)
from .request import (
    CountTokensRequest,
    CreateRequest,
    FunctionTool,
    FunctionToolChoice,
    ProgrammaticToolChoice,
)
from .scenario import Fault, NearMiss, Request, ScenarioRegistry, Turn
from .script import Script, inline_code
from .signing import ProgramSeal, Signer, code_digest
from .store import Store, StoredResponse

__all__ = ["Engine", "Prepared", "Runner", "Trace"]

_REASONING_DOMAIN = "reasoning"


class Runner(Protocol):
    """What the engine needs from the sandbox: the `sandbox.Pool` interface."""

    async def run(self, program: Program) -> Outcome: ...


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


@functools.cache
def _input_adapter() -> TypeAdapter[Any]:
    return TypeAdapter(InputItem)


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
    """The fault injected into this response, if any (see `scenario.Fault`)."""
    contract: list[Violation] = field(default_factory=list)


@dataclass
class Prepared:
    """A validated create request, ready to play; nothing has run yet."""

    request: CreateRequest
    response_id: str
    created_at: float
    conversation: Conversation
    script: Script
    turn: int
    """The next turn of the script to play (after resuming the open program, if any)."""
    emitted: int
    """Direct calls of that turn already emitted (it is a `call` turn played one call at a time)."""
    input_items: list[dict[str, Any]]
    scope: str | None = None
    trace: Trace = field(default_factory=lambda: Trace(""))
    fault: Fault | None = None
    """The fault of the turn this response starts (not of a program it resumes)."""
    strict_contract: bool = False

    @property
    def store(self) -> bool:
        return self.request.store is not False


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
        self.runner = runner
        self.store = store
        self.signer = signer
        self.scenarios = scenarios
        self.limits = limits or Limits()
        self.clock = clock
        self.ids = ids
        self.seeds = seeds
        self.strict_contract = strict_contract
        self._fault_counts: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._background: dict[str, asyncio.Task[dict[str, Any]]] = {}

    # ---- create -------------------------------------------------------------------------------

    def prepare(self, request: CreateRequest, *, scope: str | None = None) -> Prepared:
        self._check_request(request)
        history = self._history(request.previous_response_id) if request.previous_response_id else []
        new_items = self._input(request)
        if not history and not any(_is_user(item) for item in new_items):
            history = self._recovered_history(new_items)
        conv = analyse([*history, *new_items], len(history), self.signer)
        script = self._script(conv, request, scope)
        turn, emitted = _position(conv, script)
        if conv.open_program is not None:
            self._check_open_program(conv, request)
        if request.store is False:
            self._check_reasoning(conv, script)
        strict = self.strict_contract
        if script.scenario is not None and script.scenario.strict_contract is not None:
            strict = script.scenario.strict_contract
        trace = Trace(script.name)
        trace.contract.extend(self._check_outputs(conv, request))
        if strict and trace.contract:
            raise InvalidRequest(trace.contract[0].describe(), param="input", code="contract_violation")
        fault = None
        if conv.open_program is None and turn < len(script.turns):
            fault = script.turns[turn].fault
        if fault is not None:
            self._http_fault(fault, trace, (scope, script.name, turn, _digest(conv)))
            trace.fault = _describe(fault)
        trace.kept_out_bytes = sum(
            len(item.output_text().encode("utf-8"))
            for item in conv.items[conv.new_from :]
            if isinstance(item, FunctionCallOutput) and isinstance(item.caller, ProgramCaller)
        )
        return Prepared(
            request=request,
            response_id=self.ids("resp"),
            created_at=float(int(self.clock())),
            conversation=conv,
            script=script,
            turn=turn,
            emitted=emitted,
            input_items=[_as_response_item(item, self.ids) for item in new_items],
            scope=scope,
            trace=trace,
            fault=fault,
            strict_contract=strict,
        )

    async def create(self, request: CreateRequest, *, scope: str | None = None) -> dict[str, Any]:
        return await self.run(self.prepare(request, scope=scope))

    async def run(self, prepared: Prepared) -> dict[str, Any]:
        """The finished response, or for `background: true` the queued one (it finishes later)."""
        if prepared.request.background:
            return self._start_background(prepared)
        return await self.complete(prepared)

    async def complete(self, prepared: Prepared) -> dict[str, Any]:
        fault = prepared.fault
        if fault is not None and fault.latency_ms:
            await asyncio.sleep(fault.latency_ms / 1000)
        output = await self._play(prepared)
        if fault is not None and fault.response_incomplete:
            for item in output:
                if item["type"] == "message":
                    item["status"] = "incomplete"
            response = self.response(
                prepared, output, status="incomplete", incomplete={"reason": fault.response_incomplete}
            )
        else:
            response = self.response(prepared, output, status="completed")
        if prepared.store:
            self.store.put(
                StoredResponse(response["id"], response, prepared.input_items, prepared.request.previous_response_id)
            )
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
        req = prepared.request
        tools = [_echo_tool(t) for t in req.tools or ()]
        body: dict[str, Any] = {
            "id": prepared.response_id,
            "object": "response",
            "created_at": prepared.created_at,
            "status": status,
            "background": bool(req.background),
            "completed_at": float(int(self.clock())) if status == "completed" else None,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "max_tool_calls": req.max_tool_calls,
            "model": req.model,
            "output": output,
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "prompt_cache_key": req.prompt_cache_key,
            "reasoning": req.reasoning or {"effort": None, "summary": None},
            "safety_identifier": req.safety_identifier,
            "service_tier": req.service_tier or "default",
            "store": prepared.store,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "text": req.text or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": _echo_choice(req.tool_choice),
            "tools": tools,
            "top_logprobs": req.top_logprobs or 0,
            "top_p": 1.0 if req.top_p is None else req.top_p,
            "truncation": req.truncation or "disabled",
            "usage": None,
            "user": req.user,
            "metadata": req.metadata or {},
        }
        if status in ("completed", "incomplete", "failed", "cancelled"):
            body["usage"] = usage_.usage(
                instructions=req.instructions,
                tools=tools,
                input_items=[dump(item) for item in prepared.conversation.items],
                output_items=output,
            )
        return body

    # ---- the other endpoints --------------------------------------------------------------------

    def retrieve(self, response_id: str) -> dict[str, Any]:
        return self._stored(response_id).response

    def delete(self, response_id: str) -> dict[str, Any]:
        task = self._background.pop(response_id, None)
        if task is not None:
            task.cancel()
        if not self.store.delete(response_id):
            raise _not_found(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    async def cancel(self, response_id: str) -> dict[str, Any]:
        record = self._stored(response_id)
        if not record.response.get("background"):
            raise InvalidRequest("Only responses created with background=true can be cancelled.")
        task = self._background.pop(response_id, None)
        if task is not None and not task.done():
            task.cancel()
            response = {**record.response, "status": "cancelled", "usage": None}
            self.store.put(StoredResponse(response_id, response, record.input_items, record.previous_response_id))
            return response
        return self._stored(response_id).response

    def input_items(
        self, response_id: str, *, after: str | None = None, limit: int = 20, order: str = "desc"
    ) -> dict[str, Any]:
        items = list(self._stored(response_id).input_items)
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
        history = self._history(request.previous_response_id) if request.previous_response_id else []
        items = [*history, *self._input(request)]
        tools = [_echo_tool(t) for t in request.tools or ()]
        counted = usage_.usage(
            instructions=request.instructions, tools=tools, input_items=[dump(i) for i in items], output_items=[]
        )
        return {"object": "response.input_tokens", "input_tokens": counted["input_tokens"]}

    async def aclose(self) -> None:
        for task in self._background.values():
            task.cancel()
        await asyncio.gather(*self._background.values(), return_exceptions=True)

    # ---- checks ---------------------------------------------------------------------------------

    def _check_request(self, request: CreateRequest) -> None:
        if request.model is None and request.prompt is None:
            raise InvalidRequest(
                "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
            )
        if request.conversation is not None:
            if request.previous_response_id is not None:
                raise InvalidRequest(
                    "Parameters 'previous_response_id' and 'conversation' cannot be used together.",
                    param="conversation",
                )
            raise InvalidRequest(
                "The 'conversation' parameter is not supported by this emulator: continue with "
                "previous_response_id or replay the items.",
                param="conversation",
                code="unsupported_parameter",
            )
        if request.background and request.store is False:
            raise InvalidRequest("Background mode requires store=true.", param="background")
        names: set[str] = set()
        for tool in request.function_tools:
            if tool.name in names:
                raise InvalidRequest(f"Duplicate tool name: '{tool.name}'.", param="tools")
            names.add(tool.name)
        choice = request.tool_choice
        if isinstance(choice, FunctionToolChoice) and choice.name not in names:
            raise InvalidRequest(
                f"Tool choice 'function' with name '{choice.name}' not found in 'tools' parameter.",
                param="tool_choice",
            )
        if isinstance(choice, ProgrammaticToolChoice) and not request.ptc_enabled:
            raise InvalidRequest(
                "Tool choice 'programmatic_tool_calling' not found in 'tools' parameter.", param="tool_choice"
            )

    def _check_open_program(self, conv: Conversation, request: CreateRequest) -> None:
        program = conv.open_program
        assert program is not None
        seal = conv.seals[program.call_id]
        if tuple(sorted(request.programmatic_tools)) != seal.tools:
            raise InvalidRequest(
                f"The tools a program may call changed while program {program.call_id} was running: it started "
                f"with {list(seal.tools)}, this request allows {sorted(request.programmatic_tools)}.",
                param="tools",
            )
        for index, call in enumerate(conv.program_calls(program.call_id)):
            if call.call_id != self.signer.program_call_id(program.call_id, index):
                raise InvalidRequest(
                    f"Function call {call.call_id} was not issued by program {program.call_id} at this position: "
                    "replay the program's function calls unmodified and in order.",
                    param="input",
                )

    def _check_reasoning(self, conv: Conversation, script: Script) -> None:
        """Without storage, reasoning items must come back with the items they preceded."""
        reasoning = {item.id: item for item in conv.items if isinstance(item, ReasoningItem)}
        for item in reasoning.values():
            if item.encrypted_content is None or self.signer.unseal(_REASONING_DOMAIN, item.encrypted_content) is None:
                raise InvalidRequest(
                    f"The encrypted content for item {item.id} could not be verified.",
                    param="input",
                    code="invalid_encrypted_content",
                )
        for first, turn in _turn_items(conv, script):
            if turn.reasoning is None:
                continue
            required = self.signer.reasoning_id(first.call_id)
            if required not in reasoning:
                item_id = first.id or first.call_id
                raise InvalidRequest(
                    f"Item '{item_id}' of type '{first.type}' was provided without its required 'reasoning' item: "
                    f"'{required}'.",
                    param="input",
                )

    # ---- history and input ----------------------------------------------------------------------

    def _stored(self, response_id: str) -> StoredResponse:
        record = self.store.get(response_id)
        if record is None:
            raise _not_found(response_id)
        return record

    def _history(self, response_id: str) -> list[Item]:
        """The items before and of a stored response, oldest first (instructions are not carried)."""
        chain: list[StoredResponse] = []
        next_id: str | None = response_id
        while next_id is not None:
            record = self.store.get(next_id)
            if record is None:
                raise PreviousResponseNotFound(response_id)
            if record.response.get("status") not in ("completed", "incomplete"):
                raise InvalidRequest(
                    f"Previous response '{next_id}' has status '{record.response.get('status')}': only a finished "
                    "response can be continued.",
                    param="previous_response_id",
                )
            chain.append(record)
            next_id = record.previous_response_id
        items: list[Item] = []
        adapter = _input_adapter()
        for record in reversed(chain):
            for raw in [*record.input_items, *record.response["output"]]:
                items.append(adapter.validate_python(_as_input(raw), strict=False))
        return items

    def _recovered_history(self, items: list[Item]) -> list[Item]:
        """What came before replayed output items of a stored response, when the input starts there.

        A client may continue by sending a stored response's output back with its tool outputs
        and no user message (and no previous_response_id); the items' ids find the conversation.
        """
        for item in items:
            item_id = getattr(item, "id", None)
            found = self.store.item(item_id) if isinstance(item_id, str) else None
            if found is not None:
                record = self._stored(found[0])
                prefix = self._history(record.previous_response_id) if record.previous_response_id else []
                adapter = _input_adapter()
                return [*prefix, *(adapter.validate_python(_as_input(raw), strict=False) for raw in record.input_items)]
        return []

    def _input(self, request: CreateRequest | CountTokensRequest) -> list[Item]:
        if request.input is None:
            return []
        if isinstance(request.input, str):
            return [Message(role="user", content=request.input)]
        adapter = _input_adapter()
        items: list[Item] = []
        for index, item in enumerate(request.input):
            if isinstance(item, ItemReference):
                found = self.store.item(item.id)
                if found is None:
                    raise InvalidRequest(f"Item with id '{item.id}' not found.", param=f"input[{index}].id")
                try:
                    item = adapter.validate_python(_as_input(found[1]), strict=False)
                except ValidationError as e:
                    raise InvalidRequest(
                        f"Item '{item.id}' cannot be used as input here.", param=f"input[{index}].id"
                    ) from e
            items.append(item)
        return items

    # ---- the scripted model ---------------------------------------------------------------------

    def _script(self, conv: Conversation, request: CreateRequest, scope: str | None) -> Script:
        text = conv.anchor_text
        found = self.scenarios.match(
            Request(
                text=text,
                tools=frozenset(t.name for t in request.function_tools),
                ptc=request.ptc_enabled,
                model=request.model or "",
                metadata=request.metadata or {},
                scope=scope,
            )
        )
        if not isinstance(found, list):
            scenario, captures = found
            return Script(scenario.name, list(scenario.turns), {"input": text, **captures}, scenario)
        code = inline_code(text)
        if code is not None:
            return Script.inline(code)
        raise _no_match(text, found)

    async def _play(self, prepared: Prepared) -> list[dict[str, Any]]:
        conv, script, req = prepared.conversation, prepared.script, prepared.request
        produced: list[Item] = []
        out: list[dict[str, Any]] = []
        trace = prepared.trace

        def emit(item: Item) -> None:
            produced.append(item)
            out.append(dump(item))
            trace.route.append(item.type)

        index = prepared.turn
        program = conv.open_program
        if program is not None:
            # The open program belongs to the turn just before the cursor.
            turn = script.turns[index - 1]
            finished = await self._run_program(program, conv.seals[program.call_id], prepared, emit)
            if not finished or not turn.with_output:
                return out
        emitted = prepared.emitted
        while index < len(script.turns):
            turn = script.turns[index]
            context = _template_context(conv, produced)
            trace.model_turns += 1
            if turn.kind == "program":
                if not req.ptc_enabled:
                    emit(
                        self._message(
                            "Programmatic tool calling is not enabled for this request (add the "
                            "programmatic_tool_calling tool), so the program was not run."
                        )
                    )
                    return out
                code = script.code(index, context)
                program, seal = self._new_program(code, req)
                self._maybe_reasoning(turn, program.call_id, prepared, emit)
                emit(program)
                conv.seals[program.call_id] = seal
                forced = _forced_failure(prepared.fault if index == prepared.turn else None, self.limits)
                finished = await self._run_program(program, seal, prepared, emit, forced)
                if not finished or not turn.with_output:
                    return out
                index += 1
                continue
            if turn.kind == "call":
                calls = turn.calls[emitted:]
                if req.parallel_tool_calls is False:
                    calls = calls[:1]
                for n, spec in enumerate(calls):
                    self._check_direct_tool(script, index, spec.name, req)
                    call = FunctionCall(
                        id=self.ids("fc"),
                        call_id=self.ids("call"),
                        name=spec.name,
                        arguments=script.arguments(index, spec.arguments, context),
                        status="completed",
                    )
                    if n == 0:
                        self._maybe_reasoning(turn, call.call_id, prepared, emit)
                    self._check_call(next(t for t in req.function_tools if t.name == spec.name), call, prepared)
                    emit(call)
                return out
            if turn.kind in ("message", "refusal"):
                emit(self._final_message(script, index, turn, context))
                return out
            assert turn.error is not None
            e = turn.error
            raise ScriptedError(e.status, e.message, type=e.type, code=e.code, param=e.param, headers=e.headers)
        if not out:
            raise InvalidRequest(
                f"Scenario '{script.name}' has no turn left to play for this conversation.",
                param="input",
                code="scenario_exhausted",
            )
        return out

    def _final_message(self, script: Script, index: int, turn: Turn, context: dict[str, Any]) -> Message:
        program = context.get("program")
        if turn.message is not None and program is not None and program["status"] == "incomplete":
            text = f"The program did not complete: {program['result']}"
            return self._message(text)
        if turn.refusal is not None:
            return Message(
                id=self.ids("msg"),
                role="assistant",
                status="completed",
                content=[Refusal(refusal=script.text(index, turn.refusal, context))],
            )
        assert turn.message is not None
        return self._message(script.text(index, turn.message, context))

    def _message(self, text: str) -> Message:
        return Message(
            id=self.ids("msg"),
            role="assistant",
            status="completed",
            content=[OutputText(text=text, annotations=[], logprobs=[])],
        )

    def _maybe_reasoning(self, turn: Turn, anchor: str, prepared: Prepared, emit: Callable[[Item], None]) -> None:
        if turn.reasoning is None:
            return
        rid = self.signer.reasoning_id(anchor)
        include = prepared.request.include or []
        sealed = None
        if not prepared.store or "reasoning.encrypted_content" in include:
            sealed = self.signer.seal(_REASONING_DOMAIN, {"id": rid, "summary": turn.reasoning})
        emit(ReasoningItem(id=rid, summary=[SummaryText(text=turn.reasoning)], encrypted_content=sealed))

    def _check_direct_tool(self, script: Script, index: int, name: str, req: CreateRequest) -> None:
        tool = next((t for t in req.function_tools if t.name == name), None)
        if tool is None or not tool.direct:
            why = "does not declare it" if tool is None else "allows only programmatic calls to it"
            raise InvalidRequest(
                f"Scenario '{script.name}', turn {index + 1}: calls the function '{name}' directly, but the request "
                f"{why}.",
                param="tools",
                code="scenario_error",
            )

    # ---- contracts and faults -------------------------------------------------------------------

    def _check_outputs(self, conv: Conversation, request: CreateRequest) -> list[Violation]:
        tools = {t.name: t for t in request.function_tools}
        found = []
        for item in conv.items[conv.new_from :]:
            if isinstance(item, FunctionCallOutput) and item.call_id in conv.calls:
                tool = tools.get(conv.calls[item.call_id].name)
                violation = check_output(tool, item.call_id, item.output_text()) if tool else None
                if violation is not None:
                    found.append(violation)
        return found

    def _check_call(self, tool: FunctionTool, call: FunctionCall, prepared: Prepared) -> None:
        violation = check_arguments(tool, call.call_id, call.arguments)
        if violation is None:
            return
        prepared.trace.contract.append(violation)
        if prepared.strict_contract:
            raise InvalidRequest(violation.describe(), param="tools", code="contract_violation")

    def _http_fault(self, fault: Fault, trace: Trace, key: tuple[Any, ...]) -> None:
        """Answer with the fault's HTTP error for its first `times` requests in this conversation state."""
        if fault.http_error is None:
            return
        seen = self._fault_counts.get(key, 0)
        if seen >= fault.times:
            return
        self._fault_counts[key] = seen + 1
        self._fault_counts.move_to_end(key)
        while len(self._fault_counts) > 10_000:
            self._fault_counts.popitem(last=False)
        headers = {}
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
            headers["retry-after-ms"] = str(int(fault.retry_after * 1000))
        if fault.should_retry is not None:
            headers["x-should-retry"] = "true" if fault.should_retry else "false"
        status = fault.http_error
        message, type_, code = _FAULT_BODIES[status]
        trace.fault = f"http_error {status} ({seen + 1} of {fault.times})"
        raise ScriptedError(status, message, type=type_, code=code, headers=headers)

    # ---- programs -------------------------------------------------------------------------------

    def _new_program(self, code: str, req: CreateRequest) -> tuple[ProgramItem, ProgramSeal]:
        call_id = self.ids("call")
        seal = ProgramSeal(
            call_id=call_id,
            code_sha256=code_digest(code),
            seed=self.seeds(),
            clock_ms=int(self.clock() * 1000),
            tools=tuple(sorted(req.programmatic_tools)),
        )
        item = ProgramItem(id=self.ids("prog"), call_id=call_id, code=code, fingerprint=self.signer.fingerprint(seal))
        return item, seal

    async def _run_program(
        self,
        item: ProgramItem,
        seal: ProgramSeal,
        prepared: Prepared,
        emit: Callable[[Item], None],
        forced: Failed | None = None,
    ) -> bool:
        """Run or replay the program; emit its new calls or its output. True when it finished.

        `forced` is an injected fault's outcome, used instead of running the program."""
        conv, req, trace = prepared.conversation, prepared.request, prepared.trace
        journal = []
        for call in conv.program_calls(item.call_id):
            output = conv.outputs[call.call_id]
            journal.append(
                ToolResult(call.name, call.arguments, output.output_text(), is_error=output.status == "incomplete")
            )
        program = Program(
            code=item.code,
            tools=seal.tools,
            seed=seal.seed,
            clock_ms=seal.clock_ms,
            journal=tuple(journal),
            limits=self.limits,
        )
        outcome = forced or await self.runner.run(program)
        trace.programs_run += 1
        trace.images.extend(o.url for o in outcome.outputs if isinstance(o, ImageOutput))
        if isinstance(outcome, Failed) and outcome.kind == "divergence":
            raise InvalidRequest(
                f"The function_call items of program {item.call_id} do not match what the program does: a tool "
                f"name or its arguments were modified ({outcome.message}).",
                param="input",
                code="program_divergence",
            )
        if isinstance(outcome, Suspended):
            tools = {t.name: t for t in req.function_tools}
            for pending in outcome.pending:
                call = FunctionCall(
                    id=self.signer.program_call_item_id(item.call_id, pending.index),
                    call_id=self.signer.program_call_id(item.call_id, pending.index),
                    name=pending.name,
                    arguments=pending.arguments,
                    caller=ProgramCaller(caller_id=item.call_id),
                    status="completed",
                )
                self._check_call(tools[pending.name], call, prepared)
                emit(call)
            return False
        text = "\n".join(o.text for o in outcome.outputs if isinstance(o, TextOutput))
        status: Literal["completed", "incomplete"]
        if isinstance(outcome, Completed):
            status, result = "completed", text
        else:
            reason = f"{outcome.kind}: {outcome.message}"
            status, result = "incomplete", f"{text}\n{reason}" if text else reason
        emit(
            ProgramOutputItem(
                id=self.signer.program_output_id(item.call_id, status, result),
                call_id=item.call_id,
                result=result,
                status=status,
            )
        )
        return True

    # ---- background -----------------------------------------------------------------------------

    def _start_background(self, prepared: Prepared) -> dict[str, Any]:
        queued = self.response(prepared, [], status="queued")
        self.store.put(
            StoredResponse(prepared.response_id, queued, prepared.input_items, prepared.request.previous_response_id)
        )

        async def work() -> dict[str, Any]:
            try:
                return await self.complete(prepared)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a background failure is the response's own status
                message = getattr(e, "message", str(e))
                failed = self.response(
                    prepared, [], status="failed", error={"code": "server_error", "message": message}
                )
                self.store.put(
                    StoredResponse(
                        prepared.response_id, failed, prepared.input_items, prepared.request.previous_response_id
                    )
                )
                return failed
            finally:
                self._background.pop(prepared.response_id, None)

        self._background[prepared.response_id] = asyncio.ensure_future(work())
        return queued


# ---- helpers --------------------------------------------------------------------------------------


def _not_found(response_id: str) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.")


def _no_match(text: str, misses: list[NearMiss]) -> NoScenarioMatched:
    shown = text if len(text) <= 120 else text[:117] + "..."
    if misses:
        closest = "; ".join(f"'{m.scenario}': {m.reason}" for m in misses[:3])
        message = f"No scenario matches this request. Closest: {closest}."
    else:
        message = "No scenario matches this request (no scenario is loaded)."
    message += " The latest user message has no ```js code block to run inline either."
    return NoScenarioMatched(
        message, {"input": shown, "near_misses": [m.as_dict() for m in misses], "inline_code": False}
    )


def _position(conv: Conversation, script: Script) -> tuple[int, int]:
    """Where the conversation stands in the script: (next turn, direct calls emitted in it)."""
    turn, emitted = 0, 0
    for item in conv.after_anchor():
        kind = _turn_kind(item)
        if kind is None:
            continue
        expected = script.turns[turn].kind if turn < len(script.turns) else "nothing"
        if kind != expected and not (kind == "message" and expected == "refusal"):
            raise InvalidRequest(
                f"The conversation does not follow scenario '{script.name}': after the latest user message, turn "
                f"{turn + 1} should be a {expected}, but the input has a {item.type} item there.",
                param="input",
                code="scenario_mismatch",
            )
        if kind == "call":
            emitted += 1
            if emitted < len(script.turns[turn].calls):
                continue
            emitted = 0
        turn += 1
    return turn, emitted


def _turn_kind(item: Item) -> str | None:
    if isinstance(item, ProgramItem):
        return "program"
    if isinstance(item, FunctionCall) and not isinstance(item.caller, ProgramCaller):
        return "call"
    if isinstance(item, Message) and item.role == "assistant":
        return "message"
    return None


def _turn_items(conv: Conversation, script: Script) -> list[tuple[ProgramItem | FunctionCall, Turn]]:
    """The first item of each program or call turn after the anchor, with its turn."""
    found: list[tuple[ProgramItem | FunctionCall, Turn]] = []
    turn, emitted = 0, 0
    for item in conv.after_anchor():
        kind = _turn_kind(item)
        if kind is None or turn >= len(script.turns):
            continue
        if isinstance(item, ProgramItem | FunctionCall) and emitted == 0:
            found.append((item, script.turns[turn]))
        if kind == "call":
            emitted += 1
            if emitted < len(script.turns[turn].calls):
                continue
            emitted = 0
        turn += 1
    return found


_FAULT_BODIES: dict[int, tuple[str, str, str | None]] = {
    429: ("Rate limit reached for requests (injected by the scenario).", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


def _forced_failure(fault: Fault | None, limits: Limits) -> Failed | None:
    if fault is None:
        return None
    if fault.program_timeout:
        return Failed("timeout", f"program exceeded its time limit of {limits.timeout_s:g} s")
    if fault.program_incomplete is not None:
        return Failed("runtime", fault.program_incomplete)
    return None


def _describe(fault: Fault) -> str | None:
    parts = [
        f"latency {fault.latency_ms} ms" if fault.latency_ms else "",
        f"cut_stream_after {fault.cut_stream_after}" if fault.cut_stream_after is not None else "",
        "program_timeout" if fault.program_timeout else "",
        "program_incomplete" if fault.program_incomplete is not None else "",
        f"response_incomplete {fault.response_incomplete}" if fault.response_incomplete else "",
    ]
    return ", ".join(p for p in parts if p) or None


def _digest(conv: Conversation) -> str:
    """Identifies a conversation state, so a retried request is recognised as the same one."""
    data = json.dumps([dump(item) for item in conv.items], sort_keys=True)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def _is_user(item: Item) -> bool:
    return isinstance(item, Message) and item.role == "user"


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _template_context(conv: Conversation, produced: list[Item]) -> dict[str, Any]:
    items = [*conv.after_anchor(), *produced]
    program: dict[str, Any] | None = None
    for item in items:
        if isinstance(item, ProgramOutputItem):
            program = {"status": item.status, "result": item.result, "call_id": item.call_id}
    outputs: dict[str, Any] = {}
    output: Any = None
    calls = {i.call_id: i for i in items if isinstance(i, FunctionCall) and not isinstance(i.caller, ProgramCaller)}
    for item in items:
        if isinstance(item, FunctionCallOutput) and item.call_id in calls:
            output = _parse(item.output_text())
            outputs[calls[item.call_id].name] = output
    result = program["result"] if program else None
    data = _parse(result) if result is not None else None
    return {
        "result": result,
        "data": data if isinstance(data, dict | list) else None,
        "program": program,
        "output": output,
        "outputs": outputs,
    }


def _as_input(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored output item as an input item (drop output-only fields)."""
    return {k: v for k, v in raw.items() if k != "created_by"}


def _as_response_item(item: Item, ids: Callable[[str], str]) -> dict[str, Any]:
    """An input item as `input_items.list` returns it: with an id and a status."""
    data = dump(item)
    if isinstance(item, Message):
        data.setdefault("id", ids("msg"))
        if isinstance(item.content, str):
            part = "output_text" if item.role == "assistant" else "input_text"
            data["content"] = [
                {"type": part, "text": item.content, **({"annotations": []} if part == "output_text" else {})}
            ]
        data.setdefault("status", "completed")
    elif isinstance(item, FunctionCallOutput):
        data.setdefault("id", ids("fco"))
        data.setdefault("status", "completed")
    elif isinstance(item, FunctionCall):
        data.setdefault("id", ids("fc"))
        data.setdefault("status", "completed")
    return data


def _echo_tool(tool: Any) -> dict[str, Any]:
    data: dict[str, Any] = dump(tool)
    if isinstance(tool, FunctionTool):
        data.setdefault("parameters", None)
        data.setdefault("strict", True)
    return data


def _echo_choice(choice: Any) -> Any:
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    return dump(choice)
