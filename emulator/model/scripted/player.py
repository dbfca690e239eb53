"""Plays the scripted model's next step for a prepared request, its programs on the runtime.

One response plays from where the conversation stands: it resumes the open program, if any,
then plays turns until one ends the response (a program that suspends, direct calls, a final
message, an error). The items it emits are the Response's output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ptc_emulator.emulator import jsontext, messages
from ptc_emulator.emulator.errors import ScriptedError
from ptc_emulator.emulator.model.core import Prepared, Runner
from ptc_emulator.emulator.model.runtime import HiddenResults, HostedPatternTooCostly, Output, Runtime
from ptc_emulator.emulator.model.scripted.faults import forced_failure
from ptc_emulator.emulator.model.scripted.scenario import Turn
from ptc_emulator.emulator.model.scripted.script import Script, scripted_plan
from ptc_emulator.emulator.model.scripted.shell import shell_turn
from ptc_emulator.emulator.model.scripted.walk import turn_request
from ptc_emulator.emulator.rules import contract
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import REASONING_DOMAIN
from ptc_emulator.emulator.tools.kinds import (
    Binding,
    Unemulated,
    answer_key,
    answer_text,
    kind_of_call,
)
from ptc_emulator.emulator.tools.mcp import CallResult, call_tool
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
    Message,
    OutputText,
    ProgramCaller,
    ProgramOutputItem,
    ReasoningItem,
    Refusal,
    SummaryText,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)
from ptc_emulator.sandbox import ToolResult

__all__ = ["SERVER_TURNS", "Player"]

NOT_ENABLED = (
    "Programmatic tool calling is not enabled for this request (add the programmatic_tool_calling tool), so the "
    "program was not run."
)


class Player:
    def __init__(self, runtime: Runtime) -> None:
        """Plays the turns; `runtime` starts and runs their programs (and has the signer, the
        limits and the id source both use)."""
        self.runtime = runtime
        self.signer = runtime.signer
        self.limits = runtime.limits
        self.ids = runtime.ids

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        """The output of the response the scripted model planned for `prepared` (see the module)."""
        plan = scripted_plan(prepared)
        conv, script, runtime = prepared.conversation, plan.script, self.runtime
        output = Output(prepared.trace)
        emit = output.emit
        await runtime.list_mcp_tools(prepared, output)
        index = plan.turn
        resumed = await runtime.resume(prepared, runner, emit)
        if resumed is False:
            return output.dumped
        # A program started by this script's turn before the cursor may hold the final message
        # back for a later response; one left open by an earlier exchange never does.
        if resumed and conv.open_index > conv.anchor and not script.turns[index - 1].with_output:
            return output.dumped
        while index < len(script.turns):
            if await self._turn(prepared, runner, index, emit, output.items):
                return output.dumped
            index += 1
        if not output.dumped:
            raise messages.scenario_exhausted(script.name)
        return output.dumped

    async def _turn(
        self, prepared: Prepared, runner: Runner, index: int, emit: Callable[[Item], None], produced: list[Item]
    ) -> bool:
        """Play turn `index`; True when it ends the response."""
        plan, req = scripted_plan(prepared), prepared.request
        script = plan.script
        turn = script.turns[index]
        conv = prepared.conversation
        # made, and the templates rendered, off the event loop
        context = await script.prerender(
            index, lambda: _template_context(conv, produced), heavy=_heavy_context(conv, produced)
        )
        prepared.trace.model_turns += 1
        if turn.program is not None:
            if not req.ptc_enabled:
                emit(self._message(NOT_ENABLED))
                return True
            preamble = self._preamble(script, index, turn, context)
            program, seal = await self.runtime.start(script.code(index, context), prepared)
            self._reasoning(turn, program.call_id, prepared, emit)
            if preamble is not None:
                emit(preamble)
            emit(program)
            prepared.conversation.seals[program.call_id] = seal
            forced = forced_failure(plan.fault if index == plan.turn else None, self.limits)
            finished = await self.runtime.run(program, seal, prepared, runner, emit, forced)
            return not finished or not turn.with_output
        if turn.call is not None:
            start = plan.emitted if index == plan.turn else 0
            calls = turn.calls[start:]
            # said once, before the turn's first call (a turn played a call a response says it then)
            preamble = self._preamble(script, index, turn, context) if start == 0 else None
            if req.parallel_tool_calls is False:
                calls = calls[:1]
            bindings = plan.tools.bindings
            for n, spec in enumerate(calls):
                binding = _direct_tool(script, index, spec.name, bindings, prepared.toolset)
                if binding.kind.text_argument:
                    if spec.input is None:
                        raise script.error(index, messages.custom_takes_input(spec.name))
                    arguments = json.dumps(script.text(index, spec.input, context), ensure_ascii=False)
                else:
                    arguments = script.arguments(index, spec.arguments, context)
                problem = binding.kind.check(binding, json.loads(arguments))
                if problem is not None:
                    raise script.error(index, problem)
                call = binding.kind.call_item(
                    binding, arguments, call_id=self.ids("call"), item_id=self.ids(binding.kind.id_prefix), caller=None
                )
                await self.runtime.check_call(binding, call, prepared)
                if n == 0:
                    self._reasoning(turn, call.call_id, prepared, emit)
                    if preamble is not None:
                        emit(preamble)
                emit(call)
            return True
        if turn.search is not None:
            return self._search(prepared, index, context, emit)
        if turn.mcp is not None:
            return await self._direct_mcp(prepared, index, context, emit)
        if turn.code_interpreter is not None:
            await self._direct_code_interpreter(prepared, index, context, emit)
            return False
        if turn.shell is not None:  # run by the server: the model goes on
            call, output = await shell_turn(prepared, index, context, self.ids)
            scripted_plan(prepared).hosted.count(output)
            self._reasoning(turn, call.call_id, prepared, emit)
            emit(call)
            emit(output)
            return False
        if turn.error is not None:
            e = turn.error
            raise ScriptedError(e.status, e.message, type=e.type, code=e.code, param=e.param, headers=e.headers)
        message = self._final_message(script, index, turn, context)
        self._reasoning(turn, message.id or "", prepared, emit)
        emit(message)
        return True

    async def _direct_mcp(
        self, prepared: Prepared, index: int, context: dict[str, Any], emit: Callable[[Item], None]
    ) -> bool:
        """A scenario's direct MCP call: made here and emitted as `mcp_call`, or first paused on an
        `mcp_approval_request`. True when it ends the response."""
        plan = scripted_plan(prepared)
        script, hosted = plan.script, plan.hosted
        spec = script.turns[index].mcp
        assert spec is not None
        tool = hosted.mcp_tools.get(spec.server_label)
        if tool is None or not tool.direct:
            why = messages.undeclared() if tool is None else messages.programmatic_only()
            raise script.error(index, messages.mcp_called_directly(spec.server_label, why))
        listing = await hosted.listing(tool)
        if spec.name not in {entry["name"] for entry in listing.tools}:
            raise script.error(index, messages.mcp_tool_not_listed(spec.name, spec.server_label))
        arguments = script.arguments(index, spec.arguments, context)
        approval_id = None
        if tool.needs_approval(spec.name, spec.name in listing.read_only):
            conv = prepared.conversation
            asked = turn_request(conv, script, index)  # this turn's own, never an earlier turn's
            if asked is None or asked.id not in conv.approval_responses:
                request_id = self.signer.direct_mcp_approval_id(spec.server_label, spec.name, arguments)
                self._reasoning(script.turns[index], request_id, prepared, emit)  # the turn's first item
                emit(
                    McpApprovalRequest(
                        id=request_id, name=spec.name, server_label=spec.server_label, arguments=arguments
                    )
                )
                return True
            approval_id = asked.id
            hosted.check_replayed(approval_id, spec.server_label, spec.name, arguments)
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

        async def make() -> CallResult:
            return await call_tool(
                tool,
                hosted.declared(spec.server_label),
                spec.name,
                _parse(arguments) or {},
                hosted.policy,
                client=hosted.client,
            )

        if approval_id is None:
            result = await make()
        else:  # an approved call runs once for its request, however often its approval is sent
            result = await _approved_once(hosted.hidden_results, hosted.client, approval_id, spec.name, arguments, make)
        if not result.scripted:
            raise script.error(index, messages.mcp_no_result(spec.server_label, spec.name, arguments))
        call_id = self.ids("mcp")
        if approval_id is None:  # after an approval, the turn's reasoning came with its request
            self._reasoning(script.turns[index], call_id, prepared, emit)
        call = McpCall(
            id=call_id,
            name=spec.name,
            server_label=spec.server_label,
            arguments=arguments,
            output=result.output,
            error=result.error,
            status="failed" if result.error else "completed",
            approval_request_id=approval_id,
        )
        too_large = hosted.carry(call)
        if too_large is not None:  # more than a store: false client could send back: answered failed
            error = {"type": "http_error", "code": 502, "message": too_large}
            call = call.model_copy(update={"output": None, "error": error, "status": "failed"})
            hosted.count(call)
        emit(call)
        return False

    async def _direct_code_interpreter(
        self, prepared: Prepared, index: int, context: dict[str, Any], emit: Callable[[Item], None]
    ) -> None:
        plan = scripted_plan(prepared)
        script, hosted = plan.script, plan.hosted
        spec = script.turns[index].code_interpreter
        assert spec is not None
        tool = hosted.code_interpreter
        if tool is None or not tool.direct:
            why = messages.undeclared() if tool is None else messages.programmatic_only()
            raise script.error(index, messages.interpreter_called_directly(why))
        code = script.text(index, spec.code, context)
        try:
            found = await hosted.code_result_off_loop(code)
        except HostedPatternTooCostly as e:
            raise script.error(index, e.reason) from None
        if found is None:
            raise script.error(index, messages.interpreter_unscripted())
        outputs = found.all_outputs()
        included = "code_interpreter_call.outputs" in (prepared.request.include or [])
        item_id = self.ids("ci")
        self._reasoning(script.turns[index], item_id, prepared, emit)
        call = CodeInterpreterCall(
            id=item_id,
            container_id=tool.container_id,
            code=code,
            outputs=outputs if included else None,
            status="failed" if found.error else "completed",
        )
        hosted.count(call)
        emit(call)

    def _final_message(self, script: Script, index: int, turn: Turn, context: dict[str, Any]) -> Message:
        program = context.get("program")
        if turn.message is not None and program is not None and program["status"] == "incomplete":
            if turn.on_program_error is not None:  # the scenario's own answer to the failure
                return self._message(script.text(index, turn.on_program_error, context))
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

    def _preamble(self, script: Script, index: int, turn: Turn, context: dict[str, Any]) -> Message | None:
        """The message a call or program turn says before its call(s) or program, in the same
        response: an intermediate message, `phase: commentary`, as the hosted API marks one (and
        the model upstream marks a message said with calls)."""
        if turn.preamble is None:
            return None
        message = self._message(script.text(index, turn.preamble, context))
        message.phase = "commentary"
        return message

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
        script, toolset = scripted_plan(prepared).script, prepared.toolset
        turn = script.turns[index]
        spec = turn.search
        assert spec is not None
        query = script.text(index, spec.query, context) if spec.query is not None else None
        given = json.loads(script.arguments(index, spec.arguments, context)) if spec.arguments is not None else None
        arguments = toolset.search_arguments(spec.load, query, given, scenario=script.name, turn=index)
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
        scripted_plan(prepared).tools.rebind()
        output_id = self.ids("tso")
        emit(ToolSearchOutputItem(id=output_id, call_id=call_id, execution="server", status="completed", tools=tools))
        return False


def _direct_tool(script: Script, index: int, name: str, bindings: dict[str, Binding], toolset: Toolset) -> Binding:
    binding = bindings.get(name)
    if binding is None or not binding.direct:
        if binding is None and toolset.not_loaded(name):
            why = messages.not_loaded_yet(NOT_LOADED)
        elif binding is None:
            why = messages.undeclared()
        else:
            why = messages.programmatic_only()
        kind = binding.kind.kind if binding is not None else "function"
        raise messages.scenario_calls_directly(script.name, index, kind, name, why)
    if isinstance(binding.kind, Unemulated):
        raise messages.scenario_calls_unemulated(script.name, index, name, binding.kind.why)
    if binding.kind.owner == "server":
        turn = SERVER_TURNS[binding.kind.kind]
        raise messages.scenario_calls_server_tool(script.name, index, name, binding.kind.kind, turn)
    return binding


async def _approved_once(
    kept: HiddenResults,
    scope: str,
    approval_id: str,
    name: str,
    arguments: str,
    make: Callable[[], Awaitable[CallResult]],
) -> CallResult:
    """A direct call approved by `approval_id`: the result this process has kept for it, or the one
    call in flight for it, shared by the requests that carry the approval at once (sent together
    on a conversation, from one `previous_response_id`, or as `store: false` replays; the code
    before called the server once for each, the refused ones included). Its id is issued once by
    the server (a nonce and a MAC), so it names the one call; the result is kept as the program
    path's are (`HiddenResults`), its output and error as JSON."""
    key = "direct:" + approval_id
    found = kept.get(key)
    if found is None:
        return await kept.once(key, make, lambda made: _keepable(name, arguments, made), scope)
    saved = json.loads(found.output)
    return CallResult(output=saved["output"], error=saved["error"])


