"""The tools a request declares, by kind.

    kinds.py      the one registry of tool kinds: what each kind is to a program, to the client
                  and to the rest of the house (`base.py`: a kind's base and a bound tool;
                  `actions.py`: the kinds whose call carries one structured field; `surface.py`:
                  how each kind's item types are listed and counted)
    toolset.py    what the model may call at a point of a conversation (deferred tools, tool search)
    search.py     the ranking behind server-executed tool search
    mcp.py        the `mcp` tool and a real MCP client for it (`egress.py`: where it may connect;
                  `guarded.py`: the connections that keep to it)

A new tool kind is one declaration in `kinds.py` (and its items and declaration in `wire/`).
"""

from ptc_emulator.emulator.tools.base import Binding, ToolKind, Unemulated
from ptc_emulator.emulator.tools.egress import McpPolicy, OwnAddresses
from ptc_emulator.emulator.tools.kinds import ITEMS, KINDS, bind, kind_of_call, kind_of_output
from ptc_emulator.emulator.tools.mcp import call_tool, list_tools
from ptc_emulator.emulator.tools.toolset import Toolset

__all__ = [
    "ITEMS",
    "KINDS",
    "Binding",
    "McpPolicy",
    "OwnAddresses",
    "ToolKind",
    "Toolset",
    "Unemulated",
    "bind",
    "call_tool",
    "kind_of_call",
    "kind_of_output",
    "list_tools",
]
