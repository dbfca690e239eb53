"""Tool kinds are an extension point: a kind is one `ToolKind` plus a `REGISTRY.add(KIND,
TheDeclaration)` line (docs/architecture.md, "Extending"), found by the type of the declaration a
request lists, not by a ladder of isinstance checks. A kind defined here for `file_search` (which
the emulator echoes but does not run) is, once registered, what a request's `file_search` tool
binds to, what a program may call, and what usage reads of its items; removed, the tool is
unemulated again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ptc_emulator.emulator.responses.usage import item_text
from ptc_emulator.emulator.tools.kinds import (
    ITEMS,
    REGISTRY,
    Binding,
    ItemSurface,
    ServerKind,
    ToolKind,
    Unemulated,
    bind,
    program_tools,
)
from ptc_emulator.emulator.tools.surface import fields
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.tools import FileSearchTool


class FileSearchKind(ServerKind):
    """`file_search` run on the server's side: a program calls `tools.file_search(...)`. Its
    declaration has no `allowed_callers`, so the kind says who may call it: a program, when the
    request enables PTC, and a scenario."""

    def __init__(self) -> None:
        super().__init__(
            "file_search", program_name="file_search", also=(ItemSurface("file_search_call", text=fields("query")),)
        )

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        return Binding("file_search", self, tool, ptc, True)


FILE_SEARCH = FileSearchKind()


@pytest.fixture
def registered() -> Iterator[ToolKind]:
    REGISTRY.add(FILE_SEARCH, FileSearchTool)
    yield FILE_SEARCH
    REGISTRY.remove(FILE_SEARCH)


def _request(*tools: dict[str, Any]) -> CreateRequest:
    return CreateRequest.model_validate({"model": "m", "input": "hi", "tools": list(tools)})


SEARCH = {"type": "file_search", "vector_store_ids": ["vs_1"]}
PTC = {"type": "programmatic_tool_calling"}
CALL = {"type": "file_search_call", "id": "fs_1", "query": "refund policy", "status": "completed"}


def test_a_declaration_binds_to_the_kind_registered_for_its_type(registered: ToolKind) -> None:
    request = _request({"type": "function", "name": "add"}, SEARCH, PTC)
    bound = bind(request)
    assert bound["file_search"].kind is registered
    assert bound["file_search"].programmatic and bound["file_search"].direct
    assert bound["file_search"].tool == request.tools[1]
    assert program_tools(request) == ("file_search",)  # `add` is direct only
    assert registered in REGISTRY and ITEMS["file_search_call"] is registered.also[0]
    assert list(item_text(CALL)) == ["refund policy"]  # usage reads the new kind's items


def test_without_its_registration_the_tool_is_echoed_and_fails_when_called() -> None:
    bound = bind(_request(SEARCH, PTC))
    assert isinstance(bound["file_search"].kind, Unemulated) and not bound["file_search"].programmatic
    assert "file_search_call" not in ITEMS and list(item_text(CALL)) == []


def test_a_function_of_the_same_name_keeps_it(registered: ToolKind) -> None:
    bound = bind(_request(SEARCH, {"type": "function", "name": "file_search"}, PTC))
    assert bound["file_search"].kind.kind == "function"


def test_a_kind_or_its_items_are_registered_once(registered: ToolKind) -> None:
    with pytest.raises(ValueError, match="registered already"):
        REGISTRY.add(FILE_SEARCH, FileSearchTool)
    with pytest.raises(ValueError, match="file_search_call"):
        REGISTRY.add(FileSearchKind())
