"""A conversation's items as the model upstream reads them, rebuilt every turn from the items
alone (the history, this request's input, what this response produced so far), so a `store:
false` conversation, a restart or another replica gives the upstream the same transcript.

    user / system / developer / assistant message   a message (developer as system)
    program                                          a call of the code function, `{"code": ...}`
    program_output                                   that call's result (an incomplete one says so)
    direct function_call / function_call_output     a call of that function, and its result

A program's own calls and their outputs stay inside the program (the upstream sees only what
the program printed), as the hosted runtime keeps them out of the model's context; reasoning,
MCP listings and other hosted items are not sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ptc_emulator.emulator.tools.toolset import qualified
from ptc_emulator.emulator.wire.items import (
    FunctionCall,
    FunctionCallOutput,
    Item,
    Message,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
)

__all__ = ["Entry", "message_text", "transcript", "upstream_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Entry:
    kind: Literal["message", "call", "result"]
    text: str
    """A message's text, a call's arguments (JSON), or a result."""
    role: Literal["user", "system", "assistant"] = "user"
    call_id: str = ""
    name: str = ""


def upstream_name(tool: str) -> str:
    """A tool's name as the upstream sees it: Chat Completions allows `[A-Za-z0-9_-]` only, so a
    namespace's dot becomes `__`."""
    return _UNSAFE.sub("_", tool.replace(".", "__"))


def message_text(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(str(getattr(part, "text", "") or "") for part in message.content)


def transcript(items: Iterable[Item], code_tool: str) -> list[Entry]:
    entries: list[Entry] = []
    for item in items:
        if isinstance(item, Message):
            role: Literal["user", "system", "assistant"] = (
                "assistant" if item.role == "assistant" else "user" if item.role == "user" else "system"
            )
            entries.append(Entry("message", message_text(item), role=role))
        elif isinstance(item, ProgramItem):
            entries.append(
                Entry("call", json.dumps({"code": item.code}, ensure_ascii=False), call_id=item.call_id, name=code_tool)
            )
        elif isinstance(item, ProgramOutputItem):
            result = item.result if item.status == "completed" else f"The program ended incomplete: {item.result}"
            entries.append(Entry("result", result, call_id=item.call_id))
        elif isinstance(item, FunctionCall) and not isinstance(item.caller, ProgramCaller):
            name = upstream_name(qualified(item.name, item.namespace))
            entries.append(Entry("call", item.arguments, call_id=item.call_id, name=name))
        elif isinstance(item, FunctionCallOutput) and not isinstance(item.caller, ProgramCaller):
            entries.append(Entry("result", item.output_text(), call_id=item.call_id or ""))
    return entries
