"""The PTC runtime: what every model calls to run a response's programs.

`Runtime` is the one face the models use (the scripted model and the model upstream alike), in
the order a response meets it:

    planning, before anything plays (every 400 comes from here, before a streamed reply starts)
        hosted(...)         the response's server-side tools (`hosted.py`)
        check(...)          the open program's calls against the tools it may call (their
                            positions), and the finished programs' seals
    playing
        list_mcp_tools(...) an `mcp_list_tools` item per MCP server the conversation has not listed
        resume(...)         the open program, continued from the client's answers
        start(...)          a new program item, sealed
        run(...)            run or replay a program; between suspensions, settle the calls that
                            need no client (the server-run ones, and those a kind refuses)
        check_call(...)     a call item the model makes, against its tool's schema

A program resumes by replay: the client's answers to its calls (and the server's answers to the
hosted calls, carried sealed in the response) form a journal in issue order, and the program runs
again from the start against it until it suspends on calls nobody has answered yet, or ends.
`Output` collects what a response emits, in order.
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.history.cursor import ENTRIES, Entries
from ptc_emulator.emulator.jsonpieces import between
from ptc_emulator.emulator.model.core import Live, Prepared, Runner, Trace
from ptc_emulator.emulator.model.runtime.hidden_results import HiddenResults
from ptc_emulator.emulator.model.runtime.hosted import Hosted, HostedBudget, HostedScript, OutOfTime, Unscripted
from ptc_emulator.emulator.model.runtime.plan import BoundTools, plan_of
from ptc_emulator.emulator.rules import checks, contract
from ptc_emulator.emulator.rules.checks import call_indexes
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import ProgramSeal, Signer, code_digest
from ptc_emulator.emulator.tools.kinds import FUNCTION, Binding, Unemulated, kind_of_call
from ptc_emulator.emulator.tools.mcp import McpPolicy
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    CallItem,
    CodeInterpreterCall,
    CustomToolCallOutput,
    FunctionCallOutput,
    Item,
    McpApprovalRequest,
    McpCall,
    McpListedTool,
    McpListTools,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ReasoningItem,
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

__all__ = ["Output", "Runtime"]

_CALL_ID = operator.attrgetter("call_id")

OFF_LOOP_PARTS = 4096
"""The program's answers given as content parts, this many parts together or more, are made into
their text (`output_text`, kept on each answer) in a worker thread before the program reads them."""


async def held_texts(item: ProgramItem, conv: Conversation) -> None:
    """Have the text of the program's answers made of content parts made and kept, in a worker
    thread when they hold `OFF_LOOP_PARTS` parts or more (700,000 of them took over a second on
    the event loop); `answers` then reads the kept texts."""
    lists = [
        output
        for output in map(conv.outputs.get, map(_CALL_ID, conv.program_calls(item.call_id)))
        if isinstance(output, FunctionCallOutput | CustomToolCallOutput) and isinstance(output.output, list)
    ]
    if sum(len(output.output) for output in lists) >= OFF_LOOP_PARTS:
        await asyncio.to_thread(lambda: [output.output_text() for output in lists])


class Output:
    """The items one response emits, in order: each dumped into the response's output, its type
    and its tool call's (kind, route) into the trace, and, for a model that tells its response
    while it plays, told live (`model.core.Live`)."""

    def __init__(self, trace: Trace, live: Live | None = None) -> None:
        self.trace = trace
        self.live = live
        self.items: list[Item] = []
        """As made (the models' templates and transcripts read them)."""
        self.dumped: list[dict[str, Any]] = []
        """As the response's output holds them."""

    def emit(self, item: Item, dumped: dict[str, Any] | None = None) -> None:
        """`dumped`: the item's dump, made already (a listing's, in a worker thread)."""
        trace = self.trace
        self.items.append(item)
        self.dumped.append(dumped if dumped is not None else dump(item))
        if self.live is not None:
            self.live.item(self.dumped[-1])
        trace.route.append(item.type)
        if isinstance(item, CALL_TYPES):
            route = "program" if isinstance(getattr(item, "caller", None), ProgramCaller) else "direct"
            trace.calls.append((kind_of_call(item).kind, route))
        elif isinstance(item, McpCall | CodeInterpreterCall):
            trace.calls.append(("mcp" if isinstance(item, McpCall) else "code_interpreter", "direct"))


LISTING_RUN = 100
"""A listing's tools dumped in one call (some 300 KB of a listing of 4.8 KB tools)."""


def dumped_listing(item: McpListTools) -> dict[str, Any]:
    """`dump(item)`, its tools `LISTING_RUN` at a time, letting the other threads run between two
    runs: a 7 MB listing's dump was one call of 3-8 ms, on the event loop. A tool's dump is the
    value the whole item's dump holds for it (the same options, applied down the tree)."""
    dumped = dump(item.model_copy(update={"tools": []}))
    tools: list[dict[str, Any]] = []
    for start in range(0, len(item.tools), LISTING_RUN):
        if start:
            between()
        tools.extend(dump(tool) for tool in item.tools[start : start + LISTING_RUN])
    dumped["tools"] = tools  # (its key is in place already: the order is the dump's)
    return dumped


class Runtime:
    """Checks, starts, runs and replays a response's programs on the engine's runner, and answers
    their server-side calls (see the module docstring)."""

    def __init__(
        self,
        *,
        signer: Signer,
        limits: Limits,
        ids: Callable[[str], str],
        seeds: Callable[[], int],
        clock: Callable[[], float],
        mcp: McpPolicy | None = None,
        hidden_results: HiddenResults | None = None,
        max_sealed_bytes: int | None = None,
    ) -> None:
        """`mcp`: the MCP client's policy; `hidden_results`: the hidden call results kept for
        retries (their owner frees them); `max_sealed_bytes`: the sealed results one conversation
        may carry (None: unbounded)."""
        self.signer = signer
        self.limits = limits
        self.ids = ids
        self.seeds = seeds
        self.clock = clock
        self.mcp = mcp or McpPolicy()
        self.hidden_results = hidden_results if hidden_results is not None else HiddenResults()
        self.max_sealed_bytes = max_sealed_bytes

    # ---- planning -------------------------------------------------------------------------------

    def hosted(
        self,
        request: CreateRequest,
        conv: Conversation,
        toolset: Toolset,
        trace: Trace,
        script: HostedScript | None,
        scope: str | None = None,
    ) -> Hosted:
        """The server-side tools of a response (`script`: the results scripted for them, if any;
        `scope`: the request's, whose MCP sessions share a process)."""
        return Hosted(
            tools=list(request.tools or ()),
            ptc=request.ptc_enabled,
            script=script,
            conversation=conv,
            signer=self.signer,
            hidden_results=self.hidden_results,
            policy=self.mcp,
            program_timeout_s=self.limits.timeout_s,
            available=toolset.other_available,
            calls=trace.hosted_calls,
            max_sealed_bytes=self.max_sealed_bytes,
            client=scope or "",
        )

    def check_open(self, conv: Conversation, tools: BoundTools, hosted: Hosted | None = None) -> tuple[int, ...]:
        """The open program's calls against the tools it may call (the request's, and `hosted`'s):
        their positions in its issue order, or the 400 that says what changed. () without one."""
        if conv.open_program is None:
            return ()
        allowed = sorted({*tools.program_tools, *(hosted.static_names() if hosted is not None else ())})
        labels = (
            {label for label, tool in hosted.mcp_tools.items() if tool.programmatic} if hosted is not None else set()
        )
        indexes = checks.check_open_program(
            conv, self.signer, allowed=allowed, server_labels=labels, max_tool_calls=self.limits.max_tool_calls
        )
        return tuple(indexes)

    def check(self, conv: Conversation, tools: BoundTools, hosted: Hosted) -> tuple[int, ...]:
        """`check_open`, then the finished programs' seals: every check of the conversation's
        programs a resume needs, whatever model plays it."""
        open_indexes = self.check_open(conv, tools, hosted)
        checks.check_finished_programs(conv, self.signer, max_tool_calls=self.limits.max_tool_calls)
        return open_indexes

    # ---- playing --------------------------------------------------------------------------------

    async def list_mcp_tools(self, prepared: Prepared, output: Output) -> None:
        """An `mcp_list_tools` item per MCP server, once per conversation, as the hosted API does.

        A server whose tools only programs may call is listed inside the runtime instead: the
        Runner judges an item without a caller as direct (contract §12)."""
        hosted = plan_of(prepared).hosted
        listed = hosted.listed_servers()
        for label, tool in hosted.mcp_tools.items():
            if label in listed or not tool.direct:
                continue
            listing = await hosted.listing(tool)
            item_id = self.ids("mcpl")

            def made(
                label: str = label, listing: Any = listing, item_id: str = item_id
            ) -> tuple[McpListTools, dict[str, Any]]:
                item = McpListTools(
                    id=item_id,
                    server_label=label,
                    tools=[McpListedTool.model_validate(entry) for entry in listing.tools],
                )
                # A store: false client sends it back with the rest: held to the same bound.
                too_large = hosted.carry_listing(item)
                if too_large is not None:
                    raise messages.mcp_listing_error(messages.listing_failed(label, too_large))
                return item, dumped_listing(item)

            # A listing is up to 8 MiB of tools: validated, measured and dumped in a worker
            # thread, not on the event loop (where every other client waited for it).
            output.emit(*await asyncio.to_thread(made))

    async def resume(self, prepared: Prepared, runner: Runner, emit: Callable[[Item], None]) -> bool | None:
        """Continue the open program, if any, from the client's answers: True when it finished,
        False when it paused again, None when no program is open."""
        conv = prepared.conversation
        program = conv.open_program
        if program is None:
            return None
        return await self.run(program, conv.seals[program.call_id], prepared, runner, emit)

    def answers(self, item: ProgramItem, prepared: Prepared) -> dict[int, ToolResult]:
        """The client's answers to the program's calls, by each call's position in issue order (for
        the open program, the positions its check found)."""
        conv = prepared.conversation
        calls = conv.program_calls(item.call_id)
        indexes: Sequence[int]
        if item is conv.open_program:
            indexes = plan_of(prepared).open_indexes
        else:
            indexes = call_indexes(self.signer, item, calls, self.limits.max_tool_calls, conv)
        outputs = list(map(conv.outputs.__getitem__, map(_CALL_ID, calls)))

        def read(kept: Entries | None, end: int) -> Entries:
            results = list(kept.results) if kept is not None else []
            for call, output in zip(calls[len(results) : end], outputs[len(results) : end], strict=True):
                kind = kind_of_call(call)
                text, is_error = kind.result(output)
                results.append(ToolResult(kind.call_name(call), kind.arguments(call), text, is_error=is_error))
            return Entries(tuple(results))

        # A field of the conversation's cursor (`ENTRIES`): only the new answers are made into
        # entries, and the pool is handed the very same ones again.
        ext = conv.cursor
        entries = ext.read_on(ENTRIES, item.call_id, len(calls), ext.answered_at_mark(item.call_id), read).results
        return dict(zip(indexes, entries, strict=True))

    async def _settle(
        self,
        item: ProgramItem,
        outcome: Suspended,
        known: dict[int, ToolResult],
        answered: dict[int, ToolResult],
        bindings: dict[str, Binding],
        hosted: Hosted,
        settled: list[tuple[int, str]],
        budget: HostedBudget,
        seen: int = -1,
    ) -> tuple[list[McpApprovalRequest], str | None]:
        """Answer what needs no client among the calls the program waits on: the server-run ones
        (into the sealed results; those reaching MCP servers together, within `budget`) and those
        whose arguments a kind refuses (into `answered`; the promise rejects; `settled` gets their
        (position, kind)). `seen`: the last position the client answered before this run (a step at or
        before it ran in an earlier response). Returns the approval requests to surface, and why the
        program must stop."""
        for pending in outcome.pending:
            binding = bindings.get(pending.name)
            if binding is not None and isinstance(binding.kind, Unemulated):
                return [], binding.kind.message(pending.name)
        approvals: list[McpApprovalRequest] = []
        owned = [p for p in outcome.pending if p.index not in known and hosted.owns(p.name)]
        step = min(p.index for p in outcome.pending)
        resolved = await hosted.resolve_all(item.call_id, owned, budget, step, seen >= step) if owned else []
        for answer in resolved:
            if isinstance(answer, McpApprovalRequest):
                approvals.append(answer)
            elif isinstance(answer, Unscripted):
                return [], f"unscripted: {answer.message}"
            elif isinstance(answer, OutOfTime):
                return [], answer.message
        for pending in outcome.pending:
            if pending.index in known or hosted.owns(pending.name):
                continue
            binding = _bound(bindings, pending.name)
            problem = binding.kind.check(binding, json.loads(pending.arguments))
            if problem is not None:
                answered[pending.index] = ToolResult(pending.name, pending.arguments, problem, is_error=True)
                settled.append((pending.index, binding.kind.kind))
        return approvals, None

    async def start(self, code: str, prepared: Prepared) -> tuple[ProgramItem, ProgramSeal]:
        """A new program item for `code`, and the seal its fingerprint carries."""
        call_id = self.ids("call")
        hosted = await plan_of(prepared).hosted.program_names()
        seal = ProgramSeal(
            call_id=call_id,
            code_sha256=code_digest(code),
            seed=self.seeds(),
            clock_ms=int(self.clock() * 1000),
            tools=tuple(sorted({*plan_of(prepared).tools.program_tools, *hosted})),
        )
        item = ProgramItem(id=self.ids("prog"), call_id=call_id, code=code, fingerprint=self.signer.issue(seal, code))
        return item, seal

    async def _resolve(self, item: ProgramItem, seal: ProgramSeal, prepared: Prepared) -> ProgramSeal:
        """The open program's seal with its tools, which its fingerprint binds by digest: what this
        request lets a new program call, if that is what it started with (else the 400)."""
        plan = plan_of(prepared)
        names = sorted({*plan.tools.program_tools, *await plan.hosted.program_names()})
        resolved = seal.with_tools(names)
        if resolved is None:
            raise messages.tools_changed(item.call_id, seal.describe_tools(), names)
        prepared.conversation.seals[item.call_id] = resolved
        return resolved

    async def run(
        self,
        item: ProgramItem,
        seal: ProgramSeal,
        prepared: Prepared,
        runner: Runner,
        emit: Callable[[Item], None],
        forced: Failed | None = None,
    ) -> bool:
        """Run or replay the program; emit its new calls or its output. True when it finished.

        `forced` is an injected fault's outcome, used instead of running the program."""
        trace, plan = prepared.trace, plan_of(prepared)
        bindings, hosted = plan.tools.bindings, plan.hosted
        if not seal.tools_known:  # bound by digest, with MCP servers: the tools are known once they list
            seal = await self._resolve(item, seal, prepared)
        await held_texts(item, prepared.conversation)
        answered = self.answers(item, prepared)
        seen = max(answered, default=-1)
        settled: list[tuple[int, str]] = []
        stopped: str | None = None
        approvals: list[McpApprovalRequest] = []
        budget = hosted.budget()  # for this run's calls to MCP servers, all its steps together
        while True:
            known = {**hosted.results(item.call_id), **answered}
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
            outcome = forced or await runner.run(program, prepared.scope or "")
            if isinstance(outcome, Failed) and outcome.kind == "divergence":
                raise messages.program_calls_modified(item.call_id, outcome.message)
            if not isinstance(outcome, Suspended) or forced is not None:
                break
            approvals, stopped = await self._settle(
                item, outcome, known, answered, bindings, hosted, settled, budget, seen
            )
            if stopped is not None or len(_prefix({**hosted.results(item.call_id), **answered})) == len(journal):
                break
        trace.programs_run += 1
        # Calls before the last one the client answered were settled, and counted, in an earlier response.
        trace.calls.extend((kind, "program") for index, kind in settled if index > seen)
        trace.images.extend(o.url for o in outcome.outputs if isinstance(o, ImageOutput))
        state: ReasoningItem | None = None
        if isinstance(outcome, Suspended) and stopped is None:
            sealed = hosted.sealed_results(item.call_id)
            if isinstance(sealed, str):
                stopped = sealed  # more than a store: false client could send back
            else:
                state = sealed
        unused = sorted(i for i in answered if i >= len(journal))
        if unused and (not isinstance(outcome, Suspended) or stopped is not None):
            raise messages.program_answered_too_much(item.call_id, len(answered), len(journal))
        if isinstance(outcome, Suspended) and stopped is None:
            if state is not None:
                emit(state)
            for approval in approvals:
                emit(approval)
            known = {**hosted.results(item.call_id), **answered}
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
                await self.check_call(binding, call, prepared)
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
            reason = _uncallable(outcome, bindings, seal.tools) or f"{outcome.kind}: {outcome.message}"
            status, result = "incomplete", f"{text}\n{reason}" if text else reason
        self._program_output(item, status, result, emit)
        return True

    async def check_call(self, binding: Binding, call: CallItem, prepared: Prepared) -> None:
        """Check a call item the model makes against its tool's schema: a violation goes to the trace,
        or refuses the request under a strict contract. Long arguments, and any input a lark grammar
        parses (pure Python, up to a second), are checked in a worker thread: the event loop serves
        other clients meanwhile."""
        text = getattr(call, "arguments", None) or getattr(call, "input", None)
        if (isinstance(text, str) and len(text) >= contract.OFF_LOOP_CHARS) or contract.parses_lark(binding.tool):
            violation = await asyncio.to_thread(contract.check_call, binding.tool, call)
        else:
            violation = contract.check_call(binding.tool, call)
        if violation is None:
            return
        prepared.trace.contract.append(violation)
        if plan_of(prepared).strict_contract:
            raise messages.contract_violation(violation.describe(), "tools")

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


_NOT_A_FUNCTION = re.compile(r"^TypeError: tools\.([\w$.]+) is not a function")


def _uncallable(outcome: Failed, bindings: dict[str, Binding], callable_names: Sequence[str]) -> str | None:
    """A program's `tools.x is not a function` said as what it is: a tool of the request that
    programs may not call (naming its allowed_callers), or no tool of the request at all."""
    found = _NOT_A_FUNCTION.match(outcome.message) if outcome.kind == "runtime" else None
    if found is None or found.group(1) in callable_names:
        return None
    name, where = found.group(1), outcome.message[found.end() :]
    binding = bindings.get(name)
    if binding is not None and not binding.programmatic:
        callers = getattr(binding.tool, "allowed_callers", None)
        shown = json.dumps(callers) if callers is not None else 'not set (["direct"])'
        return (
            f"runtime: the program called tools.{name}, which a program may not call: its allowed_callers is "
            f'{shown}; a program may call only tools whose allowed_callers include "programmatic"{where}'
        )
    may = ", ".join(callable_names) or "none"
    return (
        f"runtime: the program called tools.{name}, which is no tool of this request (a program may call: {may}){where}"
    )


def _prefix(known: dict[int, ToolResult]) -> list[ToolResult]:
    """The known results of the program's calls from the first, up to the first it lacks: a journal
    answers calls in issue order."""
    if known and max(known) == len(known) - 1:  # every call from the first (positions are distinct)
        return list(map(known.__getitem__, range(len(known))))
    journal: list[ToolResult] = []
    while len(journal) in known:
        journal.append(known[len(journal)])
    return journal


def _bound(bindings: dict[str, Binding], name: str) -> Binding:
    """A sealed tool name's binding; a function the program was started with is callable even if
    this request no longer lists it (the open program's tools were checked against the request's)."""
    return bindings.get(name) or Binding(name, FUNCTION, None, True, False)
