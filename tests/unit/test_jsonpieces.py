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


class _Loads:
    """`json` as `jsonpieces` sees it, its `loads` counted by the length of what it reads."""

    def __init__(self) -> None:
        self.read: list[int] = []
        self.JSONDecodeError = json.JSONDecodeError

    def loads(self, text: str) -> Any:
        self.read.append(len(text))
        return json.loads(text)


DENSE = {
    "newlines": "\n" * 400_000,
    "backslashes": "\\" * 400_000,
    "pairs": "\U0001f600" * 100_000,
    "high halves": "\ud83d" * 100_000,
    "mixed": ('\\\n\ud83d\ude00\ud83d\\\\\u00e9"\ude00a' * 40_000),
    "backslashes then a pair": "\\" * 300_001 + "\U0001f600" * 10 + "\\" * 7,
}


@pytest.mark.parametrize("kind", DENSE)
def test_a_string_dense_with_escapes_is_read_in_slices(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Escapes everywhere left no place to cut a string's text: the whole text was read again in
    one call (a body with 1,000,000 `\\n` held every other client 0.9-1.3 s)."""
    seen = _Loads()
    calls: list[None] = []
    monkeypatch.setattr(jsonpieces, "json", seen)
    monkeypatch.setattr(jsonpieces, "between", lambda: calls.append(None))
    text = json.dumps({"model": "m", "instructions": DENSE[kind], "input": [1] * 70_000})
    read = jsonpieces.loads(text)
    assert json.dumps(read) == json.dumps(json.loads(text))  # the same code points (a pair is one)
    assert not seen.read, "the text was read again whole"
    assert len(calls) >= len(json.dumps(DENSE[kind])) // (256 * 1024)


@pytest.mark.parametrize("slice_chars", [65, 66, 67, 70, 71, 77, 100, 129])
def test_cuts_among_escapes_read_the_string_json_loads_reads(slice_chars: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonpieces, "_SLICE", slice_chars)
    for kind, string in DENSE.items():
        text = json.dumps([string[:20_000], "y" * 70_000])
        assert json.dumps(jsonpieces.loads(text)) == json.dumps(json.loads(text)), kind


BROKEN = {
    "cut short": '{"input": [' + '{"k": 1}, ' * 40_000 + '{"k": 1}',
    "a byte after": '{"input": [' + '{"k": 1}, ' * 40_000 + '{"k": 1}]} x',
    "no colon": '{"input": [' + '{"k": 1}, ' * 40_000 + '{"k" 1}]}',
    "no comma": '{"input": [' + '{"k": 1}, ' * 40_000 + '{"k": 1} {"k": 1}]}',
    "a key not a string": '{"input": [' + '{"k": 1}, ' * 40_000 + '{"k": 1}], 5: 1}',
    "an array where a key goes": "{" + json.dumps([[1] * 100] * 3000) + ": 1}",
    "a control character late in a string": json.dumps(["y" * 70_000 + "\n" * 200_000]).replace('\\n\\n"]', '\n\n"]'),
    "unterminated": '["' + "\\n" * 200_000,
    "a bad escape late in a string": json.dumps(["y" * 70_000 + "\n" * 200_000])[:-4] + '\\x"]',
}


@pytest.mark.parametrize("kind", BROKEN)
def test_a_long_text_that_is_not_json_is_not_read_again_whole(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's error is the error: before, the text was read again by one `json.loads` call
    for its error (a 14 MB body failing at its last byte held every other client 1-3 s)."""
    text = BROKEN[kind]
    assert len(text) >= jsonpieces.LONG_TEXT
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(text)
    seen = _Loads()
    monkeypatch.setattr(jsonpieces, "json", seen)
    with pytest.raises(json.JSONDecodeError) as read:
        jsonpieces.loads(text)
    assert not seen.read, "the text was read again whole"
    assert read.value.msg.split()[0] == plain.value.msg.split()[0]
