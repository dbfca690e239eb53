"""Long dumps made a piece at a time. An `mcp_list_tools` item's dump (up to 8 MiB of tools) is
made a run of tools at a time, letting the other threads run between two runs (on the code before
it was one call, on the event loop); the journal's text of a long reply a piece at a time."""

from __future__ import annotations

import json

import pytest

from ptc_emulator.emulator.model.runtime import programs
from ptc_emulator.emulator.wire.base import dump
from ptc_emulator.emulator.wire.items import McpListedTool, McpListTools


def _listing(count: int) -> McpListTools:
    tools = [
        McpListedTool.model_validate(
            {
                "name": f"tool_{i}",
                "description": None if i % 3 == 0 else f"d{i} é " * 5,
                "input_schema": {"type": "object", "properties": {"a": {"type": "string", "default": None}}},
                **({"annotations": {"readOnlyHint": True}} if i % 2 else {}),
                **({"extra_field": {"n": i, "nothing": None}} if i % 5 == 0 else {}),
            }
        )
        for i in range(count)
    ]
    return McpListTools(id="mcpl_1", server_label="big", tools=tools, error=None)


@pytest.mark.parametrize("count", [0, 1, programs.LISTING_RUN, 3 * programs.LISTING_RUN + 7])
def test_a_listing_is_dumped_a_run_of_tools_at_a_time(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    pauses: list[int] = []
    monkeypatch.setattr(programs, "between", lambda: pauses.append(1))
    item = _listing(count)
    made = programs.dumped_listing(item)
    assert made == dump(item)
    assert list(made) == list(dump(item))  # the keys in the dump's order
    assert len(pauses) == max(0, -(-count // programs.LISTING_RUN) - 1)


def test_a_long_journal_body_is_the_text_json_dumps_made() -> None:
    """The journal's text of a long reply (not its own bytes: non-ASCII) is made a piece at a time,
    and is `json.dumps`'s compact text exactly."""
    from ptc_emulator.emulator.journal import entries

    value = {"output": [{"text": 'é"\u2028' * 100_000, "n": [1.5, None, True] * 40}], "id": "resp_1"}
    assert bytes(entries._compact(value)) == json.dumps(value, separators=(",", ":")).encode("utf-8")
