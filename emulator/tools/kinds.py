"""Tool kinds: for each kind of tool, what a program sees, which item the client sees, which item
answers it, and how that answer reaches the program.

    kind         a program calls                   call item         answered by              the program receives
    function     tools.<name>({...})               function_call     function_call_output     the output (JSON: parsed)
    custom       tools.<name>("text")              custom_tool_call  custom_tool_call_output  the output string
    shell        tools.shell({commands,            shell_call        shell_call_output        the `output` array
    (local)        timeout_ms?, max_output_length?})
    apply_patch  tools.apply_patch({type, path,    apply_patch_call  apply_patch_call_output  {status, output};
                   diff?})                                                                    `failed` rejects
    local_shell  (direct calls only)               local_shell_call  local_shell_call_output  -
    web_search, file_search, image_generation, computer, ...: echoed, never run; a program or a scenario
    that calls one fails with a message that names it (`Unemulated`).

One request's tools become `Binding`s (`bind`): a name (what `tools.<name>` and a scenario's `call.name` use),
the tool, and its `ToolKind`. The player runs a program and, for each call it is waiting on, asks the kind:

* `check(arguments)`: a message if the arguments cannot make a call item; the program's promise then
  rejects with that message (a deterministic answer, so replay gives it again);
* `call_item(...)`: the item the client answers (client-owned kinds);
* `result(output)`: the client's answer as the program's journal entry;
* `resolve(...)`: for a kind the server runs itself (`owner = "server"`), the result without a client
  round trip, or None to surface the call. The player's run loop puts every result it knows into the
  program's journal, in issue order, and replays the program until it finishes or waits only on the
  client. Server-run results must be recorded (signed state or items) so a replay gets them again
  without running the tool twice.

Adding a kind: subclass `ToolKind`, register its call and output item types in `KINDS`, and give
`bind` the tool type that makes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.items import (
    ApplyPatchCall,
    ApplyPatchCallOutput,
    Caller,
    CallItem,
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    LocalShellAction,
    LocalShellCall,
    LocalShellCallOutput,
    OutputItem,
    PatchOperation,
    ShellAction,
    ShellCall,
    ShellCallOutput,
    dump,
)
from ptc_emulator.emulator.wire.request import Conversational
from ptc_emulator.emulator.wire.tools import (
    ApplyPatchTool,
    CodeInterpreterTool,
    CustomTool,
    FunctionTool,
    HostedTool,
    LocalShellTool,
    ShellTool,
)

__all__ = [
    "KINDS",
    "ApplyPatchKind",
    "Binding",
    "CustomKind",
    "FunctionKind",
    "LocalShellKind",
    "ServerKind",
    "ShellKind",
    "ToolKind",
    "Unemulated",
    "answer_key",
    "answer_text",
    "bind",
    "kind_of_call",
    "kind_of_output",
    "program_tools",
]


@dataclass(frozen=True, slots=True)
class Binding:
    """One tool of a request, by the name programs and scenarios call it."""

    name: str
    kind: ToolKind
    tool: Any
    programmatic: bool
    """A program may call it (`allowed_callers` holds `programmatic`, and the request enables PTC)."""
    direct: bool
    """A scenario turn may call it directly."""

    @property
    def program_visible(self) -> bool:
        """`tools.<name>` exists in a program: callable ones, and unemulated ones (which fail, naming the kind)."""
        return self.programmatic or isinstance(self.kind, Unemulated)


class ToolKind:
    kind: ClassVar[str]
    call_type: ClassVar[str]
    """The output item type of a call (`function_call`)."""
    output_type: ClassVar[str]
    """The input item type that answers it (`function_call_output`)."""
    label: ClassVar[str]
    """How error messages name a call (`function call`)."""
    id_prefix: ClassVar[str]
    text_argument: ClassVar[bool] = False
    """The program passes one string, not an object (`Program.text_tools`)."""
    owner: ClassVar[Literal["client", "server"]] = "client"

    def check(self, binding: Binding, arguments: Any) -> str | None:
        """Why a program's parsed arguments cannot make a call, or None."""
        return None

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        """The item for a call with `arguments` (JSON text, as a program passes them)."""
        raise NotImplementedError

    def arguments(self, call: CallItem) -> str:
        """A call item's arguments as the program passed them (JSON text), for its journal."""
        raise NotImplementedError

    def result(self, output: OutputItem) -> tuple[str, bool]:
        """The answer as the program's journal entry: (text the program receives, rejects?).

        The text is parsed as JSON when it is JSON (so a string is sent as a JSON string literal)."""
        raise NotImplementedError

    def call_name(self, call: CallItem) -> str:
        """The binding name a call item was made for."""
        return self.kind


