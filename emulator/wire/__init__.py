"""What the API spells: the shapes the engine reads and writes, and nothing that decides.

    base.py       what every wire model stands on: strictness, bounded free-form JSON, dumping
    items.py      the conversation items (`calls.py`: the tool calls a client answers, and the answers)
    request.py    the create body (and the compact and input_tokens bodies), validated strictly;
                  `known.py`: the leading items a replayed body hands over validated already
    tools.py      tool declarations and `tool_choice`
    response.py   the Response status, the request's settings a Response echoes
    events.py     stream events, a pure function of the Response objects
    pages.py      the cursor pages every list endpoint returns

Nothing here imports another room of the engine.
"""

from ptc_emulator.emulator.wire.base import WireModel, dump
from ptc_emulator.emulator.wire.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    CallItem,
    InputItem,
    Item,
    Message,
    OutputItem,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    of_type,
)
from ptc_emulator.emulator.wire.known import KnownItems
from ptc_emulator.emulator.wire.pages import page
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus
from ptc_emulator.emulator.wire.tools import Tool, ToolChoice

__all__ = [
    "CALL_TYPES",
    "OUTPUT_TYPES",
    "CallItem",
    "CompactRequest",
    "CountTokensRequest",
    "CreateRequest",
    "InputItem",
    "Item",
    "KnownItems",
    "Message",
    "OutputItem",
    "ProgramCaller",
    "ProgramItem",
    "ProgramOutputItem",
    "ResponseStatus",
    "Tool",
    "ToolChoice",
    "WireModel",
    "dump",
    "of_type",
    "page",
]
