"""Tool kinds: the one registry of what each kind of tool is, to a program, to the client and to the
rest of the house.

    kind         a program calls                   call item         answered by              the program receives
    function     tools.<name>({...})               function_call     function_call_output     the output (JSON: parsed)
    custom       tools.<name>("text")              custom_tool_call  custom_tool_call_output  the output string
    shell        tools.shell({commands,            shell_call        shell_call_output        the `output` array
    (local)        timeout_ms?, max_output_length?})
    apply_patch  tools.apply_patch({type, path,    apply_patch_call  apply_patch_call_output  {status, output};
                   diff?})                                                                    `failed` rejects
    local_shell  (direct calls only)               local_shell_call  local_shell_call_output  -
    code_interpreter, shell (hosted), mcp: run on the server's side (`hosted.py`); tool_search: the
    model's own search (`toolset.py`). web_search, file_search, image_generation, computer, ...:
    echoed, never run; a program or a scenario that calls one fails with a message that names it
    (`Unemulated`).

Each kind declares, once: its name in a program (`program_name`), its item types (`call`,
`output`, and `also` for a hosted kind's items), each as an `ItemSurface`: the id prefix
`input_items.list` gives a listed item and the fields it fills in, and what the model reads of
it (token usage); the stub a steered response's `required_input` holds for its call (`stub`);
and, for the kinds a program calls:

* `check(arguments)`: a message if the arguments cannot make a call item; the program's promise then
  rejects with that message (a deterministic answer, so replay gives it again);
* `call_item(...)`: the item the client answers (client-owned kinds);
* `result(output)`: the client's answer as the program's journal entry; `answer_text(output)`: the
  answer as text (what a template's `output` sees and the journal measures);
* server-run kinds (`owner = "server"`) are answered without a client round trip; the player's run
  loop puts every result it knows into the program's journal, in issue order, and replays the
  program until it finishes or waits only on the client. Server-run results must be recorded
  (signed state or items) so a replay gets them again without running the tool twice.

One request's tools become `Binding`s (`bind`): a name (what `tools.<name>` and a scenario's
`call.name` use), the tool, and its kind. `REGISTRY` maps each tool declaration type (the
models of `wire/tools.py`) to its kind, and the kind makes the binding (`ToolKind.binding`);
`KINDS` finds a client-owned kind by its call item type, `ITEMS` any kind's item by its type
(history's listing, usage and steering read these).

Adding a kind: the API's shapes in `wire/` (its items, a client-answered pair in `wire/calls.py`
in the `InputItem` union, and its tool declaration in `wire/tools.py`), then one module in
`tools/` holding its `ToolKind` (for a call carrying one structured field, an `ActionKind`), and
one line below: `REGISTRY.add(KIND, TheDeclaration)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, get_args

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools.actions import APPLY_PATCH, LOCAL_SHELL, SHELL, ActionKind
from ptc_emulator.emulator.tools.base import Binding, ServerKind, ToolKind, Unemulated
from ptc_emulator.emulator.tools.surface import ItemSurface, compact, compact_field, fields, output_text
from ptc_emulator.emulator.tools.toolset import Toolset, qualified
from ptc_emulator.emulator.wire.base import Caller
from ptc_emulator.emulator.wire.calls import (
    CallItem,
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    OutputItem,
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
    "APPLY_PATCH",
    "CODE_INTERPRETER",
    "CUSTOM",
    "FUNCTION",
    "HOSTED_SHELL",
    "ITEMS",
    "KINDS",
    "LOCAL_SHELL",
    "MCP",
    "REGISTRY",
    "Registry",
    "SHELL",
    "TOOL_SEARCH",
    "ActionKind",
    "Binding",
    "CustomKind",
    "FunctionKind",
    "ItemSurface",
    "ServerKind",
    "ToolKind",
    "Unemulated",
    "answer_key",
    "answer_text",
    "bind",
    "kind_of_call",
    "kind_of_output",
    "program_tools",
]


class FunctionKind(ToolKind):
    def __init__(self) -> None:
        super().__init__(
            "function",
            call=ItemSurface(
                "function_call",
                listed_id="fc",
                text=fields("name", "arguments"),
                read=lambda item: (item.name, item.arguments),
            ),
            output=ItemSurface(
                "function_call_output", listed_id="fco", text=_function_output, read=lambda item: [item.output_text()]
            ),
            label="function call",
        )

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        if toolset is not None:  # its callable functions, namespaces' and loaded ones too, came first
            return None
        return Binding(tool.name, self, tool, ptc and tool.programmatic, tool.direct)

    def stub(self, call: dict[str, Any]) -> dict[str, Any] | None:
        return {"type": self.output_type, "call_id": call["call_id"], "name": call["name"]}

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        namespace, dot, name = binding.name.rpartition(".")
        if not dot and getattr(binding.tool, "defer_loading", False):
            namespace, dot = name, "."  # a top-level deferred function: the synthetic namespace, its own name
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

    def answer_text(self, output: OutputItem) -> str:
        assert isinstance(output, FunctionCallOutput)
        return output.output_text()

    def call_name(self, call: CallItem) -> str:
        assert isinstance(call, FunctionCall)
        return qualified(call.name, call.namespace)


def _function_output(item: dict[str, Any]) -> Iterable[str]:
    output = item.get("output", "")
    yield output if isinstance(output, str) else json.dumps(output)


class CustomKind(ToolKind):
    text_argument = True

    def __init__(self) -> None:
        listed_only = ("status",)  # a custom tool call's input form has no status
        super().__init__(
            "custom",
            call=ItemSurface(
                "custom_tool_call", listed_id="ctc", listed_only=listed_only, text=fields("name", "input")
            ),
            output=ItemSurface("custom_tool_call_output", listed_id="ctco", listed_only=listed_only, text=output_text),
            label="custom tool call",
        )

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        if toolset is not None and not toolset.other_available(tool.name):
            return None  # deferred, not loaded yet
        return Binding(tool.name, self, tool, ptc and tool.programmatic, tool.direct)

    def check(self, binding: Binding, arguments: Any) -> str | None:
        if not isinstance(arguments, str):
            return messages.takes_a_string(binding.name)
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
        return json.dumps(self.answer_text(output), ensure_ascii=False), False

    def answer_text(self, output: OutputItem) -> str:
        assert isinstance(output, CustomToolCallOutput)
        return output.output_text()

    def call_name(self, call: CallItem) -> str:
        assert isinstance(call, CustomToolCall)
        return call.name


FUNCTION = FunctionKind()
CUSTOM = CustomKind()
CODE_INTERPRETER = ServerKind(
    "code_interpreter", program_name="code_interpreter", also=(ItemSurface("code_interpreter_call", listed=()),)
)
HOSTED_SHELL = ServerKind("shell", program_name="shell")
"""`shell` in a hosted container (`container_auto`, `container_reference`): its calls stay hidden."""
MCP = ServerKind(
    "mcp",
    also=(
        ItemSurface("mcp_list_tools", listed=()),
        ItemSurface("mcp_call", listed=()),
        ItemSurface("mcp_approval_request", listed=()),
        ItemSurface("mcp_approval_response", listed_id="mcpa", listed=()),
    ),
)
_SEARCH_LISTED = (("status", "completed"), ("execution", "server"))
TOOL_SEARCH = ToolKind(
    "tool_search",
    also=(
        ItemSurface(
            "tool_search_call",
            listed_id="tsc",
            listed=_SEARCH_LISTED,
            text=compact_field("arguments", {}),
            read=lambda item: [compact(item.arguments)],
        ),
        ItemSurface(
            "tool_search_output",
            listed_id="tso",
            listed=_SEARCH_LISTED,
            text=compact_field("tools", []),
            read=lambda item: [compact(item.tools)],
        ),
    ),
)
"""The model's search for deferred tools (`toolset.py`); a program does not call it."""


