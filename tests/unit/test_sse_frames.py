"""Server-sent events as the transport frames them and the engine splits text into deltas."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from ptc_emulator.api.sse import frame
from ptc_emulator.emulator.wire.events import chunks

EVENTS = [
    {"type": "response.output_text.delta", "delta": "héllo ✓\nnext", "sequence_number": 1},
    {"type": "response.completed", "response": {"id": "resp_1", "output": []}, "sequence_number": 2},
]


def test_sse_frames_parse_back_however_the_bytes_are_split() -> None:
    """As openai-python's SSE decoder reads them, even one byte at a time."""
    stream = b"".join(frame(e) for e in EVENTS)
    for size in (1, 2, 3, 7, len(stream)):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        decoded = list(SSEDecoder().iter_bytes(iter(pieces)))
        assert [(d.event, json.loads(d.data)) for d in decoded] == [(e["type"], e) for e in EVENTS]


@given(st.text())
def test_text_deltas_join_back_to_the_text(text: str) -> None:
    assert "".join(chunks(text)) == text
