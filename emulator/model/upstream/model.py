"""The upstream model, the second `model.core.Model`: a real model behind an OpenAI-compatible
endpoint writes the programs and the messages, for the requests no scenario matches (scenarios,
and a user message's inline ```js block, still win: the scripted model is asked first).

`plan` makes the checks any model's resume needs (the open program's tools, the finished
programs' seals, the contract of the client's outputs) on the scripted model's types, so the
programs it starts run and replay exactly as scripted ones do. `play` resumes the open program,
if any; then asks the upstream for its turn, with the transcript rebuilt from the items
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

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ptc_emulator.emulator.errors import InvalidRequest, NoScenarioMatched, StatusError
from ptc_emulator.emulator.model.core import Prepared, Runner, Trace
from ptc_emulator.emulator.model.runtime.programs import check_call
from ptc_emulator.emulator.model.scripted.model import ScriptedModel
from ptc_emulator.emulator.model.scripted.script import BoundTools, Script, ScriptedPlan
from ptc_emulator.emulator.model.upstream.client import Answer, ToolCall, UpstreamClient
from ptc_emulator.emulator.model.upstream.record import Recording
from ptc_emulator.emulator.model.upstream.teach import CODE_TOOL, Teaching, teach
from ptc_emulator.emulator.model.upstream.transcript import transcript
from ptc_emulator.emulator.rules import checks
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.tools.kinds import kind_of_call
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    Item,
    McpCall,
    Message,
    OutputText,
    ProgramCaller,
    ReasoningItem,
    SummaryText,
    dump,
)
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.tools import AllowedToolsChoice, FunctionToolChoice, ProgrammaticToolChoice

__all__ = ["MAX_TURNS", "UpstreamModel", "UpstreamPlan"]

MAX_TURNS = 16
"""Upstream turns one response may take (programs that end, each followed by another turn)."""


@dataclass(frozen=True)
class UpstreamPlan(ScriptedPlan):
    """A response the upstream plays: the scripted plan's tools and checks, no turns."""

    author: str = ""
    """Which model writes this response (the journal's `scenario` says `upstream:<author>`)."""


class UpstreamModel:
    def __init__(self, scripted: ScriptedModel, client: UpstreamClient, recording: Recording | None = None) -> None:
        """`recording`: where the conversations it finishes are written as scenarios (`--record`)."""
        self.scripted = scripted
        self.client = client
        self.author = client.config.label
        self.recording = recording

    def plan(
        self,
        request: CreateRequest,
        conversation: Conversation,
        toolset: Toolset,
        trace: Trace,
        *,
        scope: str | None,
    ) -> ScriptedPlan:
        try:
            return self.scripted.plan(request, conversation, toolset, trace, scope=scope)
        except NoScenarioMatched:
            pass
        scripted, conv = self.scripted, conversation
        author = self.client.config.model or request.model or self.author
        tools = BoundTools(request, toolset)
        script = Script(f"upstream:{author}", [])
        trace.scenario = script.name
        hosted, open_indexes = scripted.check_programs(request, conv, toolset, tools, script, trace, scope)
        trace.contract.extend(checks.check_outputs(conv, toolset))
        if scripted.strict_contract and trace.contract:
            raise InvalidRequest(trace.contract[0].describe(), param="input", code="contract_violation")
        return UpstreamPlan(
            script=script,
            hosted=hosted,
            tools=tools,
            open_indexes=tuple(open_indexes),
            strict_contract=scripted.strict_contract,
            author=author,
        )

    async def play(self, prepared: Prepared, runner: Runner) -> list[dict[str, Any]]:
        plan = prepared.plan
        if not isinstance(plan, UpstreamPlan):
            return await self.scripted.play(prepared, runner)
        output = await _Play(self, prepared, plan, runner).run()
        if self.recording is not None:
            self.recording.exchange(prepared, output, plan.author)
        return output

    async def aclose(self) -> None:
        await self.client.aclose()


