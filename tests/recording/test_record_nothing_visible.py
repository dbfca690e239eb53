"""What the recording proxy does not record although the answer completed: a message with
nothing visible in it, and a completed answer that carries an error (docs/record-replay.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.model.scripted.recording import empty_answer
from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import raw_upstream
from tests.recording.test_record_two_messages import message, whole


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": [message("msg_1", text)],
        **extra,
    }


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (body("\u200b\ufeff"), "its message at turns.0 is empty (or only whitespace)"),
        (body(" \u2060\u200d\n\u3164"), "its message at turns.0 is empty (or only whitespace)"),
        (body("\u034f\ufe0f\u180b"), "its message at turns.0 is empty (or only whitespace)"),
        (body("\u20dd\u0301"), "its message at turns.0 is empty (or only whitespace)"),
        (body("e\u0301"), None),
        (body("right", error={"code": "server_error", "message": "boom"}), "it is completed but carries an error"),
        (body("right", error=None), None),
        (body("\u200bright"), None),
    ],
    ids=[
        *("zero-width", "joiners-and-filler", "marks-alone", "enclosing-mark", "accented"),
        *("error", "null-error", "zero-width-then-text"),
    ],
)
def test_an_answer_with_nothing_visible_or_an_error_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: dict[str, Any], said: str | None
) -> None:
    """Before, `strip()` kept zero-width and format characters, so a message of only U+200B and
    U+FEFF was recorded and replayed as a completed answer a reader sees nothing of; and a
    completed answer with an `error` was recorded as a plain completed one. And before, marks with
    no character to sit on (a grapheme joiner, variation selectors: nonspacing) counted as visible."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(whole(answer)) as url, recorder(tmp_path, url, directory) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            got = http.post("/responses", json={"model": "gpt-test", "input": "Say it."})
    assert got.status_code == 200 and got.json() == answer  # passed on as it came
    assert bool(list(directory.glob("*.yaml"))) is (said is None)
    if said is not None:
        assert f"a finished conversation was not recorded: {said}" in [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("text", ["\u200b", "\ufeff\u200b", " \u00ad\n", "{{ '\u200b' }}"])
def test_a_cassette_message_with_nothing_visible_is_empty(text: str) -> None:
    assert empty_answer({"turns": [{"message": text}]}) == (0, "message")
    assert empty_answer({"turns": [{"refusal": text}]}) == (0, "refusal")
