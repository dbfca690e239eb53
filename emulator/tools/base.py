"""A tool kind's base (`ToolKind`), the kinds with nothing of their own to say (`Unemulated`,
`ServerKind`), and a request's tool as bound to its kind (`Binding`). The kinds and their registry
are in `kinds.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools.surface import ItemSurface
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.base import Caller
from ptc_emulator.emulator.wire.calls import CallItem, OutputItem

__all__ = ["Binding", "ServerKind", "ToolKind", "Unemulated", "first_error"]


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
    """One kind of tool. The base answers for a kind whose calls a program cannot make (hosted items,
    tool search); a kind a program calls overrides `call_item`, `arguments`, `result`, `answer_text`."""

    owner: Literal["client", "server"] = "client"
    text_argument: bool = False
    """The program passes one string, not an object (`Program.text_tools`)."""

    def __init__(
        self,
        kind: str,
        *,
        program_name: str | None = None,
        call: ItemSurface | None = None,
        output: ItemSurface | None = None,
        also: tuple[ItemSurface, ...] = (),
        label: str = "call",
    ) -> None:
        self.kind = kind
        self.program_name = program_name
        """What a program calls it (`tools.shell`); None: the tool's own name (function, custom) or
        its server's listing (mcp: `tools.<server_label>.<tool>`)."""
        self.call = call
        """The call item the client answers (client-owned kinds)."""
        self.output = output
        """The input item that answers `call`."""
        self.also = also
        """The kind's other item types (a hosted tool's items)."""
        self.label = label
        """How error messages name a call (`function call`)."""

    @property
    def call_type(self) -> str:
        """The output item type of a call (`function_call`); "" for a kind without one."""
        return self.call.type if self.call is not None else ""

    @property
    def output_type(self) -> str:
        """The input item type that answers it (`function_call_output`)."""
        return self.output.type if self.output is not None else ""

    @property
    def id_prefix(self) -> str:
        """The prefix of the ids of the call items the emulator makes."""
        return (self.call.listed_id or "") if self.call is not None else ""

    @property
    def items(self) -> tuple[ItemSurface, ...]:
        """Every item type of the kind."""
        return (*(s for s in (self.call, self.output) if s is not None), *self.also)

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        """A request's `tool` (a declaration the kind is registered for) as a binding of this kind,
        or None when it binds nothing now. `ptc`: the request enables programmatic tool calling.
        The base binds it by the kind's program name, callable as its `allowed_callers` say."""
        assert self.program_name is not None, f"the {self.kind} kind binds by the tool's name: it says how"
        return Binding(self.program_name, self, tool, ptc and tool.programmatic, tool.direct)

    def stub(self, call: dict[str, Any]) -> dict[str, Any] | None:
        """The placeholder answer a finished response's `required_input` lists for `call` (steering)."""
        return {"type": self.output_type, "call_id": call["call_id"]} if self.output is not None else None

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

    def answer_key(self, output: OutputItem) -> str | None:
        """The call_id an answer names."""
        return output.call_id

    def answer_text(self, output: OutputItem) -> str:
        """An answer as text: what a template's `output` sees and the journal measures."""
        raise NotImplementedError

    def call_name(self, call: CallItem) -> str:
        """The binding name a call item was made for."""
        return self.kind


def first_error(model: TypeAdapter[Any], value: Any, what: str) -> str | None:
    try:
        model.validate_python(value, strict=True)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            return messages.unknown_field(what, where)
        if first["type"] == "missing":
            return messages.missing_field(what, where)
        return messages.invalid_field(what, where, first["msg"])
    return None


class Unemulated(ToolKind):
    """A tool the emulator echoes but does not run: calling it fails, naming the kind."""

    def __init__(self, kind: str, why: str = "") -> None:
        super().__init__(kind, program_name=kind)
        self.why = why or messages.not_run_here()

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        return Binding(self.kind, self, tool, False, True)  # a program sees it, and fails naming it

    def message(self, name: str) -> str:
        return messages.unemulated_tool(name, self.kind, self.why)


class ServerKind(ToolKind):
    """A tool the emulator runs on the server's side (code interpreter, shell in a hosted container,
    MCP tools, named by their server's listing; see `hosted.py`): a program's call is answered
    there, never surfaced to the client."""

    owner = "server"
