"""Reads a conversation (stored history plus this request's input) and holds it to the rules.

The hosted API is strict about the item sequence and so is this: every tool call (of any kind:
function, custom, shell, apply_patch, local_shell; see `tools/kinds.py`) needs its output, every
output its call, of the matching kind; a program call's output must carry the caller it was issued
with, and items the server issued (fingerprints, program outputs) must come back unmodified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.history.cursor import Extension, RulesPass
from ptc_emulator.emulator.signing import ProgramSeal, Signer
from ptc_emulator.emulator.tools.kinds import answer_key, kind_of_call, kind_of_output
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    AdditionalToolsItem,
    CallItem,
    CodeInterpreterCall,
    ConfigurationUpdateItem,
    Item,
    LocalShellCall,
    LocalShellCallOutput,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    McpListTools,
    Message,
    OutputItem,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)

__all__ = ["Conversation", "analyse", "file_program_call"]


_CLIENT_MAY_SEND = (
    *OUTPUT_TYPES,
    Message,
    ToolSearchOutputItem,
    McpApprovalResponse,
    AdditionalToolsItem,
    ConfigurationUpdateItem,
)
"""Items a client adds after the model's latest output (with the tool outputs that answer it)."""


@dataclass
class Conversation:
    items: list[Item]
    new_from: int
    """Index of the first item of this request's input."""
    anchor: int
    """Index of the latest user message: what the scripted model answers."""
    calls: dict[str, CallItem] = field(default_factory=dict)
    outputs: dict[str, OutputItem] = field(default_factory=dict)
    programs: dict[str, ProgramItem] = field(default_factory=dict)
    seals: dict[str, ProgramSeal] = field(default_factory=dict)
    program_outputs: dict[str, ProgramOutputItem] = field(default_factory=dict)
    approval_requests: dict[str, McpApprovalRequest] = field(default_factory=dict)
    approval_responses: dict[str, McpApprovalResponse] = field(default_factory=dict)
    """By `approval_request_id`."""
    search_calls: dict[str, ToolSearchCallItem] = field(default_factory=dict)
    search_outputs: dict[str, ToolSearchOutputItem] = field(default_factory=dict)
    open_program: ProgramItem | None = None
    open_index: int = -1
    """Index of the open program's item."""
    _program_calls: dict[str, list[CallItem]] | None = field(default=None, repr=False, compare=False)
    """Every program's calls, by the program's call_id: made in one pass, when first asked for."""
    cursor: Extension = field(default_factory=Extension, repr=False, compare=False)
    """What is derived over this conversation's items, read on from the cursor its source
    recognised and left for the next request (`history/cursor.py`)."""
    read_from: int = 0
    """Where the rules' pass began reading (the items before it were read for an earlier request)."""
    visible: list[Item] | None = None
    """With a compaction item read back (`compaction.Expanded`): what a hosted model's context holds."""
    sent: list[Item] | None = None
    """With a compaction item in this request's input: the input as sent (what is stored)."""

    @property
    def anchor_text(self) -> str:
        message = self.items[self.anchor]
        assert isinstance(message, Message)
        return message.text()

    def program_calls(self, program_call_id: str) -> list[CallItem]:
        """The program's tool calls, of every kind, in issue order (the order the server emitted them)."""
        if self._program_calls is None:  # a conversation `analyse` did not read
            by_program: dict[str, list[CallItem]] = {}
            for item in self.items:
                if isinstance(item, CALL_TYPES):
                    file_program_call(by_program, item)
            self._program_calls = by_program
        return list(self._program_calls.get(program_call_id, ()))

    def latest_outputs(self) -> list[OutputItem]:
        """The tool outputs that answer the latest model output (after the last item the model
        produced). A `store: false` replay resends the earlier ones too; these are the new ones."""
        last = -1  # the last item the model produced, found from the end (a replay's history is long)
        for i in range(len(self.items) - 1, -1, -1):
            item = self.items[i]
            if (
                not isinstance(item, _CLIENT_MAY_SEND)
                or (isinstance(item, Message) and item.role == "assistant")
                or (isinstance(item, ToolSearchOutputItem) and item.execution != "client")
            ):
                last = i
                break
        return [item for item in self.items[last + 1 :] if isinstance(item, OUTPUT_TYPES)]

    def after_anchor(self) -> list[Item]:
        return self.items[self.anchor + 1 :]


