"""An answer that ends twice, differently, is not recorded (docs/record-replay.md, "Limits"):
over SSE whatever the second end's response id, over a WebSocket as over SSE.

The upstream is a small server on loopback speaking the protocol itself (SSE over HTTP, or a
WebSocket); the client reads the whole answer, and the recording is looked for after it: each
event is recorded (or withdrawn) before the client has it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.recording.recording_support import recorder
from tests.recording.test_record_hostile_upstream import _request, raw_upstream, ws_upstream

QUESTION = {"model": "gpt-test", "input": "no scenario matches this"}


def response(status: str, response_id: str = "resp_up1", text: str = "right") -> dict[str, Any]:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-test",
        "output": [message] if status == "completed" else [],
        **({"error": {"code": "server_error", "message": "boom"}} if status == "failed" else {}),
    }


def events(*ends: dict[str, Any]) -> list[dict[str, Any]]:
    """An answer's events: created, its message added with a text part, a delta, then each of
    `ends` as its terminal event."""
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    said = [
        {"type": "response.created", "response": {**response("in_progress"), "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "part": part,
        },  # fmt: skip
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "delta": "right",
        },
        *({"type": f"response.{end['status']}", "response": end} for end in ends),
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


ENDS = {
    "completed-then-failed-other-id": (response("completed"), response("failed", "resp_other")),
    "completed-then-completed-other-id": (response("completed"), response("completed", "resp_other")),
    "failed-then-completed": (response("failed"), response("completed")),
    "completed-then-failed": (response("completed"), response("failed")),
    "created-then-completed-other-id": (response("completed", "resp_other"),),
}


def _sse(said: list[dict[str, Any]]) -> Any:
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in said)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    return answer


@pytest.mark.parametrize("ends", list(ENDS.values()), ids=list(ENDS))
def test_a_stream_that_ends_twice_otherwise_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ends: tuple[dict[str, Any], ...]
) -> None:
    """Before, only a second end with the first's response id withdrew the recording: a
    `response.failed` of another id (the SDK's stream refuses it: the response's identity
    changed) left the `completed` one recorded, and it replayed as completed; a `failed` first
    and `completed` after was recorded at the second end; a stream created as one response and
    completed as another was recorded."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(events(*ends))) as url, recorder(tmp_path, url, directory) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            answer = http.post("/responses", json={**QUESTION, "stream": True})
    assert answer.status_code == 200
    assert answer.text.count("data: ") == len(events(*ends))  # passed on as it came
    assert not list(directory.glob("*.yaml"))
    said = [r.getMessage() for r in caplog.records]
    why = ("ended a second time, otherwise", "its stream's response id changed on the way")
    assert any(w in m for m in said for w in why), said


def test_a_stream_whose_end_repeats_is_recorded(tmp_path: Path) -> None:
    """The control: the same terminal event twice keeps the recording."""
    directory = tmp_path / "recordings"
    ends = (response("completed"), response("completed"))
    with raw_upstream(_sse(events(*ends))) as url, recorder(tmp_path, url, directory) as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            assert http.post("/responses", json={**QUESTION, "stream": True}).status_code == 200
    assert len(list(directory.glob("*.yaml"))) == 1


def _socket(said: list[dict[str, Any]]) -> Any:
    async def answer(socket: Any) -> None:
        async for _ in socket:
            for event in said:
                await socket.send(json.dumps(event))

    return answer


@pytest.mark.parametrize(
    ("ends", "kept"),
    [
        ((response("completed"), response("failed")), False),
        ((response("completed"), response("completed", text="other")), False),
        ((response("completed"), response("completed")), True),
    ],
    ids=["completed-then-failed", "completed-then-otherwise", "repeated"],
)
def test_a_socket_answer_that_ends_twice_otherwise_is_withdrawn(
    tmp_path: Path, ends: tuple[dict[str, Any], ...], kept: bool
) -> None:
    """Before, the socket took the create at the first terminal event, and a second one for the
    same response never reached the recorder: the `completed` recording was kept and the same
    `response.create` again replayed it, completed, on the emulator."""
    from websockets.sync.client import connect

    said = events(*ends)
    directory = tmp_path / "recordings"
    with ws_upstream(_socket(said)) as url, recorder(tmp_path, url, directory) as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **QUESTION}))
            got = [json.loads(socket.recv(timeout=60)) for _ in said]
        assert [e["type"] for e in got] == [e["type"] for e in said]
        assert len(list(directory.glob("*.yaml"))) == int(kept)


def test_a_socket_upstream_that_gives_one_id_to_every_response_records_each(tmp_path: Path) -> None:
    """A test double that gives every response one id: each create's answer begins with its own
    `response.created`, and is recorded, not taken as the first's second end."""
    from websockets.sync.client import connect

    async def answer(socket: Any) -> None:
        async for frame in socket:
            text = json.loads(frame)["input"].rstrip("?").lower()
            said = events(response("completed", text=text))
            for event in said:
                await socket.send(json.dumps(event))

    directory = tmp_path / "recordings"
    with ws_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            for question in ("One?", "Two?"):
                socket.send(json.dumps({"type": "response.create", "model": "gpt-test", "input": question}))
                got = [json.loads(socket.recv(timeout=60)) for _ in range(len(events(response("completed"))))]
                assert got[-1]["type"] == "response.completed"
        assert len(list(directory.glob("*.yaml"))) == 2