class _Play:
    """One response the upstream plays (see the module docstring)."""

    def __init__(self, model: UpstreamModel, prepared: Prepared, plan: UpstreamPlan, runner: Runner) -> None:
        self.model = model
        self.prepared = prepared
        self.plan = plan
        self.runner = runner
        self.player = model.scripted.player
        self.programs = self.player.programs
        self.ids: Callable[[str], str] = self.player.ids
        self.out: list[dict[str, Any]] = []
        self.produced: list[Item] = []
        self.live = prepared.trace.live
        """Where a streamed response is told while it plays; None: it is told when it has finished."""
        self.writing: _Writing | None = None
        """What the current turn has told live so far."""

    def emit(self, item: Item) -> None:
        trace = self.prepared.trace
        self.produced.append(item)
        self.out.append(dump(item))
        if self.live is not None:
            self.live.item(self.out[-1])
        trace.route.append(item.type)
        if isinstance(item, CALL_TYPES):
            route = "program" if isinstance(getattr(item, "caller", None), ProgramCaller) else "direct"
            trace.calls.append((kind_of_call(item).kind, route))
        elif isinstance(item, McpCall):
            trace.calls.append(("mcp", "direct"))

    async def run(self) -> list[dict[str, Any]]:
        prepared, conv = self.prepared, self.prepared.conversation
        await self.player._list_mcp_tools(prepared, self.emit)  # noqa: SLF001 (the hosted listing items)
        program = conv.open_program
        if program is not None:
            if not await self.programs.run(program, conv.seals[program.call_id], prepared, self.runner, self.emit):
                return self.out
        taught = await teach(self.plan.tools, self.plan.hosted, ptc=prepared.request.ptc_enabled)
        for _ in range(MAX_TURNS):
            answer = await self._ask(taught)
            if not await self._turn(answer, taught):
                return self.out
        raise _invalid(f"The model upstream took more than {MAX_TURNS} turns in one response.")

    async def _ask(self, taught: Teaching) -> Answer:
        request = self.prepared.request
        self.prepared.trace.model_turns += 1
        self.writing = _Writing()
        answer = await self.model.client.complete(
            model=request.model or self.model.author,
            instructions=request.instructions,
            transcript=transcript([*self.prepared.conversation.items, *self.produced], CODE_TOOL),
            functions=taught.functions,
            tool_choice=_choice(request.tool_choice, taught),
            on_delta=self._delta if self.live is not None else None,
        )
        read, written = self.prepared.trace.upstream_tokens
        self.prepared.trace.upstream_tokens = (read + answer.input_tokens, written + answer.output_tokens)
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
            code = _code(code_calls[0])
            item, seal = await self.programs.start(code, prepared)
            self.emit(item)
            prepared.conversation.seals[item.call_id] = seal
            return await self.programs.run(item, seal, prepared, self.runner, self.emit)
        if answer.calls:
            calls = answer.calls[:1] if prepared.request.parallel_tool_calls is False else answer.calls
            for call in calls:
                self._direct(call, taught)
            return False
        self.emit(self._message(answer.text))
        return False

    def _direct(self, call: ToolCall, taught: Teaching) -> None:
        name = taught.direct.get(call.name)
        if name is None:
            offered = ", ".join(f.name for f in taught.functions) or "none"
            raise _invalid(
                f"The model upstream called a function this request does not offer: {call.name!r} (offered: {offered})."
            )
        binding = self.plan.tools.bindings[name]
        try:
            json.loads(call.arguments or "{}")
        except ValueError:
            raise _invalid(
                f"The model upstream called {call.name!r} with arguments that are not JSON: {call.arguments[:200]!r}."
            ) from None
        item = binding.kind.call_item(
            binding,
            call.arguments or "{}",
            call_id=self.ids("call"),
            item_id=self.ids(binding.kind.id_prefix),
            caller=None,
        )
        check_call(binding, item, self.prepared)
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


def _code(call: ToolCall) -> str:
    """The `code` argument of a call of the code function, or the 502 that says what is wrong."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        raise _invalid(
            f"The model upstream called {CODE_TOOL} with arguments that are not JSON: {call.arguments[:200]!r}."
        ) from None
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str) or not code.strip():
        raise _invalid(
            f"The model upstream called {CODE_TOOL} without a `code` argument (a string): {call.arguments[:200]!r}."
        )
    return code


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


def _shown(call: ToolCall) -> str:
    return repr(call.arguments if len(call.arguments) <= 200 else call.arguments[:197] + "...")


def _invalid(message: str) -> StatusError:
    return StatusError(502, message, type="server_error", code="upstream_invalid_tool_call")