def file_program_call(by_program: dict[str, list[CallItem]], call: CallItem) -> None:
    """Add `call` to its program's calls, if a program made it."""
    caller = getattr(call, "caller", None)
    if isinstance(caller, ProgramCaller):
        by_program.setdefault(caller.caller_id, []).append(call)


def _param(index: int, new_from: int, shift: int = 0) -> str:
    return f"input[{index - new_from + shift}]" if index >= new_from else "previous_response_id"


def analyse(
    items: list[Item], new_from: int, signer: Signer, cursor: Extension | None = None, shift: int = 0
) -> Conversation:
    """Read the conversation and hold it to the rules (an `InvalidRequest` names the first item
    that breaks one). `cursor`: what the request's source recognised, so that a known prefix is
    not read again (the pass is read on from its base cursor's and left at its mark).
    `shift`: how many input items a compaction item's window replaced (`compaction.Expanded`)."""
    conv = Conversation(items, new_from, -1)
    conv.cursor = ext = cursor.fit(items) if cursor is not None else Extension()
    by_program: dict[str, list[CallItem]] = {}
    program_at: dict[str, int] = {}
    start = ext.start
    if ext.base is not None and ext.base.rules is not None:
        by_program, program_at = ext.base.rules.restore(conv)
    conv.read_from = start
    mark = ext.mark
    for i in range(start, len(items)):
        if i == mark and ext.cursor is not None:
            ext.cursor.rules = RulesPass.of(conv, by_program, program_at)
        item = items[i]
        param = _param(i, new_from, shift)
        if isinstance(item, Message):
            if item.role == "user":
                conv.anchor = i
        elif isinstance(item, CALL_TYPES):
            _add_call(conv, item, param)
            file_program_call(by_program, item)
        elif isinstance(item, OUTPUT_TYPES):
            _add_output(conv, item, param)
        elif isinstance(item, ProgramItem):
            if item.call_id in conv.programs:
                raise InvalidRequest(
                    f"Duplicate item: a program with call_id '{item.call_id}' appears more than once.", param=param
                )
            conv.seals[item.call_id] = signer.open_fingerprint(
                item.fingerprint, call_id=item.call_id, code=item.code, param=param
            )
            conv.programs[item.call_id] = item
            program_at[item.call_id] = i
        elif isinstance(item, ProgramOutputItem):
            _add_program_output(conv, item, param, signer)
        elif isinstance(item, ToolSearchCallItem):
            _add_search_call(conv, item, param)
        elif isinstance(item, ToolSearchOutputItem):
            _add_search_output(conv, item, param)
        elif isinstance(item, McpListTools | McpCall | CodeInterpreterCall) and isinstance(item.caller, ProgramCaller):
            if item.caller.caller_id not in conv.programs:
                raise InvalidRequest(
                    f"Item {item.id} of type '{item.type}' has caller program '{item.caller.caller_id}', but no "
                    "program item with that call_id comes before it.",
                    param=f"{param}.caller",
                )
        elif isinstance(item, McpApprovalRequest):
            _add_approval_request(conv, item, param)
        elif isinstance(item, McpApprovalResponse):
            _add_approval_response(conv, item, param)
    conv._program_calls = by_program
    if mark == len(items) and ext.cursor is not None and ext.cursor.rules is None:
        ext.cursor.rules = RulesPass.of(conv, by_program, program_at)
    anchor = conv.anchor
    for call_id, call in conv.calls.items():
        if call_id not in conv.outputs:
            raise InvalidRequest(f"No tool output found for {kind_of_call(call).label} {call_id}.", param="input")
    for call_id, search in conv.search_calls.items():
        if search.execution == "client" and call_id not in conv.search_outputs:
            raise InvalidRequest(
                f"No tool_search_output found for client-executed tool search call {call_id}: answer it with the "
                "tools it loads (an empty list loads none).",
                param="input",
            )
    if anchor < 0:
        raise InvalidRequest("The input has no user message for the model to answer.", param="input")
    open_programs = [p for p in conv.programs.values() if p.call_id not in conv.program_outputs]
    if len(open_programs) > 1:
        raise InvalidRequest(
            f"No program_output found for program with call_id '{open_programs[0].call_id}': replay every item "
            "in order.",
            param="input",
        )
    if open_programs:
        conv.open_program = open_programs[-1]
        conv.open_index = program_at[conv.open_program.call_id]
        for request in conv.approval_requests.values():
            caller = request.caller
            if (
                isinstance(caller, ProgramCaller)
                and caller.caller_id == conv.open_program.call_id
                and request.id not in conv.approval_responses
            ):
                raise InvalidRequest(
                    f"No mcp_approval_response found for approval request {request.id}: program "
                    f"{caller.caller_id} is paused on it.",
                    param="input",
                )
    return conv


