"""A sandbox worker's long answer reaches the server in frames: each string of it longer than
`_pieces.PIECE_CHARS` follows the answer's line as lines of its own (`_pieces.framed`), decoded a
frame at a time in a worker thread (`_pieces.assemble`), the other threads let in between two.
On the code before, the worker wrote the whole answer as one line and the server decoded it in one
`json.loads` call, holding the interpreter (the event loop too) for all of it: the line decoded
here was some 1.2 M characters long, and the held step was never reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ptc_emulator.sandbox import _pieces, pool
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, while_held

REPEATS = 150_000
"""'é"' this many times: 300 K characters of output (under the 1 MiB limit as the sandbox counts it), 1.2 M of JSON."""


def test_a_long_answer_is_decoded_a_frame_at_a_time(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[int] = []
    real_message = pool._message

    def message(line: bytes) -> dict[str, Any]:
        decoded.append(len(line))
        return real_message(line)

    frames: list[int] = []
    real_assemble = _pieces.assemble

    def assemble(head: dict[str, Any], lines: list[list[bytes]], *args: Any) -> dict[str, Any]:
        frames.extend(len(line) for group in lines for line in group)
        return real_assemble(head, lines, *args)

    monkeypatch.setattr(pool, "_message", message)
    monkeypatch.setattr(_pieces, "assemble", held.around(assemble), raising=False)
    server = make_server()
    body = {
        "model": "m",
        "input": program_message(f"text('é\"'.repeat({REPEATS}))"),
        "tools": PTC_TOOLS,
        "store": False,
    }
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == 'é"' * REPEATS  # the same text, put back together
    assert max(decoded) < _pieces.PIECE_CHARS  # no answer line holds the long string
    assert len(frames) == -(-2 * REPEATS // _pieces.PIECE_CHARS)  # its frames, each a slice
    assert max(frames) <= 8 * _pieces.PIECE_CHARS // 2 + 3


def test_a_short_answer_is_one_line() -> None:
    answer = {"id": 1, "outcome": {"status": "completed", "outputs": [["text", "hi"]], "calls": 0}}
    assert _pieces.framed(answer) == b'{"id":1,"outcome":{"status":"completed","outputs":[["text","hi"]],"calls":0}}\n'


def test_framed_strings_come_back_exactly() -> None:
    """Lone surrogates, escapes and non-ASCII text, cut anywhere, come back as they were sent."""
    long = ('é\ud800"\\\n' * _pieces.PIECE_CHARS)[: 3 * _pieces.PIECE_CHARS + 7]
    answer = {"id": 2, "outcome": {"outputs": [["text", long], ["text", "x"]], "pending": [[0, "f", long[:-1]]]}}
    head, *rest = _pieces.framed(answer).split(b"\n")[:-1]
    line = pool._message(head)
    groups = []
    for count in _pieces.frames_wanted(line):
        groups.append(rest[:count])
        rest = rest[count:]
    assert rest == []
    assert _pieces.assemble(line, groups, pause=lambda: None) == answer
