"""Tools that run on the server's side: MCP, code interpreter, shell in a hosted container.

What a program sees: `tools.<server_label>.<tool>(args)` for each tool an MCP server lists
(filtered by `allowed_tools`), `tools.code_interpreter({code})`, and `tools.shell({commands,
timeout_ms?, max_output_length?})` when the request's shell tool has a hosted environment
(`container_auto`, `container_reference`). Such a call never reaches the client: the emulator
answers it (an MCP server it calls, or what the scenario scripts) and the program goes on in
the same response. The Agents SDK Runner rejects a program-owned item in the response that
carries its program's `program_output` (contract §12), so these calls stay inside the runtime:
the journal lists them (`hosted_calls`), the client does not. The one exception is an MCP call
that needs approval: the program pauses on an `mcp_approval_request` with the program's caller.

Resuming a program replays it from a journal of tool results, so the results of its hidden
calls must survive the round trip without being fetched again (an MCP call may have side
effects). When a program pauses after hidden calls, the response carries a `reasoning` item
whose `encrypted_content` seals the results new since its last pause (the sealed results). The
client replays it with the other items, or `previous_response_id` finds it. Sealed results that
fail their seal are refused. What a conversation carries is bounded (`max_sealed_bytes`, derived
from `--max-body-bytes`), so a `store: false` client can always send it back: a pause that would
go past it ends the program `incomplete` instead, saying so (docs/limits.md, "MCP"). The visible
items of server-run calls (a direct `mcp_call`'s output, an MCP listing, a code interpreter's or
hosted shell's results) count against the same bound, since the client sends them back too: a
direct MCP call whose result would go past it is answered as a failed `mcp_call` saying so, and an
MCP listing shown to the model that would fails as a listing that cannot be read does. Within
one process, the hidden results kept by the program and the call (`hidden_results.py`) also keep
a retried request from calling the server again, and requests sent at once that need the same call
share the one in flight. A `store: false` replay of a call the program went on past carries that
call's sealed result, or the request is refused: with no result kept either, the call would be made
a second time. Approved, the program went on past it when an item the program issued later comes
after the approval; needing no approval, when the client answered a call of its step or a later
one, or the conversation holds an approval request of the program's from that step or later.

An MCP call that needs approval pauses on an `mcp_approval_request` whose id is a MAC of the
program, the call's position, the server label, the tool and its arguments: a `store: false`
client that rewrites an output the program consumed changes the call, so the approval given to
the old one does not cover it (the program pauses on a new request). The request item the client
replays must also say what the call is: one whose label, name or arguments differ is refused.
Both hold before any result known for the call is used (sealed, or kept for a retry): the
decision that counts is the one the request being processed carries, so a sealed result of a
call that needed approval also seals its request's id and whether it was approved (a denial is
sealed too, never kept for a retry), and is used only under the same decision now.

Rejected: fetching again on replay (repeats side effects); server-side state only (lost under
`store: false` in another process), also for results too large to carry (kept by digest, they
would be fetched again once the memo lost them); carrying the results in item ids (clients may
drop ids).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from ptc_emulator.emulator import jsonreply, messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.runtime.hidden_results import HiddenResults
from ptc_emulator.emulator.patterns import (
    MATCH_BUDGET,
    MatchingTooCostly,
    Pattern,
    PatternError,
    PatternTooCostly,
    compile_pattern,
    metered,
)
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import REASONING_DOMAIN, Signer
from ptc_emulator.emulator.tools.mcp import CallResult, Listing, McpPolicy, McpServerSpec, call_tool, list_tools
from ptc_emulator.emulator.wire.items import (
    CodeInterpreterCall,
    Item,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    McpListTools,
    OpenJSON,
    ProgramCaller,
    ReasoningItem,
    ShellCall,
    ShellCallOutput,
    WireModel,
    of_type,
)
from ptc_emulator.emulator.wire.tools import CodeInterpreterTool, McpTool, ServerLabel
from ptc_emulator.sandbox import PendingCall, ToolResult

__all__ = [
    "CodeInterpreterSpec",
    "Hosted",
    "HostedBudget",
    "HostedScript",
    "OutOfTime",
    "ShellSpec",
    "Unscripted",
    "hosted_shell_call",
]

CODE_INTERPRETER = "code_interpreter"
SHELL = "shell"
HOSTED_ENVIRONMENTS = ("container_auto", "container_reference")


# ---- what a scenario scripts (its `hosted:` section) ------------------------------------------------


def _kept(pattern: str | None) -> Pattern | None:
    """An entry's pattern, compiled once as the entry is read (in a worker thread) and kept with it:
    a hosted call's matching never compiles, nor depends on the shared cache of `compile_pattern`
    (600 entries of distinct patterns, past its 512, were all compiled again at every call)."""
    return None if pattern is None else compile_pattern(pattern).ready()


def _compiled(spec: CodeInterpreterSpec | ShellSpec) -> Pattern | None:
    kept = spec._compiled
    if kept is None:
        pattern = spec.code if isinstance(spec, CodeInterpreterSpec) else spec.command
        kept = spec._compiled = _kept(pattern)
    return kept


class CodeInterpreterSpec(WireModel):
    code: str | None = None
    """A regular expression searched in the code; omitted matches any."""
    logs: str | None = None
    """Shorthand for `outputs: [{type: logs, logs: ...}]`."""
    outputs: list[OpenJSON] = Field(default_factory=list)
    error: str | None = None
    """The code fails: the call's status is `failed` and a program's promise rejects with this."""

    @field_validator("code")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_pattern(value)
            except PatternError as e:
                raise ValueError(f"invalid regular expression {value!r}: {e}") from None
        return value

    _compiled: Pattern | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _kept(self) -> CodeInterpreterSpec:
        self._compiled = _kept(self.code)
        return self

    def all_outputs(self) -> list[dict[str, Any]]:
        extra = [{"type": "logs", "logs": self.logs}] if self.logs is not None else []
        return [*extra, *self.outputs]


class ShellSpec(WireModel):
    command: str | None = None
    """A regular expression the whole command must match; omitted matches any."""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    timeout: bool = False

    @field_validator("command")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_pattern(value)
            except PatternError as e:
                raise ValueError(f"invalid regular expression {value!r}: {e}") from None
        return value

    _compiled: Pattern | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _kept(self) -> ShellSpec:
        self._compiled = _kept(self.command)
        return self

    def output(self) -> dict[str, Any]:
        outcome: dict[str, Any] = {"type": "timeout"} if self.timeout else {"type": "exit", "exit_code": self.exit_code}
        return {"stdout": self.stdout, "stderr": self.stderr, "outcome": outcome}


class HostedScript(WireModel):
    """Results for the tools that run on OpenAI's side (a scenario's `hosted:` section)."""

    mcp_servers: dict[ServerLabel, McpServerSpec] = Field(default_factory=dict)
    """By label: a label no `server_label` can spell (one request tool's pattern) is refused, not
    kept as a server no request could reach."""
    code_interpreter: list[CodeInterpreterSpec] = Field(default_factory=list)
    shell: list[ShellSpec] = Field(default_factory=list)


# ---- the runtime --------------------------------------------------------------------------------


class HostedPatternTooCostly(Exception):
    """A `hosted.*` entry's pattern too large a program for the code or command it would match
    (`emulator/patterns.py`): `reason` says which, for the scenario's 400 or the program's end."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _cost(specs: list[Any], texts: list[str]) -> int:
    """What matching `texts` against every spec's pattern may cost: its instructions × the texts' bytes."""
    weight = sum(c.size for c in map(_compiled, specs) if c is not None)
    if not weight:
        return 0
    size = sum(len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts)
    return weight * size


@contextlib.contextmanager
def _metered(where: str) -> Any:
    """One call's matches against `hosted.<where>` within one budget together (`patterns.metered`)."""
    try:
        with metered():
            yield
    except MatchingTooCostly as e:
        raise HostedPatternTooCostly(messages.hosted_matching_too_costly(f"hosted.{where}", e.budget)) from None


def _first_matching(specs: list[Any], where: str, field: str, text: str, *, full: bool = False) -> Any:
    """The first spec of `hosted.<where>` whose pattern (its `field`, None for any) matches `text`, or None."""
    for index, spec in enumerate(specs):
        compiled = _compiled(spec)
        if compiled is None:
            return spec
        try:
            found = compiled.fullmatch(text) if full else compiled.search(text)
        except MatchingTooCostly:
            raise  # the entries together: `_metered`
        except PatternTooCostly as e:
            raise HostedPatternTooCostly(
                messages.hosted_pattern_too_costly(
                    f"hosted.{where}.{index}.{field}", e.instructions, e.length, e.budget
                )
            ) from None
        if found is not None:
            return spec
    return None


@dataclass(frozen=True)
class Unscripted:
    """A hosted call nobody scripted: the program ends `incomplete` with this message."""

    message: str


@dataclass(frozen=True)
class OutOfTime:
    """A call to an MCP server that the program's budget for such calls cut, or left no time to
    start (`HostedBudget`): the program ends `incomplete` with this message."""

    message: str


HOSTED_CONCURRENCY = 8
"""A program's calls to MCP servers in flight at once, of those one step of it issued together (a
`Promise.all` of them): the rest wait for one of these to end. Each is a session of its own in
its client's MCP client process (`tools/mcp_child.py`). The bound is this step's alone: nothing caps the calls
of different requests together, and one client's slow calls never hold another's (issue 38)."""


@dataclass
class HostedBudget:
    """The wall time one program run's calls to MCP servers may take together, in one response:
    `total_s` (the program's `--timeout`; None: unbounded). Each step's calls run together, and a
    step counts from its first call's start to its last call's end (docs/limits.md, "MCP")."""

    total_s: float | None
    clock: Callable[[], float] = time.monotonic
    spent_s: float = 0.0
    """What the steps before this one took."""
    _step_start: float | None = None

    def left(self) -> float | None:
        """What is left of the budget as a call starts (None: unbounded). The step's first call
        has all of what the steps before it left."""
        now = self.clock()
        if self._step_start is None:
            self._step_start = now
        if self.total_s is None:
            return None
        return self.total_s - self.spent_s - (now - self._step_start)

    def end_step(self) -> None:
        if self._step_start is not None:
            self.spent_s += self.clock() - self._step_start
            self._step_start = None


@dataclass
class _Remote:
    """A program's call that must reach an MCP server."""

    pending: PendingCall
    tool: McpTool
    name: str
    arguments: dict[str, Any]
    entry: dict[str, Any]
    """Its journal entry, but for its status and error."""
    started: bool = False


def _shell_environment(tool: Any) -> str | None:
    environment = getattr(tool, "environment", None)
    if environment is None and isinstance(getattr(tool, "model_extra", None), dict):
        environment = tool.model_extra.get("environment")
    if isinstance(environment, dict):
        kind = environment.get("type")
        return kind if isinstance(kind, str) else None
    kind = getattr(environment, "type", None)
    return kind if isinstance(kind, str) else None


@dataclass
class Hosted:
    """One response's view of the server-side tools: listings, results, the sealed results."""

    tools: list[Any]
    """The request's tools."""
    ptc: bool
    script: HostedScript | None
    conversation: Conversation
    signer: Signer
    hidden_results: HiddenResults
    policy: McpPolicy = field(default_factory=McpPolicy)
    """Where the MCP client may connect, its deadlines and answer limit."""
    program_timeout_s: float | None = None
    """A program's own timeout: a call it makes ends within it too."""
    available: Callable[[str], bool] = lambda key: True
    """Whether a deferred tool is loaded (`Toolset.other_available`: `mcp:<server_label>`)."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Every hidden call answered in this response, for the journal."""
    max_sealed_bytes: int | None = None
    """The server-run calls' results one conversation may carry, all its pauses and programs
    together, sealed or visible (`sealed_budget` in `api/settings.py`); None: unbounded."""
    client: str = ""
    """The request's scope ("" for none): its MCP sessions share one MCP client process, which
    another client's large answers do not hold (`mcp_child.py`)."""
    _listings: dict[str, Listing] = field(default_factory=dict)
    _results: dict[str, dict[int, ToolResult]] = field(default_factory=dict)
    _sealed: dict[str, set[int]] = field(default_factory=dict)
    _recorded: dict[str, set[int]] = field(default_factory=dict)
    """By program: the call positions the conversation carries a sealed result of, whatever the
    decision it was made under (a result this request's decision sets aside included)."""
    _decided: dict[str, dict[int, tuple[str, bool]]] = field(default_factory=dict)
    """By program and call position: the approval request a call needing approval waited on, and
    whether its result is the call's (approved) or the denial; sealed with the result."""
    _carried: int | None = None
    """What the conversation's items carry (`carried_bytes`), read when first needed."""
    _added: int = 0
    """What this response adds to it."""
    _opened: list[tuple[ReasoningItem, dict[str, Any]]] | None = None
    _listed: set[str] | None = None

    # ---- the request's hosted tools -------------------------------------------------------------

    @property
    def mcp_tools(self) -> dict[str, McpTool]:
        return {
            t.server_label: t for t in self.tools if isinstance(t, McpTool) and self.available(f"mcp:{t.server_label}")
        }

    @property
    def code_interpreter(self) -> CodeInterpreterTool | None:
        return next((t for t in self.tools if isinstance(t, CodeInterpreterTool)), None)

    @property
    def hosted_shell(self) -> Any | None:
        return next(
            (
                t
                for t in self.tools
                if getattr(t, "type", None) == SHELL and _shell_environment(t) in HOSTED_ENVIRONMENTS
            ),
            None,
        )

    def static_names(self) -> tuple[str, ...]:
        """Hosted tools a program may call whose names need no listing."""
        if not self.ptc:
            return ()
        names = []
        ci = self.code_interpreter
        if ci is not None and ci.programmatic:
            names.append(CODE_INTERPRETER)
        shell = self.hosted_shell
        if shell is not None and "programmatic" in (getattr(shell, "allowed_callers", None) or ()):
            names.append(SHELL)
        return tuple(names)

    def declared(self, label: str) -> McpServerSpec | None:
        return self.script.mcp_servers.get(label) if self.script is not None else None

    async def listing(self, tool: McpTool) -> Listing:
        found = self._listings.get(tool.server_label)
        if found is None:
            found = self._listings[tool.server_label] = await list_tools(
                tool, self.declared(tool.server_label), self.policy, client=self.client
            )
            if found.error is not None:
                raise messages.mcp_listing_error(found.error)
        return found

    async def program_names(self) -> tuple[str, ...]:
        """Every hosted tool a new program may call: `label.tool` per listed MCP tool, and the rest."""
        names = list(self.static_names())
        if self.ptc:
            for label, tool in self.mcp_tools.items():
                if tool.programmatic:
                    listing = await self.listing(tool)
                    names.extend(f"{label}.{entry['name']}" for entry in listing.tools)
        return tuple(names)

    def owns(self, name: str) -> bool:
        """Whether a program's call to `name` is answered here rather than by the client."""
        if name in self.static_names():
            return True
        label, dot, _ = name.partition(".")
        tool = self.mcp_tools.get(label)
        return bool(dot) and tool is not None and tool.programmatic

    # ---- the sealed results -----------------------------------------------------------------------

    def listed_servers(self) -> set[str]:
        """The server labels the conversation's `mcp_list_tools` items list (read once)."""
        if self._listed is None:
            self._listed = {i.server_label for i in of_type(self.conversation.items, McpListTools)}
        return self._listed

    def read_ahead(self) -> None:
        """What the play reads over every item of the conversation (its listings, its sealed
        results), read now: for a long conversation, in a worker thread before the play, whose
        reads are then cached (200,000 items: two scans of some 10 ms that held the event loop).
        A sealed result that does not open is left for the play to refuse, where it did."""
        self.listed_servers()
        with contextlib.suppress(EmulatorError):
            self._runtime_items()

    def _runtime_items(self) -> list[tuple[ReasoningItem, dict[str, Any]]]:
        """The conversation's sealed results, opened (each reasoning item the runtime made)."""
        if self._opened is not None:
            return self._opened
        found = []
        for item in of_type(self.conversation.items, ReasoningItem):
            runtime_like = not item.id or item.id.startswith("rs_rt")
            if item.encrypted_content and runtime_like:
                data = self.signer.unseal(REASONING_DOMAIN, item.encrypted_content)
                if not item.id and not str((data or {}).get("id", "")).startswith("rs_rt"):
                    continue  # an id-less reasoning item of a turn's, not the sealed results
                if data is None or (item.id and data.get("id") != item.id):
                    raise messages.encrypted_content_unverified(item.id)
                found.append((item, data))
        self._opened = found
        return found

    def results(self, program: str) -> dict[int, ToolResult]:
        """The hidden results a program has had so far, by call position: every sealed result the
        conversation carries for it (each pause seals only what is new since the one before)."""
        found = self._results.get(program)
        if found is None:
            found = {}
            decided = self._decided.setdefault(program, {})
            recorded = self._recorded.setdefault(program, set())
            for _, data in self._runtime_items():
                runtime = data.get("runtime")
                if isinstance(runtime, dict) and runtime.get("program") == program:
                    for index, name, arguments, output, is_error, *approval in runtime.get("calls", []):
                        recorded.add(int(index))
                        result = ToolResult(name, arguments, output, is_error=bool(is_error))
                        if approval:  # a call that needed approval: the decision this request carries counts
                            approval_id = str(approval[0])
                            now = self._sealed_decision(approval_id, bool(approval[1]), result)
                            if now is None:
                                found.pop(int(index), None)
                                continue
                            result, approves = now
                            decided[int(index)] = (approval_id, approves)
                        found[int(index)] = result
            self._results[program] = found
            self._sealed[program] = set(found)
        return found

    def _sealed_decision(self, approval_id: str, approved: bool, result: ToolResult) -> tuple[ToolResult, bool] | None:
        """A sealed result of a call that needed approval, as this request's decision leaves it:
        the result when it approves the call the result is of; the denial when it denies it (the
        call may have run on an earlier approval: the program sees the denial all the same); None
        when the call is to be asked for, or made, again (no decision, or an approval where the
        sealed result is a denial). The request item sent back is checked against the call first."""
        label, _, name = result.name.partition(".")
        self.check_replayed(approval_id, label, name, result.arguments)
        answer = self._approval(approval_id)
        if answer is None:
            return None
        if not answer.approve:
            return (result if not approved else _denied(result.name, result.arguments, answer)), False
        return (result, True) if approved else None

    def carried_bytes(self) -> int:
        """What the results of server-run calls the conversation carries take when a client sends
        them back: its sealed results and its visible server-run items, this response's included."""
        if self._carried is None:
            sealed = sum(_sealed_size(item) for item, _ in self._runtime_items())
            self._carried = sealed + sum(map(visible_size, visible_items(self.conversation.items)))
        return self._carried + self._added

    def count(self, item: Item) -> None:
        """Count a visible server-run item this response emits (a scripted code interpreter or shell
        result) into what the conversation carries."""
        self._added += visible_size(item)

    def carry_listing(self, item: McpListTools) -> str | None:
        """Count an MCP listing's item, or say why it would take what the conversation carries past
        `max_sealed_bytes` (then nothing is counted: the listing fails)."""
        size = visible_size(item)
        if self.max_sealed_bytes is not None:
            carried = self.carried_bytes()
            if carried + size > self.max_sealed_bytes:
                return messages.visible_listing_too_large(item.server_label, size, carried, self.max_sealed_bytes)
        self._added += size
        return None

    def carry(self, call: McpCall) -> str | None:
        """Count a direct MCP call's item, or say why its result would take what the conversation
        carries past `max_sealed_bytes` (then nothing is counted: the call is answered failed)."""
        size = visible_size(call)
        if self.max_sealed_bytes is not None:
            carried = self.carried_bytes()
            if carried + size > self.max_sealed_bytes:
                return messages.visible_result_too_large(
                    f"{call.server_label}.{call.name}", size, carried, self.max_sealed_bytes
                )
        self._added += size
        return None

    def sealed_results(self, program: str) -> ReasoningItem | str | None:
        """The reasoning item that seals the results new since the program's last pause, to emit
        at this one (None when there are none); or, when it would take the conversation's sealed
        results past `max_sealed_bytes`, why the program must stop instead.

        Only the new results are sealed: each pause resealing every result so far would make a
        conversation carry results again at every pause (n pauses, n*(n+1)/2 results sent back)."""
        results = self.results(program)
        sealed = self._sealed.setdefault(program, set())
        new = sorted(i for i in results if i not in sealed)
        if not new:
            return None
        decided = self._decided.get(program, {})
        calls = [
            [i, results[i].name, results[i].arguments, results[i].output, results[i].is_error, *decided.get(i, ())]
            for i in new
        ]
        rid = "rs_rt" + self.signer.token("runtime", program, str(len(results)), length=40)
        content = self.signer.seal(
            REASONING_DOMAIN, {"id": rid, "summary": "", "runtime": {"program": program, "calls": calls}}
        )
        item = ReasoningItem(id=rid, summary=[], encrypted_content=content)
        if self.max_sealed_bytes is not None:
            carried = self.carried_bytes()
            if carried + _sealed_size(item) > self.max_sealed_bytes:
                return messages.sealed_results_too_large(len(new), _sealed_size(item), carried, self.max_sealed_bytes)
        self._added += _sealed_size(item)
        sealed.update(new)
        return item

    def approval_id(self, program: str, index: int, label: str, name: str, arguments: str) -> str:
        """The id of the approval request for this call: it covers what is called, not only where."""
        return self.signer.mcp_approval_id(program, index, label, name, arguments)

    def check_replayed(self, approval_id: str, label: str, name: str, arguments: str) -> None:
        """Refuse an approval whose request item, as the client sent it back, is not this call."""
        request = self.conversation.approval_requests.get(approval_id)
        if request is None:
            return
        other_label = (request.server_label, label) if request.server_label != label else None
        other_name = (request.name, name) if request.name != name else None
        same = _canonical(request.arguments) == _canonical(arguments)
        other_arguments = None if same else (request.arguments, arguments)
        if other_label is None and other_name is None and other_arguments is None:
            return
        at = next((i for i, item in enumerate(self.conversation.items) if item is request), -1)
        new_from = self.conversation.new_from
        param = f"input[{at - new_from}]" if at >= new_from else "previous_response_id"
        raise messages.approval_request_mismatch(
            approval_id, param, server_label=other_label, name=other_name, arguments=other_arguments
        )

    def check_not_run(self, program: str, index: int, approval_id: str, label: str, name: str) -> None:
        """Refuse to make an approved call again: when the conversation carries no sealed result of
        it, but an item the program issued after the call's approval (a later call, or approval
        request), the call ran in the response that issued it, whose sealed results the client
        did not send back (a `store: false` client dropping the `reasoning` item)."""
        if index in self._recorded.get(program, ()):
            return
        items = self.conversation.items
        at = next(
            (
                i
                for i, item in enumerate(items)
                if isinstance(item, McpApprovalResponse) and item.approval_request_id == approval_id
            ),
            None,
        )
        if at is None:
            return
        issued = {id(item) for item in self.conversation.program_calls(program)}
        issued.update(
            id(request)
            for request in self.conversation.approval_requests.values()
            if isinstance(request.caller, ProgramCaller) and request.caller.caller_id == program
        )
        if any(id(item) in issued for item in items[at + 1 :]):
            new_from = self.conversation.new_from
            param = f"input[{at - new_from}]" if at >= new_from else "previous_response_id"
            raise messages.sealed_result_missing(approval_id, f"{label}.{name}", param)

    def _asked_past(self, program: str, step: int) -> bool:
        """Whether the conversation holds an approval request of the program's at `step` or later
        (the step ran in an earlier response): one that is none of the calls before the step."""
        before = {approval_id for index, (approval_id, _) in self._decided.get(program, {}).items() if index < step}
        return any(
            isinstance(request.caller, ProgramCaller)
            and request.caller.caller_id == program
            and request_id not in before
            for request_id, request in self.conversation.approval_requests.items()
        )

    def _program_param(self, program: str) -> str:
        """Where the program's item stands (the open program's): `input[n]`, or `previous_response_id`."""
        conv = self.conversation
        at = conv.open_index if conv.open_program is not None and conv.open_program.call_id == program else -1
        return f"input[{at - conv.new_from}]" if at >= conv.new_from else "previous_response_id"

    def _approval(self, approval_id: str) -> McpApprovalResponse | None:
        return next(
            (
                i
                for i in self.conversation.items
                if isinstance(i, McpApprovalResponse) and i.approval_request_id == approval_id
            ),
            None,
        )

    # ---- answering a program's calls ------------------------------------------------------------

    def budget(self) -> HostedBudget:
        """A new budget for one program run's calls to MCP servers (the program's timeout)."""
        return HostedBudget(self.program_timeout_s)

    async def resolve_all(
        self,
        program: str,
        pendings: list[PendingCall],
        budget: HostedBudget,
        step: int | None = None,
        answered_past: bool = False,
    ) -> list[ToolResult | McpApprovalRequest | Unscripted | OutOfTime]:
        """Answer the hidden calls one step of a program issued together (in issue order), or say
        what each waits for. What needs no MCP server is answered first, in order, up to the first
        call nobody scripted (the calls after it are not made); the calls that reach an MCP server
        then run together, `HOSTED_CONCURRENCY` at a time, within what is left of `budget`: a call
        the budget cuts, or one it leaves no time to start, is `OutOfTime`. The journal
        (`hosted_calls`) lists the calls in issue order, whatever order their answers came in.
        `step`: the first position of the step; `answered_past`: whether the client answered a call
        of this step or a later one (the step ran in an earlier response: its calls were made)."""
        results = self.results(program)
        on_loop = [0]  # what the step's matching on the event loop may cost so far (`_local`)
        answers: list[ToolResult | McpApprovalRequest | Unscripted | OutOfTime | _Remote] = []
        journals: list[list[dict[str, Any]]] = []
        keys: list[str | None] = []
        for pending in pendings:
            journal: list[dict[str, Any]] = []
            answer, key = await self._local(program, pending, results, journal, on_loop)
            answers.append(answer)
            journals.append(journal)
            keys.append(key)
            if isinstance(answer, Unscripted):
                break
        remote = [(i, a) for i, a in enumerate(answers) if isinstance(a, _Remote)]
        unapproved = [call for call in remote if "approval_request_id" not in call[1].entry]
        if unapproved and step is not None and (answered_past or self._asked_past(program, step)):
            # The step ran in an earlier response, so these calls were made there: their sealed
            # results were dropped and the memo no longer has them. Refused, never made again.
            call = unapproved[0][1]
            raise messages.sealed_result_missing(None, call.pending.name, self._program_param(program))
        if remote:
            gate = asyncio.Semaphore(HOSTED_CONCURRENCY)
            tasks = [asyncio.ensure_future(self._call(call, keys[i], gate, budget)) for i, call in remote]
            try:
                made = await asyncio.gather(*tasks)
            finally:
                for task in tasks:  # one failed: the others are not left running
                    task.cancel()
                budget.end_step()
            cut = sum(1 for m in made if m is None)
            for (i, call), result in zip(remote, made, strict=True):
                answers[i] = self._answered(call, result, journals[i], cut, budget)
        done: list[ToolResult | McpApprovalRequest | Unscripted | OutOfTime] = []
        for pending, answer, journal, key in zip(pendings, answers, journals, keys, strict=False):
            assert not isinstance(answer, _Remote)
            self.calls.extend(journal)
            if isinstance(answer, ToolResult) and pending.index not in results:
                results[pending.index] = answer
                if key is not None:
                    self.hidden_results.put(key, answer, self.client)
            done.append(answer)
        return done

    async def _local(
        self,
        program: str,
        pending: PendingCall,
        results: dict[int, ToolResult],
        journal: list[dict[str, Any]],
        on_loop: list[int],
    ) -> tuple[ToolResult | McpApprovalRequest | Unscripted | OutOfTime | _Remote, str | None]:
        """A call's answer when no MCP server need be reached, or the `_Remote` call to make; and
        its key in the hidden results kept for retries (None: known already). `on_loop`: what the
        matching of the step's calls done on the event loop may have cost (instructions × bytes):
        a call whose matching would take it past `patterns.MATCH_BUDGET` is matched in a worker
        thread, where RE2 lets the loop run. Each call alone within the budget, 280 of them in one
        `Promise.all` held every other client 3 s."""
        approval_id: str | None = None
        if pending.name not in (CODE_INTERPRETER, SHELL):
            # Before any result known or kept: the decision this request carries is the one that
            # counts, and the request item it sends back must be the one issued.
            approval_id, decided = await self._gate(program, pending, journal)
            if decided is not None:
                return decided, None  # asked, or denied: never kept for a retry
        if pending.index in results:
            return results[pending.index], None
        key = self.signer.token("hosted-call", program, str(pending.index), pending.name, pending.arguments, length=48)
        remembered = self.hidden_results.get(key)
        if remembered is not None:
            results[pending.index] = remembered
            return remembered, None
        if approval_id is not None:
            label, _, name = pending.name.partition(".")
            self.check_not_run(program, pending.index, approval_id, label, name)
        arguments = _arguments(pending.arguments)
        if pending.name in (CODE_INTERPRETER, SHELL):
            run = self._code_interpreter if pending.name == CODE_INTERPRETER else self._shell
            given = arguments.get("code") if pending.name == CODE_INTERPRETER else arguments.get("commands")
            texts = [t for t in (given if isinstance(given, list) else [given]) if isinstance(t, str)]
            cost = self._cost(pending.name, texts)
            if on_loop[0] + cost > MATCH_BUDGET:  # matched in a worker thread: a few ms at most on the loop
                return await asyncio.to_thread(run, pending, arguments, journal), key
            on_loop[0] += cost
            return run(pending, arguments, journal), key
        return await self._mcp(pending, arguments, journal, approval_id), key

    async def _gate(
        self, program: str, pending: PendingCall, journal: list[dict[str, Any]]
    ) -> tuple[str | None, McpApprovalRequest | ToolResult | None]:
        """An MCP call's approval: the id of the request it needs (None: it needs none), and the
        request to pause on (no decision yet) or the denial; None when it may be made. A request
        item sent back changed is refused, whatever was decided before."""
        label, _, name = pending.name.partition(".")
        tool = self.mcp_tools[label]
        listing = await self.listing(tool)
        if not tool.needs_approval(name, name in listing.read_only):
            return None, None
        approval_id = self.approval_id(program, pending.index, label, name, pending.arguments)
        self.check_replayed(approval_id, label, name, pending.arguments)
        answer = self._approval(approval_id)
        if answer is None:
            request = McpApprovalRequest(
                id=approval_id,
                name=name,
                server_label=label,
                arguments=pending.arguments,
                caller=ProgramCaller(caller_id=program),
            )
            return approval_id, request
        self._decided.setdefault(program, {})[pending.index] = (approval_id, answer.approve)
        if answer.approve:
            return approval_id, None
        entry = {"kind": "mcp", "route": "program", "server_label": label, "name": name}
        journal.append({**entry, "approval_request_id": approval_id, "status": "denied"})
        return approval_id, _denied(pending.name, pending.arguments, answer)

    async def _mcp(
        self, pending: PendingCall, arguments: dict[str, Any], journal: list[dict[str, Any]], approval_id: str | None
    ) -> ToolResult | McpApprovalRequest | Unscripted | OutOfTime | _Remote:
        label, _, name = pending.name.partition(".")
        tool = self.mcp_tools[label]
        entry: dict[str, Any] = {"kind": "mcp", "route": "program", "server_label": label, "name": name}
        if approval_id is not None:
            entry["approval_request_id"] = approval_id
        call = _Remote(pending, tool, name, arguments, entry)
        if self.declared(label) is not None or tool.server_url is None:  # answered here, at once
            return self._answered(call, await self._call_tool(call), journal, 0, None)
        return call

    async def _call_tool(self, call: _Remote) -> CallResult:
        label = call.tool.server_label
        return await call_tool(
            call.tool,
            self.declared(label),
            call.name,
            call.arguments,
            self.policy,
            timeout_s=self.program_timeout_s,
            client=self.client,
        )

    async def _shared(self, call: _Remote, key: str | None) -> CallResult | ToolResult:
        """The call's answer, from the one call in flight for `key` in this process (the requests
        needing it at once share it), or its result kept since `_local` looked."""
        if key is None:
            return await self._call_tool(call)
        remembered = self.hidden_results.get(key)
        if remembered is not None:
            return remembered
        pending = call.pending
        return await self.hidden_results.once(
            key, lambda: self._call_tool(call), lambda result: _tool_result(pending, result), self.client
        )

    async def _call(
        self, call: _Remote, key: str | None, gate: asyncio.Semaphore, budget: HostedBudget
    ) -> CallResult | ToolResult | None:
        """Make a call to an MCP server within what is left of `budget`: None when the budget cut
        it (`call.started` says whether it had reached the server) or left no time to start it.
        A call the budget leaves at least its own deadline for ends by that deadline, as alone.
        The requests needing the same call (`key`) at once share it (`_shared`)."""
        async with gate:
            left = budget.left()
            if left is not None and left <= 0:
                return None
            call.started = True
            own = min(self.policy.timeout_s, self.program_timeout_s or math.inf)
            if left is None or left >= own:
                return await self._shared(call, key)
            try:
                async with asyncio.timeout(left):
                    return await self._shared(call, key)
            except TimeoutError:
                return None

    def _answered(
        self,
        call: _Remote,
        result: CallResult | ToolResult | None,
        journal: list[dict[str, Any]],
        cut: int,
        budget: HostedBudget | None,
    ) -> ToolResult | Unscripted | OutOfTime:
        pending, label = call.pending, call.tool.server_label
        if isinstance(result, ToolResult):  # kept by a request that made the call meanwhile
            return result
        if result is None:
            assert budget is not None
            if call.started:  # it reached the server: its effects may have happened
                journal.append({**call.entry, "status": "incomplete", "error": None})
            return OutOfTime(messages.hosted_calls_out_of_time(cut, budget.total_s or 0.0))
        if not result.scripted:
            return Unscripted(
                f"The program called tools.{pending.name}({pending.arguments}), and the declared MCP server "
                f"'{label}' has no result for these arguments: add one under hosted.mcp_servers.{label}."
            )
        journal.append({**call.entry, "status": "failed" if result.error else "completed", "error": result.error})
        answer = _tool_result(pending, result)
        assert answer is not None
        return answer

    def code_result(self, code: str) -> CodeInterpreterSpec | None:
        """The scripted result for this code: the first entry whose pattern it matches."""
        specs = self.script.code_interpreter if self.script is not None else []
        with _metered("code_interpreter"):
            found: CodeInterpreterSpec | None = _first_matching(specs, "code_interpreter", "code", code)
        return found

    async def code_result_off_loop(self, code: str) -> CodeInterpreterSpec | None:
        """`code_result`, in a worker thread when matching may cost more than on the event loop."""
        if self._heavy(CODE_INTERPRETER, [code]):
            return await asyncio.to_thread(self.code_result, code)
        return self.code_result(code)

    async def shell_results_off_loop(self, commands: list[str]) -> list[dict[str, Any]] | str:
        """`shell_results`, in a worker thread when matching may cost more than on the event loop."""
        if self._heavy(SHELL, commands):
            return await asyncio.to_thread(self.shell_results, commands)
        return self.shell_results(commands)

    def _heavy(self, tool: str, texts: list[str]) -> bool:
        return self._cost(tool, texts) > MATCH_BUDGET

    def _cost(self, tool: str, texts: list[str]) -> int:
        """What matching `texts` against the entries of `tool` may cost (instructions × bytes)."""
        if self.script is None:
            return 0
        return _cost(self.script.code_interpreter if tool == CODE_INTERPRETER else self.script.shell, texts)

    def _code_interpreter(
        self, pending: PendingCall, arguments: dict[str, Any], journal: list[dict[str, Any]]
    ) -> ToolResult | Unscripted:
        code = arguments.get("code")
        if not isinstance(code, str):
            return ToolResult(
                pending.name, pending.arguments, "tools.code_interpreter() takes {code: string}", is_error=True
            )
        specs = self.script.code_interpreter if self.script is not None else []
        try:
            spec = self.code_result(code)
        except HostedPatternTooCostly as e:
            return Unscripted(f"The program called tools.code_interpreter, which runs on OpenAI's side: {e.reason}.")
        if spec is None:
            return Unscripted(
                "The program called tools.code_interpreter, which runs on OpenAI's side: "
                + (
                    "no entry of hosted.code_interpreter matches its code."
                    if specs
                    else "no scenario scripts its results (hosted.code_interpreter)."
                )
            )
        ci = self.code_interpreter
        container = ci.container_id if ci is not None else "cntr_emulator"
        journal.append(
            {"kind": "code_interpreter", "route": "program", "status": "failed" if spec.error else "completed"}
        )
        if spec.error is not None:
            return ToolResult(pending.name, pending.arguments, spec.error, is_error=True)
        outputs = spec.all_outputs()
        logs = "".join(str(o.get("logs", "")) for o in outputs if o.get("type") == "logs")
        value = {"container_id": container, "outputs": outputs, "logs": logs}
        return ToolResult(pending.name, pending.arguments, json.dumps(value, ensure_ascii=False))

    def shell_results(self, commands: list[str]) -> list[dict[str, Any]] | str:
        """Each command's scripted result (the first `hosted.shell` entry it matches), or the
        first command that none matches."""
        specs = self.script.shell if self.script is not None else []
        outputs = []
        with _metered("shell"):
            for command in commands:
                spec = _first_matching(specs, "shell", "command", command, full=True)
                if spec is None:
                    return command
                outputs.append(spec.output())
        return outputs

    def _shell(
        self, pending: PendingCall, arguments: dict[str, Any], journal: list[dict[str, Any]]
    ) -> ToolResult | Unscripted:
        commands = arguments.get("commands")
        if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands) or not commands:
            return ToolResult(
                pending.name,
                pending.arguments,
                "tools.shell() takes {commands: string[], timeout_ms?, max_output_length?}",
                is_error=True,
            )
        try:
            outputs = self.shell_results(commands)
        except HostedPatternTooCostly as e:
            return Unscripted(f"The program ran a command in a hosted shell (which runs on OpenAI's side): {e.reason}.")
        if isinstance(outputs, str):
            return Unscripted(
                f"The program ran the command {outputs!r} in a hosted shell (which runs on OpenAI's side), and "
                "no entry of the scenario's hosted.shell matches it."
            )
        journal.append({"kind": "shell", "route": "program", "status": "completed", "commands": len(commands)})
        return ToolResult(pending.name, pending.arguments, json.dumps(outputs, ensure_ascii=False))