def _add_approval_request(conv: Conversation, item: McpApprovalRequest, param: str) -> None:
    if item.id in conv.approval_requests:
        raise InvalidRequest(
            f"Duplicate item: an mcp_approval_request with id '{item.id}' appears more than once.", param=param
        )
    if isinstance(item.caller, ProgramCaller):
        if item.caller.caller_id not in conv.programs:
            raise InvalidRequest(
                f"Approval request {item.id} has caller program '{item.caller.caller_id}', but no program item with "
                "that call_id comes before it.",
                param=param,
            )
        if item.caller.caller_id in conv.program_outputs:
            raise InvalidRequest(
                f"Approval request {item.id} belongs to program '{item.caller.caller_id}', which already finished.",
                param=param,
            )
    conv.approval_requests[item.id] = item


def _add_approval_response(conv: Conversation, item: McpApprovalResponse, param: str) -> None:
    request = conv.approval_requests.get(item.approval_request_id)
    if request is None:
        raise InvalidRequest(
            f"No approval request found for mcp_approval_response with approval_request_id "
            f"'{item.approval_request_id}'.",
            param=f"{param}.approval_request_id",
        )
    if item.approval_request_id in conv.approval_responses:
        raise InvalidRequest(
            f"Duplicate item: approval request '{item.approval_request_id}' is answered more than once.", param=param
        )
    expected = request.caller if isinstance(request.caller, ProgramCaller) else None
    given = item.caller if isinstance(item.caller, ProgramCaller) else None
    if given is not None and expected != given:
        raise InvalidRequest(
            f"The mcp_approval_response for {item.approval_request_id} must carry the caller of its request "
            "unchanged, or none.",
            param=f"{param}.caller",
        )
    conv.approval_responses[item.approval_request_id] = item


def _add_call(conv: Conversation, call: CallItem, param: str) -> None:
    label = kind_of_call(call).label
    if call.call_id in conv.calls:
        raise InvalidRequest(
            f"Duplicate item: a {call.type} with call_id '{call.call_id}' appears more than once.", param=param
        )
    caller = getattr(call, "caller", None)
    if isinstance(caller, ProgramCaller) and caller.caller_id not in conv.programs:
        raise InvalidRequest(
            f"{label.capitalize()} {call.call_id} has caller program '{caller.caller_id}', but no program item "
            "with that call_id comes before it.",
            param=param,
        )
    if isinstance(caller, ProgramCaller) and caller.caller_id in conv.program_outputs:
        raise InvalidRequest(
            f"{label.capitalize()} {call.call_id} belongs to program '{caller.caller_id}', which already finished.",
            param=param,
        )
    conv.calls[call.call_id] = call


