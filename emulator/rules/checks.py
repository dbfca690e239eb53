"""The validity checks a create goes through before anything plays: each raises the hosted API's 400.

`analyse` (conversation.py) reads the items and enforces what holds for any conversation (every
call answered, no orphan output, fingerprints intact); these are the checks that need the request
too: its own parameters, the tools a running program may call, the calls of finished programs,
reasoning items without storage, and tool outputs against their schemas.
"""

from __future__ import annotations

from collections.abc import Iterable

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.history.cursor import POSITIONS, Positions
from ptc_emulator.emulator.rules.contract import Violation, check_output, check_text_formats, check_tools
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.tools.kinds import duplicate_names, kind_of_call
from ptc_emulator.emulator.tools.toolset import Toolset, call_name
from ptc_emulator.emulator.wire.items import (
    CallItem,
    FunctionCall,
    FunctionCallOutput,
    Item,
    ProgramCaller,
    ProgramItem,
)
from ptc_emulator.emulator.wire.request import Conversational, CountTokensRequest, CreateRequest, conversation_id
from ptc_emulator.emulator.wire.tools import (
    CustomTool,
    CustomToolChoice,
    FunctionToolChoice,
    HostedToolChoice,
    KindToolChoice,
    McpTool,
    McpToolChoice,
    OtherToolChoice,
    ProgrammaticToolChoice,
)

__all__ = [
    "call_indexes",
    "check_conversation",
    "check_direct_approvals",
    "check_finished_approvals",
    "check_finished_programs",
    "check_open_program",
    "check_outputs",
    "check_reasoning",
    "check_request",
    "check_tool_fields",
]


def check_conversation(request: CreateRequest | CountTokensRequest) -> str | None:
    """The id in the request's `conversation` (a string or `{"id": ...}`), if any."""
    if request.conversation is None:
        return None
    if request.previous_response_id is not None:
        raise messages.conversation_with_previous_response()
    return conversation_id(request.conversation)


def check_request(request: CreateRequest) -> str | None:
    """The request's own parameters, and how they fit together. Returns its conversation's id
    (`check_conversation`), read once here for the rest of the request."""
    if request.prompt is not None:
        raise messages.saved_prompts()
    if request.model is None:
        raise messages.missing_parameter("model")
    thread = check_conversation(request)
    if request.background and request.store is False:
        raise messages.background_needs_store()
    check_background_options(request)
    check_tool_fields(request)
    return thread


def check_tool_fields(request: Conversational) -> None:
    """`tools` and `tool_choice`, as a create and a token count check them alike (the hosted
    input_tokens endpoint refuses what a create refuses): names declared once, schemas and grammars
    that compile, a `tool_choice` that names a declared tool; and the json_schema text formats'
    schemas (`check_text_formats`). What only the tool list decides
    (one programmatic_tool_calling tool, one tool_search, namespaces) is `Toolset.of`'s."""
    for name in duplicate_names(request):
        raise messages.duplicate_tool_name(name)
    names = {t.name for t in request.function_tools}
    choice = request.tool_choice
    if isinstance(choice, FunctionToolChoice) and choice.name not in names:
        raise messages.tool_choice_name_not_found("function", choice.name)
    check_tools(request)
    check_text_formats(request)
    if isinstance(choice, CustomToolChoice) and choice.name not in {
        t.name for t in request.tools or () if isinstance(t, CustomTool)
    }:
        raise messages.tool_choice_name_not_found("custom", choice.name)
    if isinstance(choice, KindToolChoice) and not any(
        getattr(t, "type", None) == choice.type for t in request.tools or ()
    ):
        raise messages.tool_choice_not_found(choice.type)
    if isinstance(choice, ProgrammaticToolChoice) and not request.ptc_enabled:
        raise messages.tool_choice_not_found("programmatic_tool_calling")
    if isinstance(choice, McpToolChoice) and not any(
        isinstance(t, McpTool) and t.server_label == choice.server_label for t in request.tools or ()
    ):  # before, any label (or none) passed
        raise messages.tool_choice_not_found("mcp")
    if isinstance(choice, (HostedToolChoice, OtherToolChoice)):
        family = _HOSTED_CHOICES.get(choice.type)
        if family is None:
            raise messages.invalid_value(choice.type, _CHOICE_TYPES, "tool_choice.type")
        if not any(getattr(t, "type", None) in family for t in request.tools or ()):
            raise messages.tool_choice_not_found(choice.type)


