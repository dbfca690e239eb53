"""What the model may call at a point of a conversation: declared tools less the deferred ones not
yet loaded, plus what tool search loaded.

A function tool is named by its qualified name: `get_weather` at top level, `shipping.get_delivery_eta`
inside the `shipping` namespace (a program calls it as `tools.shipping.get_delivery_eta(...)`; its
`function_call` item carries `name: "get_delivery_eta", namespace: "shipping"`).

Loaded state is derived from the conversation's items, never kept aside: every `tool_search_output`
in the history (stored or replayed with `store: false`) loads the tools it lists, so a conversation
continued by `previous_response_id` and one replayed in full see the same tools. A server-executed
output may list only tools this request declares; a client-executed one may list any tool
of the Tool union that can be called (function, custom, namespace, mcp), as a client search may
find tools for the tenant that the request did not carry.

A program's tool set is fixed when it starts (its fingerprint binds it, `signing.py`): nothing
loaded later reaches a running program, and none can be loaded while one runs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import ScenarioTurnError
from ptc_emulator.emulator.tools.search import Document, rank
from ptc_emulator.emulator.wire.items import (
    AdditionalToolsItem,
    FunctionCall,
    Item,
    ToolSearchOutputItem,
    dump,
    of_type,
    places_of_type,
)
from ptc_emulator.emulator.wire.request import Conversational
from ptc_emulator.emulator.wire.tools import FunctionTool, NamespaceTool, ProgrammaticToolCalling, Tool, ToolSearchTool

_LOADING_ITEMS = (ToolSearchOutputItem, AdditionalToolsItem)
"""The items that load tools into a conversation."""

__all__ = ["DEFAULT_LIMIT", "NOT_LOADED", "Entry", "Toolset", "call_name", "loaded_names", "qualified", "split"]

DEFAULT_LIMIT = 5
"""How many tools a server search loads at most, unless the scenario says otherwise."""

NOT_LOADED = "deferred, not loaded"


def qualified(name: str, namespace: str | None) -> str:
    """`namespace.name`; a namespace equal to the name is the synthetic one the hosted API gives a
    top-level deferred function's calls (`get_weather` in `get_weather`), which names it alone."""
    return f"{namespace}.{name}" if namespace and namespace != name else name


def split(name: str) -> tuple[str, str | None]:
    """`shipping.get_delivery_eta` -> (`get_delivery_eta`, `shipping`); a plain name has no namespace."""
    namespace, dot, inner = name.rpartition(".")
    return (inner, namespace) if dot else (name, None)


def call_name(call: FunctionCall) -> str:
    return qualified(call.name, call.namespace)


def loaded_names(tools: list[dict[str, Any]]) -> list[str]:
    """The qualified names a `tool_search_output.tools` list loads (MCP servers as `mcp:<label>`)."""
    names: list[str] = []
    for tool in tools:
        kind = tool.get("type")
        if kind == "namespace":
            names += [qualified(str(m.get("name")), str(tool.get("name"))) for m in tool.get("tools") or ()]
        elif kind == "mcp":
            names.append(f"mcp:{tool.get('server_label')}")
        else:
            names.append(str(tool.get("name")))
    return names


@functools.cache
def _tool_adapter() -> TypeAdapter[Any]:
    return TypeAdapter(Tool)


@dataclass(frozen=True, slots=True)
class Entry:
    """A function tool as declared, with its namespace."""

    name: str
    """The qualified name."""
    tool: FunctionTool
    namespace: NamespaceTool | None = None

    @property
    def deferred(self) -> bool:
        return bool(self.tool.defer_loading)


def _declared_deferred(tool: Any) -> bool:
    """Whether a declared tool (or a namespace member) is deferred. Tool kinds without a model of
    their own here (custom, MCP) carry `defer_loading` as an extra field."""
    if isinstance(tool, NamespaceTool):
        return any(bool(m.defer_loading) for m in tool.tools)
    value = getattr(tool, "defer_loading", None)
    if value is None and isinstance(tool, BaseModel):
        value = (tool.model_extra or {}).get("defer_loading")
    return bool(value)


_LOADABLE_OTHER = ("custom", "mcp")