class Registry:
    """Every kind the emulator knows, by what finds it: the tool declaration a request lists (`bind`),
    a client-owned kind's call and output item types (`calls`, `outputs`), any kind's item types
    (`items`). Iterating it gives the kinds in the order they were added."""

    def __init__(self) -> None:
        self._kinds: list[ToolKind] = []
        self._declared: dict[type, list[tuple[ToolKind, Callable[[Any], bool] | None]]] = {}
        self._echoed: set[type] = set()
        self.calls: dict[str, ToolKind] = {}
        """Client-owned kinds by call item type."""
        self.outputs: dict[str, ToolKind] = {}
        """Client-owned kinds by the item type that answers a call."""
        self.items: dict[str, ItemSurface] = {}
        """Every kind's item types, by type."""

    def __iter__(self) -> Iterator[ToolKind]:
        return iter(self._kinds)

    def add(self, kind: ToolKind, *declarations: type, when: Callable[[Any], bool] | None = None) -> ToolKind:
        """Register `kind`, the kind of a request's tools that are one of `declarations` (those for
        which `when(tool)` holds, if given: one declaration, several kinds). A kind of no
        declaration of its own (tool search) is found by its items only."""
        taken = [surface.type for surface in kind.items if surface.type in self.items]
        if kind in self._kinds or taken:
            raise ValueError(f"the {kind.kind} kind, or its items {taken}, are registered already")
        self._kinds.append(kind)
        for surface in kind.items:
            self.items[surface.type] = surface
        if kind.call is not None:
            self.calls[kind.call_type] = kind
            self.outputs[kind.output_type] = kind
        for declaration in declarations:
            self._declared.setdefault(declaration, []).append((kind, when))
        return kind

    def echo(self, *declarations: type) -> None:
        """Tools of these declarations are echoed, never run: unless a kind is registered for
        one, each binds an `Unemulated` kind named after its `type`, so a program or a scenario
        that calls one fails, naming it."""
        self._echoed.update(declarations)

    def remove(self, kind: ToolKind) -> None:
        """Undo `add`."""
        self._kinds.remove(kind)
        for table in (self.calls, self.outputs):
            for key in [key for key, found in table.items() if found is kind]:
                del table[key]
        for surface in kind.items:
            del self.items[surface.type]
        for declaration, choices in list(self._declared.items()):
            choices[:] = [choice for choice in choices if choice[0] is not kind]
            if not choices:
                del self._declared[declaration]

    def kind_of_tool(self, tool: Any) -> ToolKind | None:
        """The kind a request's tool binds to; None for a declaration that binds none (namespaces,
        MCP servers, tool search, the PTC tool itself: other rooms read those)."""
        declarations = type(tool).__mro__
        for declaration in declarations:
            for kind, when in self._declared.get(declaration, ()):
                if when is None or when(tool):
                    return kind
        if any(declaration in self._echoed for declaration in declarations):
            return Unemulated(str(tool.type))
        return None


