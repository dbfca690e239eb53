"""A long message to a sandbox worker is encoded a piece at a time (`sandbox._pieces`), letting the
other threads run between two pieces; on the code before, `json.dumps` of a 14 MB tool output was
one call that held the interpreter (the event loop among its threads) 30-60 ms. Same bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.sandbox import _pieces, pool

VALUES: list[Any] = [
    {},
    [],
    "",
    {"a": [1, 2.5, None, True, float("nan"), float("inf")], "b": {"c": "d"}},
    {"output": "y" * (3 * _pieces.PIECE_CHARS + 5)},
    {"output": 'é"\\\n\u2028\ud800😀' * 200_000},
    {"results": [{"i": i, "text": "t" * 50} for i in range(5_000)]},
    {"deep": [[[[[[[["x" * 1000]]]]]]]], 1: "int key"},
    {"tuple": ("a", "b"), "list": list(range(200))},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_pieces_make_json_dumps_text(value: Any) -> None:
    assert _pieces.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_a_long_message_is_sent_a_piece_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[int] = []
    monkeypatch.setattr(_pieces, "between", lambda: pauses.append(1))
    message = {"type": "resume", "results": [{"ok": True, "value": "y" * 2_000_000}]}
    assert pool._long_line(message) == pool._line(message)
    assert len(pauses) >= 2_000_000 // _pieces.PIECE_CHARS
