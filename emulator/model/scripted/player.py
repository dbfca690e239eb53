"""Plays the scripted model's next step for a prepared request, running programs in the sandbox.

One response plays from where the conversation stands: it resumes the open program, if any,
then plays turns until one ends the response (a program that suspends, direct calls, a final
message, an error). The items it emits are the Response's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from ptc_emulator.emulator import jsontext
from ptc_emulator.emulator.errors import InvalidRequest, ScriptedError
from ptc_emulator.emulator.model.core import Prepared, Runner, Trace
from ptc_emulator.emulator.model.scripted.faults import forced_failure
from ptc_emulator.emulator.model.scripted.hosted import Hosted, Memo, Unscripted
from ptc_emulator.emulator.model.scripted.hosted_script import HostedScript
from ptc_emulator.emulator.model.scripted.scenario import Turn
from ptc_emulator.emulator.model.scripted.script import Script
from ptc_emulator.emulator.rules.checks import call_indexes
from ptc_emulator.emulator.rules.contract import check_call
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import REASONING_DOMAIN, ProgramSeal, Signer, code_digest
from ptc_emulator.emulator.tools.kinds import (
    FUNCTION,
    Binding,
    Unemulated,
    answer_key,
    answer_text,
    bind,
    kind_of_call,
    program_tools,
)
from ptc_emulator.emulator.tools.mcp import call_tool
from ptc_emulator.emulator.tools.toolset import NOT_LOADED, Toolset, loaded_names
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    CallItem,
    CodeInterpreterCall,
    Item,
    LocalShellCall,
    McpApprovalRequest,
    McpCall,
    McpListedTool,
    McpListTools,
    Message,
    OutputText,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ReasoningItem,
    Refusal,
    SummaryText,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    dump,
)
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.sandbox import (
    Completed,
    Failed,
    ImageOutput,
    Limits,
    Program,
    Suspended,
    TextOutput,
    ToolResult,
)

__all__ = ["Player"]

NOT_ENABLED = (
    "Programmatic tool calling is not enabled for this request (add the programmatic_tool_calling tool), so the "
    "program was not run."
)


class Player:
    def __init__(
        self,
        *,
        runner: Runner,
        signer: Signer,
        limits: Limits,
        ids: Callable[[str], str],
        seeds: Callable[[], int],
        clock: Callable[[], float],
    ) -> None:
        self.runner = runner
        self.signer = signer
        self.limits = limits
        self.ids = ids
        self.seeds = seeds
        self.clock = clock
        self.memo = Memo()

    def hosted_tools(
        self,
        request: CreateRequest,
        conv: Conversation,
        toolset: Toolset,
        script: Script,
        trace: Trace,
        registered: HostedScript | None,
    ) -> Hosted:
        """The server-side tools of a response (`registered`: results for them registered for the
        scope, used when the scenario gives none)."""
        return Hosted(
            tools=list(request.tools or ()),
            ptc=request.ptc_enabled,
            script=(script.scenario.hosted if script.scenario is not None else None) or registered,
            conversation=conv,
            signer=self.signer,
            memo=self.memo,
            available=toolset.other_available,
            calls=trace.hosted_calls,
        )

    async def play(self, prepared: Prepared) -> list[dict[str, Any]]:
        conv, script = prepared.conversation, prepared.script
        if script is None:
            return []
        out: list[dict[str, Any]] = []
        produced: list[Item] = []

        def emit(item: Item) -> None:
            produced.append(item)
            out.append(dump(item))
            prepared.trace.route.append(item.type)
            if isinstance(item, CALL_TYPES):
                route = "program" if isinstance(getattr(item, "caller", None), ProgramCaller) else "direct"
                prepared.trace.calls.append((kind_of_call(item).kind, route))
            elif isinstance(item, McpCall | CodeInterpreterCall):
                prepared.trace.calls.append(("mcp" if isinstance(item, McpCall) else "code_interpreter", "direct"))

        await self._list_mcp_tools(prepared, emit)

        index = prepared.turn
        program = conv.open_program
        if program is not None:
            finished = await self._run(program, conv.seals[program.call_id], prepared, emit)
            if not finished:
                return out
            # A program started by this script's turn before the cursor may hold the final message
            # back for a later response; one left open by an earlier exchange never does.
            if conv.open_index > conv.anchor and not script.turns[index - 1].with_output:
                return out
        while index < len(script.turns):
            if await self._turn(prepared, index, emit, produced):
                return out
            index += 1
        if not out:
            raise InvalidRequest(
                f"Scenario '{script.name}' has no turn left to play for this conversation.",
                param="input",
                code="scenario_exhausted",
            )
        return out

    async def _turn(self, prepared: Prepared, index: int, emit: Callable[[Item], None], produced: list[Item]) -> bool:
        """Play turn `index`; True when it ends the response."""
        script, req = prepared.script, prepared.request
        assert script is not None
        turn = script.turns[index]
        context = _template_context(prepared.conversation, produced)
        await script.prerender(index, context)  # templates render off the event loop
        prepared.trace.model_turns += 1
        if turn.program is not None:
            if not req.ptc_enabled:
                emit(self._message(NOT_ENABLED))
                return True
            program, seal = await self._new_program(script.code(index, context), prepared)
            self._reasoning(turn, program.call_id, prepared, emit)
            emit(program)
            prepared.conversation.seals[program.call_id] = seal
            forced = forced_failure(prepared.fault if index == prepared.turn else None, self.limits)
            finished = await self._run(program, seal, prepared, emit, forced)
            return not finished or not turn.with_output
        if turn.call is not None:
            calls = turn.calls[prepared.emitted if index == prepared.turn else 0 :]
            if req.parallel_tool_calls is False:
                calls = calls[:1]
            bindings = bind(req, prepared.toolset)
            for n, spec in enumerate(calls):
                binding = _direct_tool(script, index, spec.name, bindings, prepared.toolset)
                if binding.kind.text_argument:
                    if spec.input is None:
                        raise script.error(index, f"the custom tool '{spec.name}' takes `input` (a string)")
                    arguments = json.dumps(script.text(index, spec.input, context), ensure_ascii=False)
                else:
                    arguments = script.arguments(index, spec.arguments, context)
                problem = binding.kind.check(binding, json.loads(arguments))
                if problem is not None:
                    raise script.error(index, problem)
                call = binding.kind.call_item(
                    binding, arguments, call_id=self.ids("call"), item_id=self.ids(binding.kind.id_prefix), caller=None
                )
                if n == 0:
                    self._reasoning(turn, call.call_id, prepared, emit)
                _check_call(binding, call, prepared)
                emit(call)
            return True
        if turn.search is not None:
            return self._search(prepared, index, context, emit)
        if turn.mcp is not None:
            return await self._direct_mcp(prepared, index, context, emit)
        if turn.code_interpreter is not None:
            self._direct_code_interpreter(prepared, index, context, emit)
            return False
        if turn.error is not None:
            e = turn.error
            raise ScriptedError(e.status, e.message, type=e.type, code=e.code, param=e.param, headers=e.headers)
        emit(self._final_message(script, index, turn, context))
        return True

    async def _direct_mcp(
        self, prepared: Prepared, index: int, context: dict[str, Any], emit: Callable[[Item], None]
    ) -> bool:
        """A scenario's direct MCP call: made here and emitted as `mcp_call`, or first paused on an
        `mcp_approval_request`. True when it ends the response."""
        script, hosted = prepared.script, _hosted(prepared)
        assert script is not None
        spec = script.turns[index].mcp
        assert spec is not None
        tool = hosted.mcp_tools.get(spec.server_label)
        if tool is None or not tool.direct:
            why = "does not declare it" if tool is None else "allows only programmatic calls to it"
            raise script.error(index, f"calls the MCP server '{spec.server_label}' directly, but the request {why}")
        listing = await hosted.listing(tool)
        if spec.name not in {entry["name"] for entry in listing.tools}:
            raise script.error(
                index,
                f"calls '{spec.name}', which MCP server '{spec.server_label}' does not list (or allowed_tools hides)",
            )
        arguments = script.arguments(index, spec.arguments, context)
        approval_id = None
        if tool.needs_approval(spec.name, spec.name in listing.read_only):
            conv = prepared.conversation
            asked = [i for i in conv.after_anchor() if isinstance(i, McpApprovalRequest) and i.caller is None]
            if not asked or asked[-1].id not in conv.approval_responses:
                emit(
                    McpApprovalRequest(
                        id=self.ids("mcpr"), name=spec.name, server_label=spec.server_label, arguments=arguments
                    )
                )
                return True
            approval_id = asked[-1].id
            answer = conv.approval_responses[approval_id]
            if not answer.approve:
                prepared.trace.hosted_calls.append(
                    {
                        "kind": "mcp",
                        "route": "direct",
                        "server_label": spec.server_label,
                        "name": spec.name,
                        "status": "denied",
                        "approval_request_id": approval_id,
                    }
                )
                return False
        result = await call_tool(tool, hosted.declared(spec.server_label), spec.name, _parse(arguments) or {})
        if not result.scripted:
            raise script.error(
                index,
                f"the declared MCP server '{spec.server_label}' has no result for {spec.name}({arguments})",
            )
        emit(
            McpCall(
                id=self.ids("mcp"),
                name=spec.name,
                server_label=spec.server_label,
                arguments=arguments,
                output=result.output,
                error=result.error,
                status="failed" if result.error else "completed",
                approval_request_id=approval_id,
            )
        )
        return False

    def _direct_code_interpreter(
        self, prepared: Prepared, index: int, context: dict[str, Any], emit: Callable[[Item], None]
    ) -> None:
        script, hosted = prepared.script, _hosted(prepared)
        assert script is not None
        spec = script.turns[index].code_interpreter
        assert spec is not None
        tool = hosted.code_interpreter
        if tool is None or not tool.direct:
            why = "does not declare it" if tool is None else "allows only programmatic calls to it"
            raise script.error(index, f"calls the code interpreter directly, but the request {why}")
        code = script.text(index, spec.code, context)
        found = hosted.code_result(code)
        if found is None:
            raise script.error(
                index,
                "calls the code interpreter, and no entry of the scenario's hosted.code_interpreter matches its code",
            )
        outputs = found.all_outputs()
        included = "code_interpreter_call.outputs" in (prepared.request.include or [])
        emit(
            CodeInterpreterCall(
                id=self.ids("ci"),
                container_id=tool.container_id,
                code=code,
                outputs=outputs if included else None,
                status="failed" if found.error else "completed",
            )
        )

    def _final_message(self, script: Script, index: int, turn: Turn, context: dict[str, Any]) -> Message:
        program = context.get("program")
        if turn.message is not None and program is not None and program["status"] == "incomplete":
            return self._message(f"The program did not complete: {program['result']}")
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

    def _reasoning(self, turn: Turn, anchor: str, prepared: Prepared, emit: Callable[[Item], None]) -> None:
        if turn.reasoning is None:
            return
        rid = self.signer.reasoning_id(anchor)
        sealed = None
        if not prepared.store or "reasoning.encrypted_content" in (prepared.request.include or []):
            sealed = self.signer.seal(REASONING_DOMAIN, {"id": rid, "summary": turn.reasoning})
        emit(ReasoningItem(id=rid, summary=[SummaryText(text=turn.reasoning)], encrypted_content=sealed))

    # ---- tool search ----------------------------------------------------------------------------

    def _search(self, prepared: Prepared, index: int, context: dict[str, Any], emit: Callable[[Item], None]) -> bool:
        """A search turn: the call, then (server execution) its output and the turns after it, or
        (client execution) the end of the response. True when it ends the response."""
        script, toolset = prepared.script, prepared.toolset
        assert script is not None
        turn = script.turns[index]
        spec = turn.search
        assert spec is not None
        query = script.text(index, spec.query, context) if spec.query is not None else None
        given = json.loads(script.arguments(index, spec.arguments, context)) if spec.arguments is not None else None
        arguments = toolset.search_arguments(
            spec.load, query, given, where=f"Scenario '{script.name}', turn {index + 1}"
        )
        execution = toolset.execution
        call_id = self.ids("call")
        self._reasoning(turn, call_id, prepared, emit)
        emit(
            ToolSearchCallItem(
                id=self.ids("tsc"), call_id=call_id, arguments=arguments, execution=execution, status="completed"
            )
        )
        if execution == "client":
            return True
        names = spec.load if spec.load is not None else toolset.search(query or "", spec.limit)
        tools = toolset.definitions(names)
        toolset.load(tools, execution="server")
        output_id = self.ids("tso")
        emit(ToolSearchOutputItem(id=output_id, call_id=call_id, execution="server", status="completed", tools=tools))
        return False

    # ---- programs -------------------------------------------------------------------------------

    async def _list_mcp_tools(self, prepared: Prepared, emit: Callable[[Item], None]) -> None:
        """An `mcp_list_tools` item per MCP server, once per conversation, as the hosted API does.

        A server whose tools only programs may call is listed inside the runtime instead: the
        Runner judges an item without a caller as direct (contract §12)."""
        hosted = _hosted(prepared)
        listed = {i.server_label for i in prepared.conversation.items if isinstance(i, McpListTools)}
        for label, tool in hosted.mcp_tools.items():
            if label in listed or not tool.direct:
                continue
            listing = await hosted.listing(tool)
            emit(
                McpListTools(
                    id=self.ids("mcpl"),
                    server_label=label,
                    tools=[McpListedTool.model_validate(entry) for entry in listing.tools],
                )
            )

    def answers(self, item: ProgramItem, conv: Conversation) -> dict[int, ToolResult]:
        """The client's answers to the program's calls, by each call's position in issue order."""
        calls = conv.program_calls(item.call_id)
        known: dict[int, ToolResult] = {}
        for index, call in zip(call_indexes(self.signer, item, calls, self.limits.max_tool_calls), calls, strict=True):
            kind = kind_of_call(call)
            text, is_error = kind.result(conv.outputs[call.call_id])
            known[index] = ToolResult(kind.call_name(call), kind.arguments(call), text, is_error=is_error)
        return known

    async def _settle(
        self,
        item: ProgramItem,
        outcome: Suspended,
        known: dict[int, ToolResult],
        answered: dict[int, ToolResult],
        bindings: dict[str, Binding],
        hosted: Hosted,
        settled: list[tuple[int, str]],
    ) -> tuple[list[McpApprovalRequest], str | None]:
        """Answer what needs no client among the calls the program waits on: the server-run ones
        (into the runtime record) and those whose arguments a kind refuses (into `answered`; the
        promise rejects; `settled` gets their (position, kind)). Returns the approval requests to
        surface, and why the program must stop."""
        for pending in outcome.pending:
            binding = bindings.get(pending.name)
            if binding is not None and isinstance(binding.kind, Unemulated):
                return [], binding.kind.message(pending.name)
        approvals: list[McpApprovalRequest] = []
        for pending in outcome.pending:
            if pending.index in known:
                continue
            if hosted.owns(pending.name):
                answer = await hosted.resolve(item.call_id, pending)
                if isinstance(answer, McpApprovalRequest):
                    approvals.append(answer)
                elif isinstance(answer, Unscripted):
                    return [], f"unscripted: {answer.message}"
                continue
            binding = _bound(bindings, pending.name)
            problem = binding.kind.check(binding, json.loads(pending.arguments))
            if problem is not None:
                answered[pending.index] = ToolResult(pending.name, pending.arguments, problem, is_error=True)
                settled.append((pending.index, binding.kind.kind))
        return approvals, None

    async def _new_program(self, code: str, prepared: Prepared) -> tuple[ProgramItem, ProgramSeal]:
        call_id = self.ids("call")
        hosted = await _hosted(prepared).program_names()
        seal = ProgramSeal(
            call_id=call_id,
            code_sha256=code_digest(code),
            seed=self.seeds(),
            clock_ms=int(self.clock() * 1000),
            tools=tuple(sorted({*program_tools(prepared.request, prepared.toolset), *hosted})),
        )
        item = ProgramItem(id=self.ids("prog"), call_id=call_id, code=code, fingerprint=self.signer.issue(seal, code))
        return item, seal

    async def _run(
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
        bindings = bind(req, prepared.toolset)
        hosted = _hosted(prepared)
        answered = self.answers(item, conv)
        seen = max(answered, default=-1)
        settled: list[tuple[int, str]] = []
        stopped: str | None = None
        approvals: list[McpApprovalRequest] = []
        while True:
            known = {**hosted.record(item.call_id), **answered}
            journal = _prefix(known)
            program = Program(
                code=item.code,
                tools=seal.tools,
                seed=seal.seed,
                clock_ms=seal.clock_ms,
                journal=tuple(journal),
                limits=self.limits,
                text_tools=tuple(n for n in seal.tools if n in bindings and bindings[n].kind.text_argument),
            )
            outcome = forced or await self.runner.run(program)
            if isinstance(outcome, Failed) and outcome.kind == "divergence":
                raise InvalidRequest(
                    f"The function_call items of program {item.call_id} do not match what the program does: a tool "
                    f"name or its arguments were modified ({outcome.message}).",
                    param="input",
                    code="program_divergence",
                )
            if not isinstance(outcome, Suspended) or forced is not None:
                break
            approvals, stopped = await self._settle(item, outcome, known, answered, bindings, hosted, settled)
            if stopped is not None or len(_prefix({**hosted.record(item.call_id), **answered})) == len(journal):
                break
        trace.programs_run += 1
        # Calls before the last one the client answered were settled, and counted, in an earlier response.
        trace.calls.extend((kind, "program") for index, kind in settled if index > seen)
        trace.images.extend(o.url for o in outcome.outputs if isinstance(o, ImageOutput))
        unused = sorted(i for i in answered if i >= len(journal))
        if unused and (not isinstance(outcome, Suspended) or stopped is not None):
            raise InvalidRequest(
                f"The tool call items of program {item.call_id} do not match what the program does: the input "
                f"answers {len(answered)} of its calls, but the program made only {len(journal)} before it ended.",
                param="input",
                code="program_divergence",
            )
        if isinstance(outcome, Suspended) and stopped is None:
            state = hosted.state_item(item.call_id)
            if state is not None:
                emit(state)
            for approval in approvals:
                emit(approval)
            known = {**hosted.record(item.call_id), **answered}
            for pending in outcome.pending:
                if pending.index in known or hosted.owns(pending.name):
                    continue  # answered, or answered by the server once the calls before it are
                binding = _bound(bindings, pending.name)
                if binding.kind.owner == "server":
                    continue
                call = binding.kind.call_item(
                    binding,
                    pending.arguments,
                    call_id=self.signer.program_call_id(item.call_id, pending.index),
                    item_id=self.signer.program_call_item_id(item.call_id, pending.index, binding.kind.id_prefix),
                    caller=ProgramCaller(caller_id=item.call_id),
                )
                _check_call(binding, call, prepared)
                emit(call)
            return False
        text = "\n".join(o.text for o in outcome.outputs if isinstance(o, TextOutput))
        status: Literal["completed", "incomplete"]
        if stopped is not None:
            status, result = "incomplete", f"{text}\n{stopped}" if text else stopped
        elif isinstance(outcome, Completed):
            status, result = "completed", text
        else:
            assert isinstance(outcome, Failed)
            reason = f"{outcome.kind}: {outcome.message}"
            status, result = "incomplete", f"{text}\n{reason}" if text else reason
        self._program_output(item, status, result, emit)
        return True

    def _program_output(
        self,
        item: ProgramItem,
        status: Literal["completed", "incomplete"],
        result: str,
        emit: Callable[[Item], None],
    ) -> None:
        emit(
            ProgramOutputItem(
                id=self.signer.program_output_id(item.call_id, status, result),
                call_id=item.call_id,
                result=result,
                status=status,
            )
        )


def _prefix(known: dict[int, ToolResult]) -> list[ToolResult]:
    """The known results of the program's calls from the first, up to the first it lacks: a journal
    answers calls in issue order."""
    journal: list[ToolResult] = []
    while len(journal) in known:
        journal.append(known[len(journal)])
    return journal


def _direct_tool(script: Script, index: int, name: str, bindings: dict[str, Binding], toolset: Toolset) -> Binding:
    binding = bindings.get(name)
    if binding is None or not binding.direct:
        if binding is None and toolset.not_loaded(name):
            why = f"declares it with defer_loading: true and no tool search has loaded it ({NOT_LOADED})"
        elif binding is None:
            why = "does not declare it"
        else:
            why = "allows only programmatic calls to it"
        what = (
            f"the {binding.kind.kind} tool"
            if binding is not None and binding.kind.kind != "function"
            else "the function"
        )
        raise InvalidRequest(
            f"Scenario '{script.name}', turn {index + 1}: calls {what} '{name}' directly, but the request {why}.",
            param="tools",
            code="scenario_error",
        )
    if isinstance(binding.kind, Unemulated):
        raise InvalidRequest(
            f"Scenario '{script.name}', turn {index + 1}: calls '{name}', {binding.kind.why}; script its "
            "result as a message instead.",
            param="tools",
            code="scenario_error",
        )
    if binding.kind.owner == "server":
        raise InvalidRequest(
            f"Scenario '{script.name}', turn {index + 1}: calls '{name}', which runs on the server's side: use a "
            f"`{binding.kind.kind}:` turn instead of `call`"
            + (" (a hosted shell is scripted under hosted.shell and called by programs)." if name == "shell" else "."),
            param="tools",
            code="scenario_error",
        )
    return binding


def _bound(bindings: dict[str, Binding], name: str) -> Binding:
    """A sealed tool name's binding; a function the program was started with is callable even if
    this request no longer lists it (the open program's tools were checked against the request's)."""
    return bindings.get(name) or Binding(name, FUNCTION, None, True, False)


def _check_call(binding: Binding, call: CallItem, prepared: Prepared) -> None:
    violation = check_call(binding.tool, call)
    if violation is None:
        return
    prepared.trace.contract.append(violation)
    if prepared.strict_contract:
        raise InvalidRequest(violation.describe(), param="tools", code="contract_violation")


def _parse(text: str) -> Any:
    try:
        return jsontext.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _template_context(conv: Conversation, produced: list[Item]) -> dict[str, Any]:
    """What a turn's templates see besides the captures (see `script.py`)."""
    items = [*conv.after_anchor(), *produced]
    program: dict[str, Any] | None = None
    for item in items:
        if isinstance(item, ProgramOutputItem):
            program = {"status": item.status, "result": item.result, "call_id": item.call_id}
    outputs: dict[str, Any] = {}
    output: Any = None
    calls: dict[str, CallItem] = {}
    for i in items:
        if isinstance(i, CALL_TYPES) and not isinstance(getattr(i, "caller", None), ProgramCaller):
            calls[i.call_id] = i
            if isinstance(i, LocalShellCall):
                calls[i.id] = i  # its output may name it by item id
    for item in items:
        if isinstance(item, OUTPUT_TYPES):
            call = calls.get(answer_key(item) or "")
            if call is not None:
                output = _parse(answer_text(item))
                outputs[kind_of_call(call).call_name(call)] = output
        elif isinstance(item, McpCall) and item.caller is None:
            output = _parse(item.output or "") if item.error is None else {"error": item.error}
            outputs[item.name] = output
    result = program["result"] if program else None
    data = _parse(result) if result is not None else None
    searched = [i for i in items if isinstance(i, ToolSearchOutputItem)]
    return {
        "loaded": loaded_names(searched[-1].tools) if searched else [],
        "result": result,
        "data": data if isinstance(data, dict | list) else None,
        "program": program,
        "output": output,
        "outputs": outputs,
    }


def _hosted(prepared: Prepared) -> Hosted:
    assert prepared.hosted is not None, "a response that plays has its server-side tools"
    return prepared.hosted