REGISTRY = Registry()
REGISTRY.add(FUNCTION, FunctionTool)
REGISTRY.add(CUSTOM, CustomTool)
REGISTRY.add(SHELL, ShellTool, when=lambda tool: not tool.hosted)
REGISTRY.add(APPLY_PATCH, ApplyPatchTool)
REGISTRY.add(LOCAL_SHELL, LocalShellTool)
REGISTRY.add(CODE_INTERPRETER, CodeInterpreterTool)
REGISTRY.add(HOSTED_SHELL, ShellTool, when=lambda tool: tool.hosted)
REGISTRY.add(MCP)  # its tools are its server's listing (`hosted.py`), not bound here
REGISTRY.add(TOOL_SEARCH)
REGISTRY.echo(*get_args(HostedTool))

KINDS: dict[str, ToolKind] = REGISTRY.calls
"""Client-owned kinds by call item type."""

ITEMS: dict[str, ItemSurface] = REGISTRY.items
"""Every kind's item types, by type."""


def kind_of_call(call: CallItem) -> ToolKind:
    return KINDS[call.type]


def kind_of_output(output: OutputItem) -> ToolKind:
    return REGISTRY.outputs[output.type]


def answer_key(output: OutputItem) -> str | None:
    """The call_id an answer names (a `local_shell_call_output` may name it by `id`)."""
    return kind_of_output(output).answer_key(output)


def answer_text(output: OutputItem) -> str:
    """An answer as text: what a template's `output` sees and the journal measures."""
    return kind_of_output(output).answer_text(output)


def bind(request: Conversational, toolset: Toolset | None = None) -> dict[str, Binding]:
    """The request's callable tools by name, in declaration order, each bound by its kind
    (`REGISTRY`).

    Programs see the programmatic ones (when the request enables PTC) and the unemulated ones
    (which fail, naming their kind); scenarios call the direct ones. With a `toolset`, function
    tools are its callable ones (qualified names: namespaces, deferred tools a search loaded), and
    a deferred custom tool binds once loaded. A tool bound by its own name (function, custom)
    keeps that name over one bound by its kind's (a function named `shell` beside a shell tool)."""
    ptc = any(getattr(t, "type", None) == "programmatic_tool_calling" for t in request.tools or ())
    found: dict[str, Binding] = {}
    late: list[Binding] = []
    if toolset is not None:
        for name in toolset.callable:
            function = toolset.function(name)
            if function is not None:
                found[name] = Binding(name, FUNCTION, function, ptc and function.programmatic, function.direct)
    for tool in request.tools or ():
        kind = REGISTRY.kind_of_tool(tool)
        binding = kind.binding(tool, ptc, toolset) if kind is not None else None
        if binding is None:
            continue
        if kind is not None and kind.program_name is None:
            found.setdefault(binding.name, binding)
        else:
            late.append(binding)
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
