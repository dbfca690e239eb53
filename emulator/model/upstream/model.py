"""The upstream model, the second `model.core.Model`: a real model behind an OpenAI-compatible
endpoint writes the programs and the messages (`model.fallback` puts it behind the scripted
model, for the requests no scenario matches).

`plan` makes the checks any model's resume needs (the runtime's: the open program's tools, the
finished programs' seals; and the contract of the client's outputs), so the programs it starts
run and replay on the runtime exactly as scripted ones do. `play` resumes the open program, if
any; then asks the upstream for its turn, with the transcript rebuilt from the items
(`transcript.py`) and the functions `teach.py` makes, until a turn ends the response:

    a call of the code function   a `program` item runs it; when it ends, its `program_output`
                                  goes back as the call's result and the upstream's next turn
                                  follows in the same response; when it pauses on client calls,
                                  the response ends there (the client answers and resumes)
    direct function calls         `function_call` items; the response ends
    text                          a message; the response ends

What the upstream gets wrong is the response's error in the OpenAI envelope (502
`upstream_invalid_tool_call`), never a 500; code that does not parse is a program that ends
`incomplete` with the syntax error, which goes back to the upstream like any result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.core import Prepared, Runner, Trace
from ptc_emulator.emulator.model.runtime import BoundTools, HostedScript, Output, ProgramPlan, Runtime
from ptc_emulator.emulator.model.upstream.client import Answer, ToolCall, UpstreamClient
from ptc_emulator.emulator.model.upstream.reading import Malformed, parse
from ptc_emulator.emulator.model.upstream.redaction import Redaction
from ptc_emulator.emulator.model.upstream.teach import CODE_TOOL, Teaching, teach
from ptc_emulator.emulator.model.upstream.transcript import transcript
from ptc_emulator.emulator.rules import checks
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import (
    Item,
    Message,
    OutputText,
    ProgramOutputItem,
    ReasoningItem,
    SummaryText,
    dump,
)
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.tools import AllowedToolsChoice, FunctionToolChoice, ProgrammaticToolChoice

__all__ = ["MAX_TURNS", "UpstreamModel", "UpstreamPlan"]

MAX_TURNS = 16
"""Upstream turns one response may take (programs that end, each followed by another turn)."""
CALLS_AT_ONCE = 200
"""An answer's function calls made into items between two turns of the event loop: an answer of
60,000 calls held the loop for a second or more."""


@dataclass(frozen=True, kw_only=True)
class UpstreamPlan(ProgramPlan):
    """A response the upstream plays: what the runtime reads, and who writes it."""

    author: str = ""
    """Which model writes this response (the journal's `scenario` says `upstream:<author>`)."""


class UpstreamModel:
    def __init__(
        self,
        runtime: Runtime,
        client: UpstreamClient,
        *,
        strict_contract: bool = False,
        hosted: Callable[[str | None], HostedScript | None] = lambda scope: None,
    ) -> None:
        """`strict_contract`: whether a client's tool output that breaks its schema refuses the
        request; `hosted`: the results registered for the server-side tools, by scope."""
        self.runtime = runtime
        self.client = client
        self.author = client.config.label
        self.strict_contract = strict_contract
        self.hosted = hosted

    def plans_at_length(self, scope: str | None) -> bool:
        return False  # it plans no scenario: the upstream is asked when it plays

    def match_weight(self, scope: str | None) -> int:
        return 0

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> UpstreamPlan:
        runtime, conv = self.runtime, conversation
        author = self.client.config.model or request.model or self.author
        tools = BoundTools(request, toolset)
        trace.scenario = f"upstream:{author}"
        hosted = runtime.hosted(request, conv, toolset, trace, self.hosted(scope), scope)
        open_indexes = runtime.check(conv, tools, hosted)
        trace.contract.extend(checks.check_outputs(conv, toolset))
        if self.strict_contract and trace.contract:
            raise messages.contract_violation(trace.contract[0].describe(), "input")
        return UpstreamPlan(
            hosted=hosted,
            tools=tools,
            open_indexes=open_indexes,
            strict_contract=self.strict_contract,
            author=author,
        )

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        plan = prepared.plan
        assert isinstance(plan, UpstreamPlan), "a response the upstream model plays has its plan"
        return await _Play(self, prepared, plan, runner).run()

    async def aclose(self) -> None:
        await self.client.aclose()


class _Play:
    """One response the upstream plays (see the module docstring)."""

    def __init__(self, model: UpstreamModel, prepared: Prepared, plan: UpstreamPlan, runner: Runner) -> None:
        self.model = model
        self.prepared = prepared
        self.plan = plan
        self.runner = runner
        self.runtime = model.runtime
        self.ids: Callable[[str], str] = model.runtime.ids
        self.live = prepared.trace.live
        """Where a streamed response is told while it plays; None: it is told when it has finished."""
        self.output = Output(prepared.trace, self.live)
        self.redaction = Redaction(model.client.config.api_key)
        self.emit = self._emit if self.redaction.secret else self.output.emit
        self.writing: _Writing | None = None
        """What the current turn has told live so far."""

    async def run(self) -> list[dict[str, Any]]:
        prepared, runtime = self.prepared, self.runtime
        await runtime.list_mcp_tools(prepared, self.output)
        if await runtime.resume(prepared, self.runner, self.emit) is False:
            return self.output.dumped
        taught = await teach(self.plan.tools, self.plan.hosted, ptc=prepared.request.ptc_enabled)
        for _ in range(MAX_TURNS):
            answer = await self._ask(taught)
            if not await self._turn(answer, taught):
                return self.output.dumped
        raise messages.upstream_too_many_turns(MAX_TURNS)

    async def _ask(self, taught: Teaching) -> Answer:
        request = self.prepared.request
        self.prepared.trace.model_turns += 1
        self.writing = _Writing()
        answer = await self.model.client.complete(
            model=request.model or self.model.author,
            instructions=request.instructions,
            transcript=transcript([*self.prepared.conversation.items, *self.output.items], CODE_TOOL),
            functions=taught.functions,
            tool_choice=_choice(request.tool_choice, taught),
            on_delta=self._delta if self.live is not None else None,
            effort=(request.reasoning or {}).get("effort"),  # what the request and its updates set
            text_format=(request.text or {}).get("format"),
        )
        read, written = self.prepared.trace.upstream_tokens
        self.prepared.trace.upstream_tokens = (read + answer.input_tokens, written + answer.output_tokens)
        self.prepared.trace.stopped = answer.stopped  # the last turn's says how the response ends
        return answer

    def _delta(self, kind: str, text: str) -> None:
        """A piece of the upstream's turn as it arrives (`kind`: `text` or `reasoning`): its text
        is told live in the message it will be, after the reasoning that came before it."""
        writing, live = self.writing, self.live
        if writing is None or live is None or not text:
            return
        if kind == "reasoning":
            writing.reasoning.append(text)
            return
        if writing.message is None:
            if writing.reasoning:
                writing.reasoned = "".join(writing.reasoning)
                self._reasoning(writing.reasoned)
            writing.message = self._message("")
            live.opened(dump(writing.message))
        writing.text.append(text)
        live.delta(text)

    def _emit(self, item: Item, dumped: dict[str, Any] | None = None) -> None:
        """An item out, the upstream's key taken out of a program's output (its result or its
        error, which the program may have built from pieces at run time: `"sk-.." + ".."`),
        the output's id signed again for the text it now holds. A program's tool calls keep
        their arguments: the client's tool gets what the program passed, and a program resumed
        from its calls replays against them (docs/any-model.md says what is not covered)."""
        if isinstance(item, ProgramOutputItem):
            cleaned = self.redaction.text(item.result)
            if cleaned != item.result:
                signer = self.runtime.signer
                item = ProgramOutputItem(
                    id=signer.program_output_id(item.call_id, item.status, cleaned),
                    call_id=item.call_id,
                    result=cleaned,
                    status=item.status,
                )
                dumped = None
        self.output.emit(item, dumped)

    def _reasoning(self, text: str) -> None:
        self.emit(ReasoningItem(id=self.ids("rs"), summary=[SummaryText(text=text)]))

    async def _turn(self, answer: Answer, taught: Teaching) -> bool:
        """Play one upstream answer; True when the response goes on (a program ended)."""
        prepared = self.prepared
        code_calls = [c for c in answer.calls if c.name == CODE_TOOL] if taught.programs else []
        writing, self.writing = self.writing, None
        if writing is not None and writing.message is not None:  # its text was told as it came
            self._finish(writing, answer, commentary=bool(code_calls or answer.calls))
            if not (code_calls or answer.calls):
                return False
        else:
            if answer.reasoning:  # as the upstream summarised its thinking; not sent back to it
                self._reasoning(answer.reasoning)
            if answer.text and (code_calls or answer.calls):
                self.emit(self._message(answer.text, phase="commentary"))
        if code_calls:
            code = _code(code_calls[0], await _arguments(code_calls[0]))
            item, seal = await self.runtime.start(code, prepared)
            self.emit(item)
            prepared.conversation.seals[item.call_id] = seal
            return await self.runtime.run(item, seal, prepared, self.runner, self.emit)
        if answer.calls:
            calls = answer.calls[:1] if prepared.request.parallel_tool_calls is False else answer.calls
            for n, call in enumerate(calls):
                if n and n % CALLS_AT_ONCE == 0:  # the loop serves other clients between runs of calls
                    await asyncio.sleep(0)
                await self._direct(call, taught)
            return False
        self.emit(self._message(answer.text))
        return False

    async def _direct(self, call: ToolCall, taught: Teaching) -> None:
        name = taught.direct.get(call.name)
        if name is None:
            offered = ", ".join(f.name for f in taught.functions) or "none"
            raise messages.upstream_unoffered_function(_name(call), offered)
        binding = self.plan.tools.bindings[name]
        await _arguments(call)
        item = binding.kind.call_item(
            binding,
            call.arguments or "{}",
            call_id=self.ids("call"),
            item_id=self.ids(binding.kind.id_prefix),
            caller=None,
        )
        await self.runtime.check_call(binding, item, self.prepared)
        self.emit(item)

    def _finish(self, writing: _Writing, answer: Answer, *, commentary: bool) -> None:
        """The message told live, finished with the turn's text; reasoning that came after the
        text began follows it as a reasoning item of its own."""
        message = writing.message
        assert message is not None
        text = answer.text or "".join(writing.text)
        message.content = [OutputText(text=text, annotations=[], logprobs=[])]
        message.status = "completed"
        if commentary:
            message.phase = "commentary"
        self.emit(message)
        later = answer.reasoning or ""
        later = later[len(writing.reasoned) :] if later.startswith(writing.reasoned) else later
        if later.strip():
            self._reasoning(later)

    def _message(self, text: str, phase: str | None = None) -> Message:
        message = Message(
            id=self.ids("msg"),
            role="assistant",
            status="completed",
            content=[OutputText(text=text, annotations=[], logprobs=[])],
        )
        if phase == "commentary":
            message.phase = "commentary"
        return message


@dataclass
class _Writing:
    """What one upstream turn has told live so far."""

    reasoning: list[str] = field(default_factory=list)
    """The reasoning that arrived, told when the text begins."""
    reasoned: str = ""
    """The reasoning told before the text, as one reasoning item."""
    message: Message | None = None
    """The message its text is told in, once the text began."""
    text: list[str] = field(default_factory=list)


async def _arguments(call: ToolCall) -> Any:
    """A call's arguments, decoded as strictly as an answer is (`reading.decode`: JSON, nested at
    most 64 levels, no NaN or Infinity, no lone surrogate), or the 502 that says what is wrong."""
    try:
        return await parse(call.arguments or "{}")
    except Malformed as e:
        if e.not_json:
            raise messages.upstream_arguments_not_json(repr(_name(call)), call.arguments) from None
        raise messages.upstream_arguments_malformed(repr(_name(call)), e.problem, call.arguments) from None


def _code(call: ToolCall, arguments: Any) -> str:
    """The `code` argument of a call of the code function, or the 502 that says what is wrong."""
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str) or not code.strip():
        raise messages.upstream_code_missing(CODE_TOOL, call.arguments)
    return code


def _name(call: ToolCall) -> str:
    """A call's function name for a message (the upstream's: any length), cut short."""
    return call.name if len(call.name) <= 100 else call.name[:97] + "..."


def _choice(choice: Any, taught: Teaching) -> str:
    """The request's `tool_choice` as the upstream is asked it: `auto`, `none`, `required`, or the
    name of the one function it must call (the code function for `programmatic_tool_calling`)."""
    if choice in ("none", "required"):
        return str(choice)
    if isinstance(choice, ProgrammaticToolChoice) and taught.programs:
        return "function:" + CODE_TOOL
    if isinstance(choice, FunctionToolChoice):
        for name, qualified in taught.direct.items():
            if qualified == choice.name:
                return "function:" + name
    if isinstance(choice, AllowedToolsChoice) and choice.mode == "required":
        return "required"
    return "auto"