def _add_output(conv: Conversation, output: OutputItem, param: str) -> None:
    kind = kind_of_output(output)
    call_id = answer_key(output)
    if call_id is None:
        raise InvalidRequest(
            f"Missing required parameter: '{param}.call_id'.",
            param=f"{param}.call_id",
            code="missing_required_parameter",
        )
    call = conv.calls.get(call_id)
    if call is None and isinstance(output, LocalShellCallOutput):  # named by the call's item id
        call = next((c for c in conv.calls.values() if isinstance(c, LocalShellCall) and c.id == call_id), None)
        call_id = call.call_id if call is not None else call_id
    if call is None:
        raise InvalidRequest(f"No tool call found for {kind.label} output with call_id {call_id}.", param="input")
    if call.type != kind.call_type:
        raise InvalidRequest(
            f"The {output.type} with call_id {call_id} answers a {call.type}: answer it with a "
            f"{kind_of_call(call).output_type}.",
            param=f"{param}.type",
        )
    if call_id in conv.outputs:
        raise InvalidRequest(
            f"Duplicate item: a {output.type} for call_id '{call_id}' appears more than once.",
            param=param,
        )
    call_caller = getattr(call, "caller", None)
    output_caller = getattr(output, "caller", None)
    expected = call_caller if isinstance(call_caller, ProgramCaller) else None
    given = output_caller if isinstance(output_caller, ProgramCaller) else None
    if expected != given:
        want = (
            f'{{"type": "program", "caller_id": "{expected.caller_id}"}}'
            if expected
            else 'none (or {"type": "direct"})'
        )
        raise InvalidRequest(
            f"The {output.type} for call_id {call_id} must carry the caller of its {call.type} "
            f"unchanged: expected {want}.",
            param=f"{param}.caller",
        )
    conv.outputs[call_id] = output


def _add_program_output(conv: Conversation, item: ProgramOutputItem, param: str, signer: Signer) -> None:
    if item.call_id not in conv.programs:
        raise InvalidRequest(f"No program found for program_output with call_id {item.call_id}.", param=param)
    if item.call_id in conv.program_outputs:
        raise InvalidRequest(
            f"Duplicate item: a program_output for call_id '{item.call_id}' appears more than once.", param=param
        )
    if item.id != signer.program_output_id(item.call_id, item.status, item.result):
        raise InvalidRequest(
            f"The program_output item with call_id {item.call_id} was modified: replay it as it was returned.",
            param=param,
        )
    conv.program_outputs[item.call_id] = item


def _add_search_call(conv: Conversation, call: ToolSearchCallItem, param: str) -> None:
    if call.call_id is None:
        if call.execution == "client":
            raise InvalidRequest(
                f"Missing required parameter: '{param}.call_id' (a client-executed tool search call needs one).",
                param=f"{param}.call_id",
                code="missing_required_parameter",
            )
        return
    if call.call_id in conv.search_calls:
        raise InvalidRequest(
            f"Duplicate item: a tool_search_call with call_id '{call.call_id}' appears more than once.", param=param
        )
    if any(p not in conv.program_outputs for p in conv.programs):
        raise InvalidRequest(
            "A tool search cannot run while a program is running: the program must finish first.", param=param
        )
    conv.search_calls[call.call_id] = call


def _add_search_output(conv: Conversation, output: ToolSearchOutputItem, param: str) -> None:
    """A search output answers the call with its call_id; without one, it is a server search's
    output replayed as it came (the execution then says who ran it, server by default)."""
    if output.call_id is None:
        if output.execution == "client":
            raise InvalidRequest(
                f"Missing required parameter: '{param}.call_id' (a client tool_search_output answers a call).",
                param=f"{param}.call_id",
                code="missing_required_parameter",
            )
        output.execution = output.execution or "server"
        return
    call = conv.search_calls.get(output.call_id)
    if call is None:
        raise InvalidRequest(
            f"No tool search call found for tool_search_output with call_id {output.call_id}.", param=param
        )
    if output.call_id in conv.search_outputs:
        raise InvalidRequest(
            f"Duplicate item: a tool_search_output for call_id '{output.call_id}' appears more than once.",
            param=param,
        )
    execution = call.execution or "server"
    if output.execution is not None and output.execution != execution:
        raise InvalidRequest(
            f"The tool_search_output for call_id {output.call_id} says execution '{output.execution}', but its "
            f"tool_search_call was executed by the {execution}.",
            param=f"{param}.execution",
        )
    output.execution = execution
    conv.search_outputs[output.call_id] = output
