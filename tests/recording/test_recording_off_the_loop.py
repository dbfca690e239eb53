"""A finished conversation is turned into YAML, read back and written off the event loop: a long
answer takes seconds to turn into YAML and back (900 KB of text: 3 s), and the recorder answers
health and a small create meanwhile.

The servers run in this process, so the test holds the writing on an event it sets. Nothing is
timed: with the recording on the event loop, health got no answer until the event was set (issue
38); the recording is still made before the recorded request is answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ptc_emulator.api import proxy
from ptc_emulator.emulator.model.scripted import recorder as recording
from tests.recording.recording_support import client, recorder, upstream
from tests.usage.held import Held, others_answered_while_held

PING = {"name": "ping", "match": {"input": "^ping$"}, "turns": [{"message": "pong"}]}


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """Holds the first recording's YAML."""
    holder = Held()
    real = recording.to_yaml

    def to_yaml(scenario: dict[str, Any]) -> str:
        holder.hold()
        return real(scenario)

    monkeypatch.setattr(recording, "to_yaml", to_yaml)
    yield holder
    holder.release.set()


def test_a_recording_is_written_off_the_loop(held: Held, tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    with upstream(tmp_path) as real:
        real.add_scenario(PING)
        with recorder(tmp_path, real.server_url, directory) as rec, ThreadPoolExecutor(1) as pool:
            pending = pool.submit(lambda: client(rec).responses.create(model="m", input="ping"))
            others_answered_while_held(SimpleNamespace(base_url=rec.server_url), held.entered, held.release, pending)  # type: ignore[arg-type]
            answer = pending.result(timeout=120)
            assert answer.output_text == "pong"
            assert [p.name for p in directory.glob("*.yaml")] != []


@pytest.mark.parametrize("stream", [False, True])
def test_a_long_upstream_answer_is_read_off_the_loop(
    stream: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The recording proxy reads each answer it passes on (its ids, what to record): a long one
    (a whole body, or a streamed terminal event) was joined and parsed on the event loop."""
    holder = Held()
    real = proxy._json

    def parse(body: bytes) -> Any:
        if len(body) >= proxy._OFF_LOOP_BYTES:
            holder.hold()
        return real(body)

    monkeypatch.setattr(proxy, "_json", parse)
    long = {"name": "long", "match": {"input": "^long$"}, "turns": [{"message": "x" * proxy._OFF_LOOP_BYTES}]}
    try:
        with upstream(tmp_path) as real_service:
            real_service.add_scenario(long)
            with (
                recorder(tmp_path, real_service.server_url, tmp_path / "recordings") as rec,
                ThreadPoolExecutor(1) as pool,
            ):

                def ask() -> str:
                    if not stream:
                        return client(rec).responses.create(model="m", input="long").output_text
                    with client(rec).responses.stream(model="m", input="long") as events:
                        return events.get_final_response().output_text

                pending = pool.submit(ask)
                server = SimpleNamespace(base_url=rec.server_url)
                others_answered_while_held(server, holder.entered, holder.release, pending)  # type: ignore[arg-type]
                assert pending.result(timeout=120) == long["turns"][0]["message"]
    finally:
        holder.release.set()


@pytest.mark.parametrize("step", ["tape", "scenario"])
def test_a_recording_is_made_off_the_loop(step: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Following the tape and making the scenario ran on the event loop (only the YAML and the
    file were in a thread): a whole answer of 100,000 one-part messages held every client 0.5-1.1 s
    before the recording was refused as too long. Each is held here in turn; health and a small
    create are answered meanwhile, and the recording is still made before the client's answer."""
    holder = Held()
    if step == "tape":
        monkeypatch.setattr(recording.Tape, "exchange", holder.around(recording.Tape.exchange))
    else:
        monkeypatch.setattr(recording, "scenario_from", holder.around(recording.scenario_from))
    directory = tmp_path / "recordings"
    try:
        with upstream(tmp_path) as real:
            real.add_scenario(PING)
            with recorder(tmp_path, real.server_url, directory) as rec, ThreadPoolExecutor(1) as pool:

                def ask() -> tuple[str, list[str]]:
                    answer = client(rec).responses.create(model="m", input="ping").output_text
                    return answer, [p.name for p in directory.glob("*.yaml")]

                pending = pool.submit(ask)
                server = SimpleNamespace(base_url=rec.server_url)
                # The tape is followed one exchange at a time: a small create's recording waits for it.
                small = step != "tape"
                others_answered_while_held(server, holder.entered, holder.release, pending, small)  # type: ignore[arg-type]
                answer, files = pending.result(timeout=120)
                assert answer == "pong"
                assert files != []  # written before the answer came back
    finally:
        holder.release.set()