_WEB_SEARCH = frozenset({"web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11"})
_COMPUTER = frozenset({"computer", "computer_use", "computer_use_preview"})
_HOSTED_CHOICES: dict[str, frozenset[str]] = {
    "file_search": frozenset({"file_search"}),
    "web_search_preview": _WEB_SEARCH,
    "web_search_preview_2025_03_11": _WEB_SEARCH,
    "computer": _COMPUTER,
    "computer_use": _COMPUTER,
    "computer_use_preview": _COMPUTER,
    "image_generation": frozenset({"image_generation"}),
    "code_interpreter": frozenset({"code_interpreter"}),
    "mcp": frozenset({"mcp"}),
}
"""A hosted tool's `tool_choice` (the SDK's `ToolChoiceTypes` and `ToolChoiceMcp`), and the tool
types any one of which declares it: without one the hosted API answers `Tool choice '<type>' not
found in 'tools' parameter.` (a web search or computer tool of another version counts)."""
_CHOICE_TYPES = ", ".join(
    f"'{kind}'"
    for kind in ("allowed_tools", *list(_HOSTED_CHOICES)[:-1], "function", "mcp", "custom")
    + ("programmatic_tool_calling", "apply_patch", "shell")
)
"""Every `type` a `tool_choice` object may have (the SDK's `ToolChoice` union, in its order): any
other is the 400 `invalid_value` listing these (before, an open model let any type through)."""


def check_background_options(request: CreateRequest) -> None:
    """`background_options.completion_window` `2h` and `8h` need `background: true`, Standard
    processing (a `service_tier` that resolves to `default`) and no `stream`."""
    options = request.background_options
    window = options.completion_window if options is not None else None
    if window not in ("2h", "8h"):
        return
    if not request.background:
        raise messages.completion_window_needs_background(window)
    if request.stream:
        raise messages.completion_window_with_stream(window)
    if request.service_tier not in (None, "auto", "default"):
        raise messages.completion_window_needs_standard(window, request.service_tier)


def check_open_program(
    conv: Conversation, signer: Signer, *, allowed: list[str], server_labels: set[str], max_tool_calls: int
) -> list[int]:
    """The program being resumed may call what it started with (`allowed`: what this request lets a
    program call; tools of MCP servers in `server_labels` are listed at run time, not sealed), and
    its calls come back as it issued them. Returns their positions in issue order (`call_indexes`)."""
    program = conv.open_program
    assert program is not None
    seal = conv.seals[program.call_id]
    if not seal.tools_known:  # bound by digest: what the MCP servers list is known only once they list it
        if not server_labels:
            resolved = seal.with_tools(allowed)
            if resolved is None:
                raise messages.tools_changed(program.call_id, seal.describe_tools(), allowed)
            conv.seals[program.call_id] = resolved
        return call_indexes(signer, program, conv.program_calls(program.call_id), max_tool_calls, conv)
    started = [t for t in seal.tools if not ("." in t and t.partition(".")[0] in server_labels)]
    if started != allowed:
        raise messages.tools_changed(program.call_id, seal.describe_tools(), allowed)
    return call_indexes(signer, program, conv.program_calls(program.call_id), max_tool_calls, conv)


def check_finished_programs(conv: Conversation, signer: Signer, *, max_tool_calls: int) -> None:
    """A finished program's calls are the ones it made: one attached to it afterwards is refused.
    As for the open program (`call_indexes`), they come in issue order and a position may be
    skipped: a call the server answered (an MCP tool's, a hosted one's) has no item."""
    for call_id in conv.programs:
        if call_id not in conv.program_outputs:
            continue
        index = 0
        for call in conv.program_calls(call_id):
            while index < max_tool_calls and signer.program_call_id(call_id, index) != call.call_id:
                index += 1
            if index >= max_tool_calls:
                raise messages.call_not_issued_by_finished_program(call.call_id, call_id)
            index += 1
    check_finished_approvals(conv, signer, max_tool_calls=max_tool_calls)


