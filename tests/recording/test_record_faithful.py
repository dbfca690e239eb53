"""What the recorder writes replays as the client saw it, or is not written (the log says why):
parts joined as the SDKs join them, no empty or whitespace-only answer, no message cut short
recorded as whole, no answer a later terminal event contradicts."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptc_emulator.emulator.model.scripted.recorder import Recorder
from ptc_emulator.emulator.model.scripted.recording import empty_answer
from ptc_emulator.emulator.model.scripted.scenario import ScenarioRegistry

QUESTION = {"model": "gpt-test", "input": "Say hello."}


def answer(
    content: list[dict[str, Any]], *, status: str = "completed", item_status: str = "completed"
) -> dict[str, Any]:
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": item_status, "content": content}
    return {"id": "resp_1", "object": "response", "status": status, "output": [message]}


def part(text: Any) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def record(tmp_path: Path, *responses: dict[str, Any]) -> tuple[Recorder, list[Path | None]]:
    recorder = Recorder(tmp_path / "rec", ScenarioRegistry())

    asked = dict(QUESTION)  # one create, as the proxy hands each terminal event of its stream
    stream = object()  # and the one answer they end

    async def run() -> list[Path | None]:
        return [await recorder.exchange(asked, r, "gpt-test", stream) for r in responses]

    return recorder, asyncio.run(run())


def test_parts_join_as_the_sdk_joins_them(tmp_path: Path) -> None:
    _, (path,) = record(tmp_path, answer([part("Hello "), part("world")]))
    assert path is not None
    assert yaml.safe_load(path.read_text())["turns"] == [{"message": "Hello world"}]  # was "Hello \nworld"


@pytest.mark.parametrize(
    "content",
    [[part(""), part(None)], [part(" ")], [part("  "), part("\n")], [part("\n")]],
    ids=["empty-and-null", "space", "spaces-newline", "newline"],
)
def test_an_answer_with_no_text_is_not_recorded(
    tmp_path: Path, content: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        recorder, (path,) = record(tmp_path, answer(content))
    assert path is None
    assert list((tmp_path / "rec").iterdir()) == []
    assert recorder.scenarios.count() == 0
    assert "is empty (or only whitespace)" in caplog.text


@pytest.mark.parametrize("text", [" ", "\n", " \t\n", "{{ ' ' }}", "{# note #}\n"])
def test_a_cassette_with_a_blank_message_is_empty(text: str) -> None:
    assert empty_answer({"turns": [{"message": "ok"}, {"message": text}]}) == (1, "message")
    assert empty_answer({"turns": [{"refusal": text}]}) == (0, "refusal")
    assert empty_answer({"turns": [{"message": " ok "}]}) is None


def test_a_message_cut_short_is_not_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        recorder, (path,) = record(tmp_path, answer([part("partial")], item_status="incomplete"))
    assert path is None
    assert recorder.scenarios.count() == 0
    assert "its message at output.0 is 'incomplete', not completed" in caplog.text


def test_completed_then_failed_is_withdrawn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = answer([part("right")])
    failed = {**answer([]), "status": "failed", "error": {"code": "server_error", "message": "no"}}
    with caplog.at_level(logging.WARNING):
        recorder, (path, again) = record(tmp_path, good, failed)
    assert path is not None and again is None
    assert not path.exists()
    assert recorder.scenarios.count() == 0
    assert "was withdrawn" in caplog.text


def test_the_same_terminal_event_twice_keeps_the_recording(tmp_path: Path) -> None:
    good = answer([part("right")])
    recorder, (path, again) = record(tmp_path, good, dict(good))
    assert path is not None and again is None
    assert path.exists()
    assert recorder.scenarios.count() == 1


def test_another_exchange_with_the_same_response_id_is_its_own(tmp_path: Path) -> None:
    """A test double that gives every response one id: a second question is recorded beside the
    first, not taken as the first's second end."""
    recorder = Recorder(tmp_path / "rec", ScenarioRegistry())

    async def run() -> list[Path | None]:
        first = await recorder.exchange({"model": "m", "input": "One?"}, answer([part("one")]), "m")
        second = await recorder.exchange({"model": "m", "input": "Two?"}, answer([part("two")]), "m")
        return [first, second]

    first, second = asyncio.run(run())
    assert first is not None and second is not None and first != second
    assert first.exists() and second.exists()
    assert recorder.scenarios.count() == 2


