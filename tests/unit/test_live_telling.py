"""What a model reports while it plays (`responses/live.py`) becomes the very events the finished
response is told with: the same items at the same indexes, a message's deltas as the model wrote
them, and the rest of the output once it has finished."""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.emulator.responses.live import LiveTelling
from ptc_emulator.emulator.wire import events

PROGRAM = {"type": "program", "id": "prog_1", "call_id": "call_1", "code": "text(1)", "fingerprint": "f"}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_2", "name": "f", "arguments": '{"a": 1}'}


def _message(text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}


def test_a_message_told_in_its_own_words_is_told_as_the_finished_response_tells_it() -> None:
    text = "Every SKU is well stocked."
    output = [PROGRAM, _message(text), CALL]
    woken: list[int] = []
    live = LiveTelling(lambda: woken.append(1))
    live.item(PROGRAM)
    live.opened(_message(""))
    for piece in events.chunks(text):
        live.delta(piece)
    told = live.take()
    live.item(_message(text))
    assert live.agrees(output)
    assert [*told, *live.rest(output)] == events.output_events(output)
    assert woken


def test_the_deltas_are_the_models_pieces_and_nothing_reported_is_told_from_the_output() -> None:
    live = LiveTelling()
    live.opened(_message(""))
    live.delta("Every S")
    live.delta("KU.")
    live.item(_message("Every SKU."))
    told = live.rest([_message("Every SKU."), CALL])
    assert [e["delta"] for e in told if e["type"] == "response.output_text.delta"] == ["Every S", "KU."]
    assert told[-len(events.item_events(CALL, 1)) :] == events.item_events(CALL, 1)
    assert LiveTelling().rest([PROGRAM, CALL]) == events.output_events([PROGRAM, CALL])


def test_what_breaks_the_grammar_is_refused() -> None:
    live = LiveTelling()
    with pytest.raises(ValueError, match="no message opened"):
        live.delta("x")
    live.opened(_message(""))
    with pytest.raises(ValueError, match="was not finished"):
        live.item(CALL)
    assert not live.agrees([CALL])
