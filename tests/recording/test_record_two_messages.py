"""A whole answer of two assistant messages replays as the client saw it live: the SDKs'
`output_text` joins a response's messages with nothing between (docs/record-replay.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_hostile_upstream import _request, raw_upstream


def message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def whole(body: dict[str, Any]) -> Any:
    data = json.dumps(body).encode()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    return answer


def test_two_messages_replay_as_the_sdk_joined_them(tmp_path: Path) -> None:
    """Before, each message was a turn of its own: a turn is one message, so the replay said the
    first, 'Hello ', where the client had read 'Hello world'."""
    body = {
        "id": "resp_two",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": [message("msg_1", "Hello "), message("msg_2", "world")],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    directory = tmp_path / "recordings"
    with raw_upstream(whole(body)) as url, recorder(tmp_path, url, directory) as rec:
        sdk = client(rec)
        live = sdk.responses.create(model="gpt-test", input="Greet the world.")
        [path] = directory.glob("*.yaml")
        replayed = sdk.responses.create(model="gpt-test", input="Greet the world.")  # played here now
    assert live.id == "resp_two" and replayed.id != live.id
    assert live.output_text == replayed.output_text == "Hello world"
    assert yaml.safe_load(path.read_text())["turns"] == [{"message": "Hello world"}]


def test_an_answer_too_long_to_record_is_refused_before_its_yaml(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an answer of 1.2 MiB of text (here 3,000 messages) was turned into YAML, seconds for
    14 MB, only for the loader to refuse the file; now its size is counted and it is refused
    first (the YAML never made), and the client gets the answer whole all the same."""
    from ptc_emulator.emulator.model.scripted import recorder as recorder_module

    made: list[int] = []
    real = recorder_module.to_yaml
    monkeypatch.setattr(recorder_module, "to_yaml", lambda scenario: made.append(1) or real(scenario))
    followed: list[int] = []
    real_exchange = recorder_module.Tape.exchange
    monkeypatch.setattr(
        recorder_module.Tape, "exchange", lambda tape, *a: followed.append(1) or real_exchange(tape, *a)
    )
    body = {
        "id": "resp_long",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-test",
        "output": [message(f"msg_{n}", "x" * 419 + " ") for n in range(3_000)],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(whole(body)) as url, recorder(tmp_path, url, directory) as rec:
        got = client(rec).responses.create(model="gpt-test", input="Say a lot.")
    assert len(got.output_text) == 3_000 * 420
    # Refused before the tape (before, it was followed and its scenario made under the tape's lock).
    assert not list(directory.glob("*.yaml")) and made == [] and followed == []
    said = [r.getMessage() for r in caplog.records]
    assert any(
        s.startswith("a finished conversation was not recorded: its scenario would be larger than") for s in said
    )
