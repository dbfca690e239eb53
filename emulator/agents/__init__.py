"""The Agents API (beta): agents, sessions and their turns, played on the Responses engine.

wire.py        its request bodies and the agent object
session.py     one session's document, and how a step or an input changes it
harness.py     runs sessions' turns on the engine, events out (`events.py`: to subscribers)
keys.py        idempotency keys of session events
mcp.py         MCP tools in sessions, and their approvals
ownership.py   which replica runs a session's turn
"""

from ptc_emulator.emulator.agents.harness import Harness

__all__ = ["Harness"]