def _keepable(name: str, arguments: str, result: CallResult) -> ToolResult | None:
    if not result.scripted:
        return None
    return ToolResult(name, arguments, json.dumps({"output": result.output, "error": result.error}))


SERVER_TURNS = {"code_interpreter": "code_interpreter", "mcp": "mcp", "tool_search": "search", "shell": "shell"}
"""The scenario turn that makes each server-side kind's direct call (every one is in `scenario.KINDS`)."""


def _parse(text: str) -> Any:
    """A tool output or a program's result as the templates see it: its JSON value, or the text
    itself when it is not JSON (an integer of over 4300 digits is not one to Python's parser:
    a ValueError, not a JSONDecodeError). JSON may escape a lone surrogate (`"\\ud800"`), which
    would be rendered into a message no client can be sent: each reaches the templates as U+FFFD,
    as a program's output does."""
    try:
        value = jsontext.loads(text)
    except (ValueError, RecursionError, TypeError):
        return text
    return _well_formed(value) if _ESCAPED_SURROGATE.search(text) else value


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced by U+FFFD (`json`
    joins an escaped pair into one character, so any surrogate left stands alone)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_well_formed(v) for v in value]
    if isinstance(value, dict):
        return {_well_formed(k): _well_formed(v) for k, v in value.items()}
    return value


_PART_CHARS = 16
"""What a content part of a tool output weighs in `_heavy_context` (the smallest is 21 bytes)."""


def _heavy_context(conv: Conversation, produced: list[Item]) -> bool:
    """Whether the texts `_template_context` reads (tool outputs, an MCP call's output, a program's
    result) come to `contract.OFF_LOOP_CHARS` or more: it parses each as JSON and makes a parts
    output into text, so it is made in a worker thread (`Script.prerender`)."""
    size = 0
    for item in (*conv.after_anchor(), *produced):
        for value in (getattr(item, "output", None), getattr(item, "result", None)):
            if isinstance(value, str):
                size += len(value)
            elif isinstance(value, list):
                size += _PART_CHARS * len(value)
    return size >= contract.OFF_LOOP_CHARS


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
