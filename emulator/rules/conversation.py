"""Reads a conversation (stored history plus this request's input) and holds it to the rules.

The hosted API is strict about the item sequence and so is this: every tool call (of any kind:
function, custom, shell, apply_patch, local_shell; see `tools/kinds.py`) needs its output, every
output its call, of the matching kind; a program call's output must carry the caller it was issued
with, and items the server issued (fingerprints, program outputs) must come back unmodified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.history.cursor import Extension, RulesPass
from ptc_emulator.emulator.signing import REASONING_DOMAIN, ProgramSeal, Signer
from ptc_emulator.emulator.tools.kinds import answer_key, kind_of_call, kind_of_output
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    AdditionalToolsItem,
    CallItem,
    CodeInterpreterCall,
    ConfigurationUpdateItem,
    CustomToolCallOutput,
    FunctionCallOutput,
    Item,
    LocalShellCall,
    LocalShellCallOutput,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    McpListTools,
    Message,
    OutputItem,
    OutputText,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ReasoningItem,
    Refusal,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)

__all__ = ["Conversation", "analyse", "check_message_parts", "file_program_call", "sealed_reasoning_id"]


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
    ids: dict[str, int] = field(default_factory=dict)
    """Every item id, with where it stands: an id comes once in a conversation."""
    reasoning: dict[str, int] = field(default_factory=dict)
    """The id each reasoning item's `encrypted_content` was sealed for (the item's own; for one
    replayed without its id, the one its content names), with where the item stands: each is
    unsealed once, as the pass reads it, and carried on the cursor after."""
    bare_reasoning: dict[int, str] = field(default_factory=dict)
    """The reasoning items without `encrypted_content` (where each stands, its id)."""
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
    items: list[Item],
    new_from: int,
    signer: Signer,
    cursor: Extension | None = None,
    shift: int = 0,
    *,
    whole: bool = True,
) -> Conversation:
    """Read the conversation and hold it to the rules (an `InvalidRequest` names the first item
    that breaks one). `cursor`: what the request's source recognised, so that a known prefix is
    not read again (the pass is read on from its base cursor's and left at its mark).
    `shift`: how many input items a compaction item's window replaced (`compaction.Expanded`).
    `whole=False` (a token count): each item is held to the rules as a create holds it (an
    output answers an earlier call of its kind, once; a program output is the program's own),
    but the conversation need not be ready for a model turn (a call may await its output)."""
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
        item_id = getattr(item, "id", None)
        if isinstance(item_id, str) and item_id and not _names_its_call(conv, item, item_id, items):
            if item_id in conv.ids:
                raise messages.duplicate_item_id(item_id)
            conv.ids[item_id] = i
        if i >= new_from:
            check_message_parts(item, param)
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
                raise messages.duplicate_item("program", item.call_id, param)
            conv.seals[item.call_id] = signer.open_fingerprint(
                item.fingerprint, call_id=item.call_id, code=item.code, param=param
            )
            conv.programs[item.call_id] = item
            program_at[item.call_id] = i
        elif isinstance(item, ProgramOutputItem):
            _add_program_output(conv, item, param, signer)
        elif isinstance(item, ReasoningItem):
            sealed = sealed_reasoning_id(item, signer, param)
            if sealed is None:
                conv.bare_reasoning[i] = item.id
            else:
                conv.reasoning.setdefault(sealed, i)
        elif isinstance(item, ToolSearchCallItem):
            _add_search_call(conv, item, param)
        elif isinstance(item, ToolSearchOutputItem):
            _add_search_output(conv, item, param)
        elif isinstance(item, McpListTools | McpCall | CodeInterpreterCall) and isinstance(item.caller, ProgramCaller):
            if item.caller.caller_id not in conv.programs:
                raise messages.item_without_program(item.id, item.type, item.caller.caller_id, f"{param}.caller")
        elif isinstance(item, McpApprovalRequest):
            _add_approval_request(conv, item, param)
        elif isinstance(item, McpApprovalResponse):
            _add_approval_response(conv, item, param)
    conv._program_calls = by_program
    if mark == len(items) and ext.cursor is not None and ext.cursor.rules is None:
        ext.cursor.rules = RulesPass.of(conv, by_program, program_at)
    if not whole:
        return conv
    anchor = conv.anchor
    for call_id, call in conv.calls.items():
        if call_id not in conv.outputs:
            raise messages.no_tool_output(kind_of_call(call).label, call_id)
    for call_id, search in conv.search_calls.items():
        if search.execution == "client" and call_id not in conv.search_outputs:
            raise messages.no_search_output(call_id)
    if anchor < 0:
        raise messages.no_user_message()
    open_programs = [p for p in conv.programs.values() if p.call_id not in conv.program_outputs]
    if len(open_programs) > 1:
        raise messages.program_output_missing(open_programs[0].call_id)
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
                raise messages.approval_response_missing(request.id, caller.caller_id)
    return conv


def check_message_parts(item: Item, param: str) -> None:
    """An assistant message's content parts are the model's own kinds (`output_text`, `refusal`);
    another message's, and a tool output's given as parts, are input kinds (`input_text`,
    `input_image`, `input_file`). The hosted API refuses another kind, as it words it, naming the part."""
    if isinstance(item, FunctionCallOutput | CustomToolCallOutput):
        if not isinstance(item.output, str):
            for index, part in enumerate(item.output):
                if isinstance(part, OutputText | Refusal):
                    raise messages.input_part_invalid(part.type, f"{param}.output[{index}]")
        return
    if not isinstance(item, Message) or isinstance(item.content, str):
        return
    for index, part in enumerate(item.content):
        if item.role == "assistant" and not isinstance(part, OutputText | Refusal):
            raise messages.assistant_part_invalid(part.type, f"{param}.content[{index}]")
        if item.role != "assistant" and isinstance(part, OutputText | Refusal):
            raise messages.input_part_invalid(part.type, f"{param}.content[{index}]")


def sealed_reasoning_id(item: ReasoningItem, signer: Signer, param: str = "input") -> str | None:
    """The id a reasoning item's `encrypted_content` was sealed for (None when it carries none);
    the 400 `invalid_encrypted_content` when this server did not issue it, or issued it for
    another item. Held wherever a reasoning item arrives: any create's input (stored or not), a
    stored history read back, a conversation's new items. An item replayed without its id (the
    Agents SDK's) is the item its content was sealed for."""
    if item.encrypted_content is None:
        return None
    sealed = signer.unseal(REASONING_DOMAIN, item.encrypted_content)
    sealed_id = sealed.get("id") if sealed is not None else None
    if not isinstance(sealed_id, str) or (item.id and sealed_id != item.id):
        raise messages.encrypted_content_unverified(item.id, param)
    return sealed_id


def _add_approval_request(conv: Conversation, item: McpApprovalRequest, param: str) -> None:
    if isinstance(item.caller, ProgramCaller):
        if item.caller.caller_id not in conv.programs:
            raise messages.approval_without_program(item.id, item.caller.caller_id, param)
        if item.caller.caller_id in conv.program_outputs:
            raise messages.approval_of_finished_program(item.id, item.caller.caller_id, param)
    conv.approval_requests[item.id] = item


def _add_approval_response(conv: Conversation, item: McpApprovalResponse, param: str) -> None:
    request = conv.approval_requests.get(item.approval_request_id)
    if request is None:
        raise messages.approval_request_not_found(item.approval_request_id, param)
    if item.approval_request_id in conv.approval_responses:
        raise messages.duplicate_approval_response(item.approval_request_id, param)
    expected = request.caller if isinstance(request.caller, ProgramCaller) else None
    given = item.caller if isinstance(item.caller, ProgramCaller) else None
    if given is not None and expected != given:
        raise messages.approval_caller_changed(item.approval_request_id, param)
    conv.approval_responses[item.approval_request_id] = item


def _names_its_call(conv: Conversation, item: object, item_id: str, items: Sequence[object]) -> bool:
    """Whether `item` is a `local_shell_call_output` whose `id` is its call's: the SDK's param
    names the call so ("The unique ID of the local shell tool call"), which is no duplicate."""
    if not isinstance(item, LocalShellCallOutput):
        return False
    at = conv.ids.get(item_id)
    call = items[at] if at is not None else None
    return isinstance(call, LocalShellCall) and (item.call_id is None or item.call_id == call.call_id)


def _add_call(conv: Conversation, call: CallItem, param: str) -> None:
    label = kind_of_call(call).label
    if call.call_id in conv.calls:
        raise messages.duplicate_item(call.type, call.call_id, param)
    caller = getattr(call, "caller", None)
    if isinstance(caller, ProgramCaller) and caller.caller_id not in conv.programs:
        raise messages.call_without_program(label, call.call_id, caller.caller_id, param)
    if isinstance(caller, ProgramCaller) and caller.caller_id in conv.program_outputs:
        raise messages.call_of_finished_program(label, call.call_id, caller.caller_id, param)
    conv.calls[call.call_id] = call


def _add_output(conv: Conversation, output: OutputItem, param: str) -> None:
    kind = kind_of_output(output)
    call_id = answer_key(output)
    if call_id is None:
        raise messages.missing_parameter(f"{param}.call_id")
    call = conv.calls.get(call_id)
    if call is None and isinstance(output, LocalShellCallOutput):  # named by the call's item id
        call = next((c for c in conv.calls.values() if isinstance(c, LocalShellCall) and c.id == call_id), None)
        call_id = call.call_id if call is not None else call_id
    if call is None:
        raise messages.no_call_for_output(kind.label, call_id)
    if call.type != kind.call_type:
        raise messages.output_answers_another_kind(
            output.type, call_id, call.type, kind_of_call(call).output_type, f"{param}.type"
        )
    if call_id in conv.outputs:
        raise messages.duplicate_answer(output.type, call_id, param)
    call_caller = getattr(call, "caller", None)
    output_caller = getattr(output, "caller", None)
    expected = call_caller if isinstance(call_caller, ProgramCaller) else None
    given = output_caller if isinstance(output_caller, ProgramCaller) else None
    if expected != given:
        program = expected.caller_id if expected else None
        raise messages.output_caller_changed(output.type, call_id, call.type, program, f"{param}.caller")
    conv.outputs[call_id] = output


def _add_program_output(conv: Conversation, item: ProgramOutputItem, param: str, signer: Signer) -> None:
    if item.call_id not in conv.programs:
        raise messages.no_program_for_output(item.call_id, param)
    if item.call_id in conv.program_outputs:
        raise messages.duplicate_answer("program_output", item.call_id, param)
    if item.id != signer.program_output_id(item.call_id, item.status, item.result):
        raise messages.program_output_modified(item.call_id, param)
    conv.program_outputs[item.call_id] = item


def _add_search_call(conv: Conversation, call: ToolSearchCallItem, param: str) -> None:
    if call.call_id is None:
        if call.execution == "client":
            raise messages.search_call_without_call_id(param)
        return
    if call.call_id in conv.search_calls:
        raise messages.duplicate_item("tool_search_call", call.call_id, param)
    if any(p not in conv.program_outputs for p in conv.programs):
        raise messages.search_while_program_runs(param)
    conv.search_calls[call.call_id] = call


def _add_search_output(conv: Conversation, output: ToolSearchOutputItem, param: str) -> None:
    """A search output answers the call with its call_id; without one, it is a server search's
    output replayed as it came (the execution then says who ran it, server by default)."""
    if output.call_id is None:
        if output.execution == "client":
            raise messages.search_output_without_call_id(param)
        output.execution = output.execution or "server"
        return
    call = conv.search_calls.get(output.call_id)
    if call is None:
        raise messages.no_search_call_for_output(output.call_id, param)
    if output.call_id in conv.search_outputs:
        raise messages.duplicate_answer("tool_search_output", output.call_id, param)
    execution = call.execution or "server"
    if output.execution is not None and output.execution != execution:
        raise messages.search_execution_changed(output.call_id, output.execution, execution, param)
    output.execution = execution
    conv.search_outputs[output.call_id] = output