def test_a_key_split_across_parts_is_not_written_whole(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each part was looked through as it passed; joined as a client joins them, two parts make
    the key whole: such a recording is not written."""
    from ptc_emulator.emulator.model.upstream.redaction import Redaction

    key = "sk-h6bSECRETkey0123456789"
    recorder = Recorder(tmp_path / "rec", ScenarioRegistry(), Redaction(key).within)
    split = answer([part("a" + key[:8]), part(key[8:])])
    two = answer([part("a" + key[:8])])
    two["output"].append({**two["output"][0], "id": "msg_2", "content": [part(key[8:])]})
    with caplog.at_level(logging.WARNING):
        path = asyncio.run(recorder.exchange(dict(QUESTION), split, "gpt-test"))
        other = asyncio.run(recorder.exchange({"model": "m", "input": "Two?"}, {**two, "id": "resp_2"}, "m"))
    assert path is None and other is None
    assert list((tmp_path / "rec").iterdir()) == []
    assert "it would hold the upstream's key" in caplog.text


def test_a_second_end_while_the_first_is_written_withdraws_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The first end's file is written in a worker thread: a second end that comes meanwhile
    finds nothing written yet, and the first, once written, is withdrawn then (not kept)."""
    import threading

    recorder = Recorder(tmp_path / "rec", ScenarioRegistry())
    writing, release = threading.Event(), threading.Event()
    write = recorder._write

    def held(scenario: dict[str, Any]) -> Any:
        writing.set()
        assert release.wait(60)
        return write(scenario)

    recorder._write = held  # type: ignore[method-assign]
    asked, stream = dict(QUESTION), object()
    failed = {**answer([]), "status": "failed"}

    async def run() -> Path | None:
        first = asyncio.ensure_future(recorder.exchange(asked, answer([part("right")]), "gpt-test", stream))
        assert await asyncio.to_thread(writing.wait, 60)
        assert await recorder.exchange(asked, failed, "gpt-test", stream) is None
        release.set()
        return await first

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(run()) is None
    assert list((tmp_path / "rec").iterdir()) == []
    assert recorder.scenarios.count() == 0
    assert "was withdrawn" in caplog.text


def test_a_cancelled_exchange_holds_the_tape_until_its_thread_ends(tmp_path: Path) -> None:
    """Before, cancelling an exchange (its client gone, a deadline) let go of the lock at once,
    while its worker thread still changed the tape: the next exchange's thread changed it at the
    same time. The thread is held on an event; the lock must stay held until it ends."""
    recorder = Recorder(tmp_path / "rec", ScenarioRegistry())
    entered, release = threading.Event(), threading.Event()
    inside: list[int] = []
    overlapped: list[bool] = []
    real = recorder.tape.exchange

    def held(request: dict[str, Any], response: dict[str, Any]) -> Any:
        overlapped.append(bool(inside))
        inside.append(1)
        try:
            if not entered.is_set():
                entered.set()
                release.wait(30)  # a bound against a hung test, not a timing
            return real(request, response)
        finally:
            inside.pop()

    recorder.tape.exchange = held  # type: ignore[method-assign]

    async def run() -> tuple[bool, Path | None]:
        first = asyncio.create_task(recorder.exchange({"model": "m", "input": "One?"}, answer([part("one")]), "m"))
        await asyncio.to_thread(entered.wait, 30)
        first.cancel()
        for _ in range(50):  # the cancellation is delivered within a step or two of the loop
            await asyncio.sleep(0)
        still_held = recorder.turn.locked()
        second = asyncio.create_task(recorder.exchange({"model": "m", "input": "Two?"}, answer([part("two")]), "m"))
        for _ in range(50):
            await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        return still_held, await second

    still_held, second = asyncio.run(run())
    assert still_held
    assert overlapped == [False, False]
    assert second is not None and second.exists()