@dataclass
class Toolset:
    ptc: bool
    declared: dict[str, Entry] = field(default_factory=dict)
    """Every declared function tool, deferred or not, by qualified name."""
    loaded: dict[str, FunctionTool] = field(default_factory=dict)
    """Function tools loaded by tool search, by qualified name, as the search output defined them."""
    loaded_other: set[str] = field(default_factory=set)
    """Loaded custom tools (by qualified name) and MCP servers (`mcp:<server_label>`)."""
    searchable_other: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Deferred MCP servers (`mcp:<server_label>`) and custom tools, as declared."""
    search_tool: ToolSearchTool | None = None
    namespaces: dict[str, NamespaceTool] = field(default_factory=dict)

    @classmethod
    def of(cls, request: Conversational, items: Iterable[Item] = (), new_from: int = 0) -> Toolset:
        """The tools of `request` with what the `tool_search_output` items among `items` loaded
        (`new_from`: the index of this request's first input item, for error messages)."""
        tools = request.tools or []
        ptc = [i for i, t in enumerate(tools) if isinstance(t, ProgrammaticToolCalling)]
        if len(ptc) > 1:
            raise messages.one_programmatic_tool_calling(f"tools[{ptc[1]}]")
        found = cls(ptc=bool(ptc))
        for tool in tools:
            if isinstance(tool, FunctionTool):
                found._declare(Entry(tool.name, tool))
            elif isinstance(tool, NamespaceTool):
                if tool.name in found.namespaces:
                    raise messages.duplicate_namespace(tool.name)
                found.namespaces[tool.name] = tool
                for member in tool.tools:
                    if isinstance(member, FunctionTool):
                        found._declare(Entry(qualified(member.name, tool.name), member, tool))
                    elif member.defer_loading:
                        found.searchable_other[qualified(member.name, tool.name)] = dump(member)
            elif isinstance(tool, ToolSearchTool):
                if found.search_tool is not None:
                    raise messages.one_tool_search()
                found.search_tool = tool
            elif getattr(tool, "type", None) in _LOADABLE_OTHER and _declared_deferred(tool):
                data = dump(tool)
                found.searchable_other[loaded_names([data])[0]] = data
        for space in found.namespaces.values():
            for member in space.tools:
                if getattr(member, "name", None) == space.name:
                    raise messages.namespace_reserved(space.name)
        for name in found.declared:
            if name in found.namespaces:
                raise messages.function_and_namespace(name)
        if found.search_tool is None and any(_declared_deferred(t) for t in tools):
            raise messages.deferred_needs_search()
        # Only the items a check can refuse are visited: picked at C speed (a long program's
        # conversation is mostly its calls and outputs, which neither check reads). A call is read
        # when a name may need its namespace: a deferred top-level function's, or a namespace's
        # function's (declared, or loaded by a search or an additional_tools item).
        listed = items if isinstance(items, list) else list(items)
        deferred = any(e.namespace is None and e.deferred for e in found.declared.values())
        spaced = bool(found.namespaces) or found.search_tool is not None
        calls = deferred or spaced or next(of_type(listed, AdditionalToolsItem), None) is not None
        kinds = (FunctionCall, ToolSearchOutputItem, AdditionalToolsItem) if calls else _LOADING_ITEMS
        for index in places_of_type(listed, kinds):
            item = listed[index]
            if index >= new_from and isinstance(item, FunctionCall) and item.namespace is None:
                if found._needs_namespace(item.name):
                    raise messages.missing_namespace(item.name, f"input[{index - new_from}].namespace")
            if isinstance(item, ToolSearchOutputItem | AdditionalToolsItem):
                param = f"input[{index - new_from}]" if index >= new_from else "previous_response_id"
                execution = item.execution or "server" if isinstance(item, ToolSearchOutputItem) else "client"
                found.load(item.tools, execution=execution, param=param)
        return found

    def _needs_namespace(self, name: str) -> bool:
        """Whether a call of `name` without a namespace names nothing of the default namespace: a
        deferred top-level function (its calls carry the synthetic namespace, its own name), or a
        function only a namespace has (declared or loaded so far)."""
        entry = self.declared.get(name)
        if entry is not None:
            return entry.deferred
        if name in self.loaded:
            return False
        return any(split(q)[0] == name for q in (*self.declared, *self.loaded) if "." in q)

    def _declare(self, entry: Entry) -> None:
        if entry.name in self.declared:
            raise messages.duplicate_tool_name(entry.name)
        self.declared[entry.name] = entry

    # ---- what may be called ---------------------------------------------------------------------

    @property
    def execution(self) -> Literal["server", "client"]:
        return (self.search_tool.execution if self.search_tool else None) or "server"

    def function(self, name: str) -> FunctionTool | None:
        """The callable function tool with this qualified name: declared and not deferred, or loaded."""
        if name in self.loaded:
            return self.loaded[name]
        entry = self.declared.get(name)
        return entry.tool if entry is not None and not entry.deferred else None

    def not_loaded(self, name: str) -> bool:
        """Declared deferred and not loaded yet."""
        entry = self.declared.get(name)
        return entry is not None and entry.deferred and name not in self.loaded

    def other_available(self, key: str) -> bool:
        """For custom tools (qualified name) and MCP servers (`mcp:<server_label>`): not deferred,
        or loaded. Tool kinds other than function consult this before they play."""
        return key not in self.searchable_other or key in self.loaded_other

    @property
    def callable(self) -> list[str]:
        names = [n for n, e in self.declared.items() if not e.deferred]
        return [*names, *(n for n in self.loaded if n not in names)]

    @property
    def programmatic(self) -> tuple[str, ...]:
        """What a program started now may call, sorted (a fingerprint binds this tuple)."""
        if not self.ptc:
            return ()
        return tuple(sorted(n for n in self.callable if (tool := self.function(n)) is not None and tool.programmatic))

    # ---- loading --------------------------------------------------------------------------------

    def load(self, tools: list[dict[str, Any]], *, execution: str, param: str = "input") -> None:
        """Load the definitions of a `tool_search_output`, checked against the Tool union."""
        for index, raw in enumerate(tools):
            where = f"{param}.tools[{index}]"
            try:
                tool = _tool_adapter().validate_python(raw)
            except ValidationError as e:
                first = e.errors()[0]
                at = ".".join(str(p) for p in first["loc"])
                raise messages.search_output_invalid_tool(at, first["msg"], where) from e
            if isinstance(tool, FunctionTool):
                self._load_function(tool.name, tool, None, execution, where)
            elif isinstance(tool, NamespaceTool):
                for member in tool.tools:
                    name = qualified(member.name, tool.name)
                    if isinstance(member, FunctionTool):
                        self._load_function(name, member, tool, execution, where)
                    else:
                        self.loaded_other.add(name)
                self.namespaces.setdefault(tool.name, tool)
            elif getattr(tool, "type", None) in _LOADABLE_OTHER:
                self.loaded_other.update(loaded_names([dump(tool)]))
            else:
                raise messages.search_output_loads_kind(tool.type, where)

    def _load_function(
        self, name: str, tool: FunctionTool, namespace: NamespaceTool | None, execution: str, where: str
    ) -> None:
        entry = self.declared.get(name)
        if execution == "server" and entry is None:
            raise messages.search_output_undeclared(name, where)
        if entry is not None and not entry.deferred:
            return  # already callable as declared
        self.loaded[name] = tool

    # ---- searching ------------------------------------------------------------------------------

    def _documents(self) -> list[Document]:
        documents = []
        for name, entry in self.declared.items():
            if not entry.deferred:
                continue
            tool, namespace = entry.tool, entry.namespace
            parts = [tool.name, tool.description or ""]
            if namespace is not None:
                parts += [namespace.name, namespace.description]
            properties = (tool.parameters or {}).get("properties")
            if isinstance(properties, dict):
                for key, schema in properties.items():
                    parts.append(key)
                    if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                        parts.append(schema["description"])
            documents.append(Document(name, " ".join(parts)))
        for key, data in self.searchable_other.items():
            parts = [key.removeprefix("mcp:"), str(data.get("description") or data.get("server_description") or "")]
            documents.append(Document(key, " ".join(parts)))
        return documents

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[str]:
        """The deferred tools that match `query`, best first (BM25 over names and descriptions)."""
        return rank(query, self._documents(), limit)

    def search_arguments(
        self, load: list[str] | None, query: str | None, given: dict[str, Any] | None, *, scenario: str, turn: int
    ) -> dict[str, Any]:
        """The `tool_search_call.arguments` of a scripted search turn, checked: the request has a
        tool_search tool, a `load` list (the turn's) names deferred tools, and a client search's arguments fit
        the tool's `parameters`. `query` and `given` are the turn's rendered templates."""

        def error(reason: str) -> ScenarioTurnError:
            return messages.scenario_turn(scenario, turn, reason, "tools")

        if self.search_tool is None:
            raise error(messages.no_search_tool())
        if load is not None:
            searchable = {d.key for d in self._documents()}
            unknown = [n for n in load if n not in searchable]
            if unknown:
                raise error(messages.search_loads_undeferred(unknown[0]))
        arguments = given if given is not None else {"query": query} if query is not None else {"paths": load}
        parameters = self.search_tool.parameters
        if self.execution == "client" and parameters is not None:
            from jsonschema import Draft202012Validator  # only here: jsonschema costs every import 80 ms

            problem = next(iter(Draft202012Validator(parameters).iter_errors(arguments)), None)
            if problem is not None:
                raise error(messages.search_arguments_unfit(json.dumps(arguments), problem.message))
        return arguments

    def definitions(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """The `tool_search_output.tools` loading `names`: top-level tools as declared, namespace
        members grouped under their namespace (in the order the namespace lists them)."""
        out: list[dict[str, Any]] = []
        grouped: dict[str, dict[str, Any]] = {}
        wanted = list(dict.fromkeys(names))
        for name in wanted:
            entry = self.declared.get(name)
            if entry is None:
                out.append(self.searchable_other[name])
            elif entry.namespace is None:
                out.append(dump(entry.tool))
            elif entry.namespace.name not in grouped:
                namespace = entry.namespace
                members = [dump(m) for m in namespace.tools if qualified(m.name, namespace.name) in wanted]
                grouped[namespace.name] = {
                    "type": "namespace",
                    "name": namespace.name,
                    "description": namespace.description,
                    "tools": members,
                }
                out.append(grouped[namespace.name])
        return out
