"""A reply made a piece at a time (`jsonreply.render`) is `JSONResponse`'s bytes, and fails where
it fails; `jsonreply.long` calls long what is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.responses import JSONResponse

from ptc_emulator.emulator import jsonreply, messages
from ptc_emulator.emulator.model.runtime.hosted import visible_size
from ptc_emulator.emulator.wire.items import McpListTools
from ptc_emulator.emulator.wire.request import check_json


def _item(n: int) -> dict[str, Any]:
    text = 'é\u2028"\\\x01😀' * (n % 3)
    return {"id": f"m{n}", "text": text, "x": [1, 2.5, None, True, -0.0, 10**30], "d": {}, "e": []}


VALUES: list[Any] = [
    {},
    [],
    None,
    "text",
    {"output": [_item(n) for n in range(5_000)], "usage": {"total": 1}},
    {"output": [{"type": "mcp_list_tools", "tools": [{"name": f"t{n}", "d": "x " * 2_400} for n in range(1_550)]}]},
    {"text": "y" * (3 * jsonreply.PIECE_CHARS + 7) + 'é😀\n"'},
    [[1] * 40_000] * 3,
    {1: 2, "a": 3, None: [1]},
    (1, 2, (3, [4])),
    {"k": [_item(n) for n in range(jsonreply.SHORT + 1)]},
    [[[[[[[[[[{"deep": [1, {"x": "y"}]}]]]]]]]]]],
    [{"a": n} for n in range(jsonreply.VISITS + 50)],
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_bytes_are_json_responses_own(value: Any) -> None:
    assert jsonreply.render(value) == JSONResponse(value).body


@pytest.mark.parametrize("value", [float("nan"), {"a": [1, float("inf")]}, {"a": object()}, {"s": "\ud800" * 10}])
def test_what_json_response_refuses_is_refused(value: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as before:
        JSONResponse(value)
    with pytest.raises(before.type):
        jsonreply.render(value)


def test_long_is_about_the_text() -> None:
    assert not jsonreply.long({"id": "resp_1", "output": [_item(n) for n in range(20)]})
    assert jsonreply.long({"output": [{"text": "x" * jsonreply.LONG_CHARS}]})
    assert jsonreply.long({"output": [_item(1)] * 3_000})
    assert jsonreply.long({str(n): n for n in range(5_000)})


def test_a_long_string_is_checked_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """`check_json` (a create's NaN and lone-surrogate check, in the worker thread reading a large
    body) let the other threads run only between two slices of a long list: a 14 MB tool output
    was one C call (30-60 ms in which the event loop waited). Now it lets them run within it."""
    pauses: list[int] = []
    monkeypatch.setattr(jsonreply, "between", lambda: pauses.append(1))
    check_json({"input": [{"type": "function_call_output", "output": "y" * (8 * jsonreply.PIECE_CHARS)}]})
    assert len(pauses) >= 7


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"a": "\ud800" + "y" * (2 * jsonreply.PIECE_CHARS), "b": float("nan")}, "number_not_finite"),
        ({"a": "y" * (2 * jsonreply.PIECE_CHARS) + "\ud800"}, "lone_surrogate"),
        ({"a": [1.0] * 5_000 + [float("inf")]}, "number_not_finite"),
    ],
)
def test_the_first_error_is_the_one_before(value: Any, error: str) -> None:
    """The whole text is made before it is encoded, as before: a NaN anywhere is found before a
    lone surrogate."""
    with pytest.raises(ValueError) as raised:
        check_json(value)
    assert str(raised.value) == getattr(messages, error)()


def test_a_long_listing_is_measured_a_piece_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """`visible_size` of a 7 MB `mcp_list_tools` item was one `json.dumps` call in the worker
    thread (the event loop waited on it); now the other threads run between pieces. Same size."""
    tools = [{"name": f"t{n}", "description": "d é " * 1_200, "input_schema": {"type": "object"}} for n in range(300)]
    item = McpListTools(id="mcpl_1", server_label="big", tools=tools)
    before = len(json.dumps(item.model_dump(mode="json", exclude_none=True), separators=(",", ":")))
    pauses: list[int] = []
    monkeypatch.setattr(jsonreply, "between", lambda: pauses.append(1))
    assert visible_size(item) == before
    assert pauses