class FunctionKind(ToolKind):
    kind = "function"
    call_type = "function_call"
    output_type = "function_call_output"
    label = "function call"
    id_prefix = "fc"

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        namespace, dot, name = binding.name.rpartition(".")
        return FunctionCall(
            id=item_id,
            call_id=call_id,
            name=name,
            namespace=namespace if dot else None,
            arguments=arguments,
            caller=caller,
            status="completed",
        )

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, FunctionCall)
        return call.arguments

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, FunctionCallOutput)
        return output.output_text(), output.status == "incomplete"

    def call_name(self, call: CallItem) -> str:
        assert isinstance(call, FunctionCall)
        return f"{call.namespace}.{call.name}" if call.namespace else call.name


class CustomKind(ToolKind):
    kind = "custom"
    call_type = "custom_tool_call"
    output_type = "custom_tool_call_output"
    label = "custom tool call"
    id_prefix = "ctc"
    text_argument = True

    def check(self, binding: Binding, arguments: Any) -> str | None:
        if not isinstance(arguments, str):
            return f"tools.{binding.name}() takes one argument: a string"
        return None

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        return CustomToolCall(
            id=item_id, call_id=call_id, name=binding.name, input=json.loads(arguments), caller=caller
        )

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, CustomToolCall)
        return json.dumps(call.input, ensure_ascii=False)

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, CustomToolCallOutput)
        return json.dumps(output.output_text(), ensure_ascii=False), False

    def call_name(self, call: CallItem) -> str:
        assert isinstance(call, CustomToolCall)
        return call.name


def _first_error(model: type[BaseModel] | TypeAdapter[Any], value: Any, what: str) -> str | None:
    try:
        if isinstance(model, TypeAdapter):
            model.validate_python(value, strict=True)
        else:
            model.model_validate(value, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            return f"{what}: unknown field '{where}'"
        if first["type"] == "missing":
            return f"{what}: missing required field '{where}'"
        return f"{what}: '{where}': {first['msg']}" if where else f"{what}: {first['msg']}"
    return None


class ShellKind(ToolKind):
    """`shell` with a local environment: the client runs the commands."""

    kind = "shell"
    call_type = "shell_call"
    output_type = "shell_call_output"
    label = "shell call"
    id_prefix = "sh"

    def check(self, binding: Binding, arguments: Any) -> str | None:
        return _first_error(
            ShellAction, arguments, "tools.shell() takes {commands: string[], timeout_ms?, max_output_length?}"
        )

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        return ShellCall(
            id=item_id,
            call_id=call_id,
            action=ShellAction.model_validate_json(arguments),
            caller=caller,
            environment={"type": "local"},
            status="completed",
        )

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, ShellCall)
        return json.dumps(dump(call.action), ensure_ascii=False)

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, ShellCallOutput)
        return json.dumps([dump(chunk) for chunk in output.output], ensure_ascii=False), False


_PATCH = TypeAdapter[Any](PatchOperation)


class ApplyPatchKind(ToolKind):
    kind = "apply_patch"
    call_type = "apply_patch_call"
    output_type = "apply_patch_call_output"
    label = "apply_patch call"
    id_prefix = "apc"

    def check(self, binding: Binding, arguments: Any) -> str | None:
        return _first_error(
            _PATCH,
            arguments,
            "tools.apply_patch() takes {type: 'create_file'|'update_file'|'delete_file', path, diff?}",
        )

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        return ApplyPatchCall(
            id=item_id,
            call_id=call_id,
            operation=_PATCH.validate_json(arguments),
            caller=caller,
            status="completed",
        )

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, ApplyPatchCall)
        return json.dumps(dump(call.operation), ensure_ascii=False)

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, ApplyPatchCallOutput)
        if output.status == "failed":
            return output.output or "apply_patch failed", True
        return json.dumps({"status": output.status, "output": output.output}, ensure_ascii=False), False


class LocalShellKind(ToolKind):
    """`local_shell`: no allowed_callers, so only a scenario's direct call makes one."""

    kind = "local_shell"
    call_type = "local_shell_call"
    output_type = "local_shell_call_output"
    label = "local_shell call"
    id_prefix = "lsh"

    def check(self, binding: Binding, arguments: Any) -> str | None:
        return _first_error(
            LocalShellAction,
            arguments,
            "local_shell takes {command: string[], env?, timeout_ms?, user?, working_directory?}",
        )

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        return LocalShellCall(
            id=item_id or call_id,
            call_id=call_id,
            action=LocalShellAction.model_validate_json(arguments),
            status="completed",
        )

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, LocalShellCall)
        return json.dumps(dump(call.action), ensure_ascii=False)

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, LocalShellCallOutput)
        return json.dumps(output.output, ensure_ascii=False), False


class Unemulated(ToolKind):
    """A tool the emulator echoes but does not run: calling it fails, naming the kind."""

    call_type = ""
    output_type = ""
    label = "call"
    id_prefix = ""

    def __init__(self, kind: str, why: str = "") -> None:
        self.kind = kind  # type: ignore[misc]
        self.why = why or "a hosted tool that this emulator does not run"

    def message(self, name: str) -> str:
        return f"tools.{name}() calls the '{self.kind}' tool, {self.why}."


