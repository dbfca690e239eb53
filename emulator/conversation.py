"""Reads a conversation (stored history plus this request's input) and holds it to the rules.

The hosted API is strict about the item sequence and so is this: every function call needs its
output, every output its call, a program call's output must carry the caller it was issued with,
and items the server issued (fingerprints, program outputs) must come back unmodified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidRequest
from .items import (
    CodeInterpreterCall,
    FunctionCall,
    FunctionCallOutput,
    Item,
    McpApprovalRequest,
    McpApprovalResponse,
    McpCall,
    McpListTools,
    Message,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
)
from .signing import ProgramSeal, Signer

__all__ = ["Conversation", "analyse"]


@dataclass
class Conversation:
    items: list[Item]
    new_from: int
    """Index of the first item of this request's input."""
    anchor: int
    """Index of the latest user message: what the scripted model answers."""
    calls: dict[str, FunctionCall] = field(default_factory=dict)
    outputs: dict[str, FunctionCallOutput] = field(default_factory=dict)
    programs: dict[str, ProgramItem] = field(default_factory=dict)
    seals: dict[str, ProgramSeal] = field(default_factory=dict)
    program_outputs: dict[str, ProgramOutputItem] = field(default_factory=dict)
    approval_requests: dict[str, McpApprovalRequest] = field(default_factory=dict)
    approval_responses: dict[str, McpApprovalResponse] = field(default_factory=dict)
    """By `approval_request_id`."""
    open_program: ProgramItem | None = None
    open_index: int = -1
    """Index of the open program's item."""

    @property
    def anchor_text(self) -> str:
        message = self.items[self.anchor]
        assert isinstance(message, Message)
        return message.text()

    def program_calls(self, program_call_id: str) -> list[FunctionCall]:
        """The program's tool calls in issue order (the order the server emitted them)."""
        return [
            item
            for item in self.items
            if isinstance(item, FunctionCall)
            and isinstance(item.caller, ProgramCaller)
            and item.caller.caller_id == program_call_id
        ]

    def latest_outputs(self) -> list[FunctionCallOutput]:
        """The tool outputs that answer the latest model output (after the last item the model
        produced). A `store: false` replay resends the earlier ones too; these are the new ones."""
        last = max(
            (
                i
                for i, item in enumerate(self.items)
                if not isinstance(item, FunctionCallOutput | Message | McpApprovalResponse)
                or (isinstance(item, Message) and item.role == "assistant")
            ),
            default=-1,
        )
        return [item for item in self.items[last + 1 :] if isinstance(item, FunctionCallOutput)]

    def after_anchor(self) -> list[Item]:
        return self.items[self.anchor + 1 :]


def _param(index: int, new_from: int) -> str:
    return f"input[{index - new_from}]" if index >= new_from else "previous_response_id"


def analyse(items: list[Item], new_from: int, signer: Signer) -> Conversation:
    anchor = max((i for i, it in enumerate(items) if isinstance(it, Message) and it.role == "user"), default=-1)
    conv = Conversation(items, new_from, anchor)
    for i, item in enumerate(items):
        param = _param(i, new_from)
        if isinstance(item, FunctionCall):
            _add_call(conv, item, param)
        elif isinstance(item, FunctionCallOutput):
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
        elif isinstance(item, ProgramOutputItem):
            _add_program_output(conv, item, param, signer)
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
    for call_id in conv.calls:
        if call_id not in conv.outputs:
            raise InvalidRequest(f"No tool output found for function call {call_id}.", param="input")
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
        conv.open_index = next(i for i, item in enumerate(items) if item is conv.open_program)
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


def _add_call(conv: Conversation, call: FunctionCall, param: str) -> None:
    if call.call_id in conv.calls:
        raise InvalidRequest(
            f"Duplicate item: a function_call with call_id '{call.call_id}' appears more than once.", param=param
        )
    if isinstance(call.caller, ProgramCaller) and call.caller.caller_id not in conv.programs:
        raise InvalidRequest(
            f"Function call {call.call_id} has caller program '{call.caller.caller_id}', but no program item "
            "with that call_id comes before it.",
            param=param,
        )
    if isinstance(call.caller, ProgramCaller) and call.caller.caller_id in conv.program_outputs:
        raise InvalidRequest(
            f"Function call {call.call_id} belongs to program '{call.caller.caller_id}', which already finished.",
            param=param,
        )
    conv.calls[call.call_id] = call


def _add_output(conv: Conversation, output: FunctionCallOutput, param: str) -> None:
    if output.call_id is None:
        raise InvalidRequest(
            f"Missing required parameter: '{param}.call_id'.",
            param=f"{param}.call_id",
            code="missing_required_parameter",
        )
    call = conv.calls.get(output.call_id)
    if call is None:
        raise InvalidRequest(
            f"No tool call found for function call output with call_id {output.call_id}.", param="input"
        )
    if output.call_id in conv.outputs:
        raise InvalidRequest(
            f"Duplicate item: a function_call_output for call_id '{output.call_id}' appears more than once.",
            param=param,
        )
    expected = call.caller if isinstance(call.caller, ProgramCaller) else None
    given = output.caller if isinstance(output.caller, ProgramCaller) else None
    if expected != given:
        want = (
            f'{{"type": "program", "caller_id": "{expected.caller_id}"}}'
            if expected
            else 'none (or {"type": "direct"})'
        )
        raise InvalidRequest(
            f"The function_call_output for call_id {output.call_id} must carry the caller of its function_call "
            f"unchanged: expected {want}.",
            param=f"{param}.caller",
        )
    conv.outputs[output.call_id] = output


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
