"""A stored record's JSON text made and read a piece at a time is the text `json.dumps` makes and
the value `json.loads` reads: what was stored before reads back as it did, and the other way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.sandbox import JSON_PIECE_CHARS


def _item(n: int) -> dict[str, Any]:
    text = 'hi \u00e9"\\' * (n % 3)
    return {"id": f"msg_{n}", "type": "message", "content": [{"type": "input_text", "text": text}], "x": [1, 2.5, None]}


LONG = 3 * jsonpieces.PIECE + 1

RECORDS: list[Any] = [
    [],
    {},
    [_item(n) for n in range(5)],
    [_item(n) for n in range(LONG)],
    {"id": "resp_1", "output": [_item(n) for n in range(LONG)], "usage": {"total": 1}, "none": [], "empty": {}},
    # more than a piece of arrays, each itself longer than a piece (kept whole: a level not cut);
    # PIECE + 1 values each cross the same branches as more would, at a third of the cost
    {"nested": [[1] * (jsonpieces.PIECE + 1)] * (jsonpieces.PIECE + 5)},
    [[_item(1)] * LONG, {"k": [1] * LONG}] * 3,
    [{}] * LONG,
    "text",
    None,
]

STRING = ("y" * 70_000 + 'é"\\\n\ud83d\ude00\ud800\x1f') * 20
"""Longer than a few slices of a long string, with escapes, a pair and a lone surrogate."""

LONG_STRINGS: list[Any] = [
    {"input": [{"type": "function_call_output", "call_id": "c", "output": json.dumps({"text": STRING})}]},
    [STRING, {"k": [STRING[: 3 * 2**16], 1]}, "short"],
    STRING,
    {"a": [[[{"b": STRING}]]], "n": [1] * 70_000},
]


@pytest.mark.parametrize("record", RECORDS, ids=range(len(RECORDS)))
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_the_text_is_json_dumps_own(record: Any, separators: tuple[str, str]) -> None:
    assert jsonpieces.dumps(record, separators=separators) == json.dumps(record, separators=separators)


@pytest.mark.parametrize("record", RECORDS, ids=range(len(RECORDS)))
@pytest.mark.parametrize("indent", [None, 1])
def test_a_long_text_reads_back_as_json_loads_reads_it(
    record: Any, indent: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonpieces, "LONG_TEXT", 0)  # every text read a piece at a time
    text = json.dumps(record, indent=indent)
    assert jsonpieces.loads(text) == json.loads(text)


@pytest.mark.parametrize("record", LONG_STRINGS, ids=range(len(LONG_STRINGS)))
@pytest.mark.parametrize("indent", [None, 1])
def test_a_long_string_is_read_a_slice_at_a_time(
    record: Any, indent: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long string (here deeper than the outer levels) is decoded a slice at a time, pausing
    between two; on the code before, it was one call of the C scanner, with no pause in it."""
    calls: list[None] = []
    monkeypatch.setattr(jsonpieces, "between", lambda: calls.append(None))
    text = json.dumps(record, indent=indent)
    read = jsonpieces.loads(text)
    assert read == json.loads(text)
    assert json.dumps(read) == json.dumps(json.loads(text))  # the same code points (a pair is one)
    assert len(calls) >= len(STRING) // (256 * 1024)


@pytest.mark.parametrize("cut", [1, 2, 5, 6, 7, 11, 12, 13])
def test_a_cut_is_never_inside_an_escape(cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonpieces, "_SLICE", 70_000 + cut)
    text = json.dumps({"s": STRING})
    assert jsonpieces.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text", ['{"a": "' + "y" * 300_000, '["' + "y" * 300_000 + '\x01"]', '["' + "y" * 300_000 + '"]]']
)
def test_a_broken_long_string_raises_what_json_loads_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as read:
        jsonpieces.loads(text)
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(text)
    assert str(read.value) == str(plain.value)


@pytest.mark.parametrize("record", [r for r in RECORDS if isinstance(r, list)])
def test_the_compact_size_is_the_compact_texts(record: list[Any]) -> None:
    assert jsonpieces.compact_size(record) == len(json.dumps(record, separators=(",", ":")))


@pytest.mark.parametrize("text", ["[1,", "[1 2]", '{"a" 1}', "[" * 10, '{"a": 1} x', "[1]]"])
def test_a_broken_text_raises_what_json_loads_raises(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonpieces, "LONG_TEXT", 0)
    with pytest.raises(json.JSONDecodeError):
        jsonpieces.loads(text)


def test_the_other_threads_run_between_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []
    monkeypatch.setattr(jsonpieces, "between", lambda: calls.append(None))
    record = {"output": [_item(n) for n in range(LONG)]}
    text = jsonpieces.dumps(record)
    made = len(calls)
    assert made >= 1  # about every JSON_PIECE_CHARS characters (the sandbox's walk): this text is 1.4 of them
    assert len(text) > JSON_PIECE_CHARS
    monkeypatch.setattr(jsonpieces, "LONG_TEXT", 0)
    assert jsonpieces.loads(text) == record
    assert len(calls) - made >= 3


@pytest.mark.parametrize("errors", ["strict", "surrogatepass"])
@pytest.mark.parametrize("shift", [0, 1, 2, 3])
def test_a_long_body_is_decoded_a_piece_at_a_time(errors: str, shift: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut before a character's first byte wherever the pieces fall (one to four bytes each); on
    the code before, one `bytes.decode` call made the whole text, with no pause in it."""
    calls: list[None] = []
    monkeypatch.setattr(jsonpieces, "between", lambda: calls.append(None))
    text = "a" * shift + "é й € \U0001f600 " * 100_000
    raw = text.encode("utf-8")
    assert jsonpieces.decode(raw, "utf-8", errors) == text
    assert len(calls) >= len(raw) // (256 * 1024) - 1 >= 3


@pytest.mark.parametrize("raw", [b"y" * 600_000 + b"\xff", b"y" * 600_000 + "\ud800".encode("utf-8", "surrogatepass")])
def test_a_long_body_refused_is_refused_as_bytes_decode_refuses_it(raw: bytes) -> None:
    with pytest.raises(UnicodeDecodeError) as pieces:
        jsonpieces.decode(raw)
    with pytest.raises(UnicodeDecodeError) as whole:
        raw.decode("utf-8")
    assert str(pieces.value) == str(whole.value)
    assert jsonpieces.decode(raw[:-3], "utf-8", "surrogatepass") == raw[:-3].decode("utf-8", "surrogatepass")