class ServerKind(ToolKind):
    """A tool the emulator runs on the server's side (code interpreter, shell in a hosted container;
    MCP tools are named by their server's listing, see `hosted.py`): a program's call is answered
    there, never surfaced to the client."""

    call_type = ""
    output_type = ""
    label = "call"
    id_prefix = ""
    owner = "server"

    def __init__(self, kind: str) -> None:
        self.kind = kind  # type: ignore[misc]


FUNCTION, CUSTOM, SHELL, APPLY_PATCH, LOCAL_SHELL = (
    FunctionKind(),
    CustomKind(),
    ShellKind(),
    ApplyPatchKind(),
    LocalShellKind(),
)

KINDS: dict[str, ToolKind] = {k.call_type: k for k in (FUNCTION, CUSTOM, SHELL, APPLY_PATCH, LOCAL_SHELL)}
"""Client-owned kinds by call item type."""

_BY_OUTPUT: dict[str, ToolKind] = {k.output_type: k for k in KINDS.values()}


def kind_of_call(call: CallItem) -> ToolKind:
    return KINDS[call.type]


def kind_of_output(output: OutputItem) -> ToolKind:
    return _BY_OUTPUT[output.type]


def answer_key(output: OutputItem) -> str | None:
    """The call_id an answer names (a `local_shell_call_output` may name it by `id`)."""
    if isinstance(output, LocalShellCallOutput):
        return output.call_id or output.id
    return output.call_id


def answer_text(output: OutputItem) -> str:
    """An answer as text: what a template's `output` sees and the journal measures."""
    if isinstance(output, FunctionCallOutput | CustomToolCallOutput):
        return output.output_text()
    if isinstance(output, LocalShellCallOutput):
        return output.output
    if isinstance(output, ApplyPatchCallOutput):
        return json.dumps({"status": output.status, "output": output.output}, ensure_ascii=False)
    return json.dumps([dump(chunk) for chunk in output.output], ensure_ascii=False)


def _unemulated_name(tool: Any) -> str:
    return str(tool.type)


def bind(request: Conversational, toolset: Toolset | None = None) -> dict[str, Binding]:
    """The request's callable tools by name, in declaration order.

    Programs see the programmatic ones (when the request enables PTC) and the unemulated ones
    (which fail, naming their kind); scenarios call the direct ones. With a `toolset`, function
    tools are its callable ones (qualified names: namespaces, deferred tools a search loaded), and
    a deferred custom tool binds once loaded."""
    ptc = any(getattr(t, "type", None) == "programmatic_tool_calling" for t in request.tools or ())
    found: dict[str, Binding] = {}
    late: list[Binding] = []
    if toolset is not None:
        for name in toolset.callable:
            function = toolset.function(name)
            if function is not None:
                found[name] = Binding(name, FUNCTION, function, ptc and function.programmatic, function.direct)
    for tool in request.tools or ():
        if isinstance(tool, FunctionTool):
            if toolset is None:
                binding = Binding(tool.name, FUNCTION, tool, ptc and tool.programmatic, tool.direct)
                found.setdefault(tool.name, binding)
        elif isinstance(tool, CustomTool):
            if toolset is not None and not toolset.other_available(tool.name):
                continue
            found.setdefault(tool.name, Binding(tool.name, CUSTOM, tool, ptc and tool.programmatic, tool.direct))
        elif isinstance(tool, ShellTool):
            if tool.hosted:
                late.append(Binding("shell", ServerKind("shell"), tool, ptc and tool.programmatic, tool.direct))
            else:
                late.append(Binding("shell", SHELL, tool, ptc and tool.programmatic, tool.direct))
        elif isinstance(tool, ApplyPatchTool):
            late.append(Binding("apply_patch", APPLY_PATCH, tool, ptc and tool.programmatic, tool.direct))
        elif isinstance(tool, LocalShellTool):
            late.append(Binding("local_shell", LOCAL_SHELL, tool, False, True))
        elif isinstance(tool, CodeInterpreterTool):
            late.append(
                Binding(
                    "code_interpreter", ServerKind("code_interpreter"), tool, ptc and tool.programmatic, tool.direct
                )
            )
        elif isinstance(tool, HostedTool):
            name = _unemulated_name(tool)
            late.append(Binding(name, Unemulated(name), tool, False, True))
    for binding in late:  # a function or custom tool of the same name keeps it
        found.setdefault(binding.name, binding)
    return found


def program_tools(request: Conversational, toolset: Toolset | None = None) -> tuple[str, ...]:
    """What a program started now may call, by the names it calls them, sorted (a fingerprint binds
    this tuple; none without PTC)."""
    if not request.ptc_enabled:
        return ()
    return tuple(sorted(b.name for b in bind(request, toolset).values() if b.program_visible))


def duplicate_names(request: Conversational) -> Sequence[str]:
    """Names that two function or custom tools share."""
    seen: set[str] = set()
    twice: list[str] = []
    for tool in request.tools or ():
        if isinstance(tool, FunctionTool | CustomTool):
            if tool.name in seen:
                twice.append(tool.name)
            seen.add(tool.name)
    return twice