SEALED_ITEM_BYTES = 256
"""What a sealed results item takes on the wire besides its `encrypted_content` (its id, type,
`summary` and the fields a client adds when it sends it back), counted generously."""


def _sealed_size(item: ReasoningItem) -> int:
    """The bytes a sealed results item takes in a request that sends it back: its content is
    URL-safe base64, which no JSON encoder escapes."""
    return len(item.encrypted_content or "") + SEALED_ITEM_BYTES


def visible_size(item: Item) -> int:
    """The bytes a visible item takes in a request that sends it back: its JSON with every
    non-ASCII character escaped, as the most escaping clients send it. A long one (a 7 MB listing)
    is measured a piece at a time, letting the other threads run between two (`jsonreply`)."""
    return sum(map(len, jsonreply.texts(item.model_dump(mode="json", exclude_none=True))))


def visible_items(items: list[Item]) -> list[Item]:
    """The visible items of server-run calls among `items`: MCP listings and calls, code
    interpreter calls, and the outputs of shell calls run in a hosted container."""
    hosted_shells = {i.call_id for i in of_type(items, ShellCall) if hosted_shell_call(i)}
    return [
        i
        for i in items
        if isinstance(i, McpListTools | McpCall | CodeInterpreterCall)
        or (isinstance(i, ShellCallOutput) and i.call_id in hosted_shells)
    ]


def hosted_shell_call(call: ShellCall) -> bool:
    """Whether a shell call ran in a hosted container (the server ran it and answered it)."""
    environment = call.environment
    return isinstance(environment, dict) and environment.get("type") in HOSTED_ENVIRONMENTS


def _tool_result(pending: PendingCall, result: CallResult) -> ToolResult | None:
    """What the program gets of an MCP server's answer (None: a declared server had none)."""
    if not result.scripted:
        return None
    if result.error is not None:
        return ToolResult(pending.name, pending.arguments, result.message(), is_error=True)
    return ToolResult(pending.name, pending.arguments, result.output or "")


def _denied(name: str, arguments: str, answer: McpApprovalResponse) -> ToolResult:
    """What a program's call sees when its approval request was answered `approve: false`."""
    why = f": {answer.reason}" if answer.reason else ""
    return ToolResult(name, arguments, f"The call to {name} was not approved{why}", is_error=True)


def _canonical(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except json.JSONDecodeError:
        return text


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