def check_finished_approvals(conv: Conversation, signer: Signer, *, max_tool_calls: int) -> None:
    """A finished program's approval requests are the ones this server issued, as issued: no call
    of the program's compares them any more (the open program's are compared with the call they
    approve, before anything known of it is used: `Hosted.check_replayed`)."""
    finished = [
        r
        for r in conv.approval_requests.values()
        if isinstance(r.caller, ProgramCaller) and r.caller.caller_id in conv.program_outputs
    ]
    for request in finished:
        assert isinstance(request.caller, ProgramCaller)
        program = request.caller.caller_id
        if signer.issued_approval(
            request.id, program, request.server_label, request.name, request.arguments, max_tool_calls=max_tool_calls
        ):
            continue
        at = next(i for i, item in enumerate(conv.items) if item is request)
        param = f"input[{at - conv.new_from}]" if at >= conv.new_from else "previous_response_id"
        raise messages.approval_request_not_issued(request.id, program, param)


def check_direct_approvals(conv: Conversation, signer: Signer) -> None:
    """A direct MCP call's approval requests (no `caller`: a scenario's `mcp` turn) are the ones
    this server issued, as issued: each id is a MAC of its nonce, server label, tool and arguments
    (`Signer.direct_mcp_approval_id`). Checked before any decision is read, whether the item comes
    back in the input or from storage (a conversation's items may have been added by a client)."""
    for request in conv.approval_requests.values():
        if isinstance(request.caller, ProgramCaller):
            continue
        if signer.issued_direct_approval(request.id, request.server_label, request.name, request.arguments):
            continue
        at = next(i for i, item in enumerate(conv.items) if item is request)
        param = f"input[{at - conv.new_from}]" if at >= conv.new_from else "previous_response_id"
        raise messages.direct_approval_request_not_issued(request.id, param)


def check_reasoning(conv: Conversation, signer: Signer, reasoned: Iterable[Item]) -> None:
    """Without storage, reasoning items come back intact and with the items they preceded
    (`reasoned`: the first item of each scripted turn that had reasoning).

    Each reasoning item was unsealed once, as `analyse`'s pass read it (sealed with its own id:
    another reasoning item's content does not verify; one replayed without its id, as the Agents
    SDK does with store:false, is the item its content was sealed for), and the ids it found are
    carried on the conversation's cursor: a step of a long loop unseals only its new items."""
    if conv.bare_reasoning:
        raise messages.encrypted_content_unverified(conv.bare_reasoning[min(conv.bare_reasoning)])
    for first in reasoned:
        call_id = getattr(first, "call_id", None)
        required = signer.reasoning_id(call_id or getattr(first, "id", None) or "")
        if required not in conv.reasoning:
            raise messages.reasoning_missing(getattr(first, "id", None) or call_id, first.type, required)


def check_outputs(conv: Conversation, toolset: Toolset) -> list[Violation]:
    """The newly answered tool outputs against their tools' output_schema."""
    found = []
    for item in conv.latest_outputs():
        call = conv.calls.get(item.call_id or "") if isinstance(item, FunctionCallOutput) else None
        if isinstance(item, FunctionCallOutput) and isinstance(call, FunctionCall):
            tool = toolset.function(call_name(call))
            violation = check_output(tool, call.call_id, item.output_text()) if tool else None
            if violation is not None:
                found.append(violation)
    return found


def call_indexes(
    signer: Signer, program: ProgramItem, calls: list[CallItem], limit: int, conv: Conversation
) -> list[int]:
    """Each program call item's position in the program's issue order, from its derived call_id.

    The items must come in issue order; a position may be skipped (a call the server answered).
    The positions are a field of the conversation's cursor (`POSITIONS`): read on from those of
    the cursor its source recognised, so a step reads only the program's new calls."""

    def read(kept: Positions | None, end: int) -> Positions:
        return _positions(signer, program, calls, limit, kept, end)

    ext = conv.cursor
    return list(ext.read_on(POSITIONS, program.call_id, len(calls), ext.calls_at_mark(program.call_id), read).found)


def _positions(
    signer: Signer, program: ProgramItem, calls: list[CallItem], limit: int, kept: Positions | None, end: int
) -> Positions:
    """`kept` (None: none yet) read on to the program's first `end` calls."""
    found = list(kept.found) if kept is not None else []
    index = found[-1] + 1 if found else 0
    for call in calls[len(found) : end]:
        while index < limit and signer.program_call_id(program.call_id, index) != call.call_id:
            index += 1
        if index >= limit:
            raise messages.call_not_issued_here(kind_of_call(call).label, call.call_id, program.call_id)
        found.append(index)
        index += 1
    return Positions(tuple(found))
