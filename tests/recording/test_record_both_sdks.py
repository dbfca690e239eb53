"""What either official SDK refuses live, or what a recording cannot replay as it went, is not
recorded (docs/record-replay.md, "Limits"): an SSE event or WebSocket message that is not JSON; the
streams the Node SDK's accumulator refuses (an item's event naming another item, or none; an event
type it does not know; an `output_item.done` with no item added); a response before the last one
that was `incomplete` or carried an error; a preamble that was not completed, or that the replay
would change (its phase, its empty parts, its annotations). A client that goes away is logged so.
The upstream is a small server on loopback speaking SSE, JSON or WebSocket itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.recording.recording_support import client, recorder
from tests.recording.test_record_hostile_upstream import raw_upstream, ws_upstream
from tests.recording.test_record_item_lifecycle import DELTA, DONE, EMPTY, PART, stream
from tests.recording.test_record_second_end import QUESTION, _sse, response


def _framed(body: bytes) -> Any:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    return answer


def _blocks(said: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in said]


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_an_event_that_is_not_json_keeps_the_answer_from_being_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    """Before, the event was skipped and the answer recorded; replayed, it passed where the SDK raised."""
    blocks = _blocks(stream())
    body = b"".join([*blocks[:-1], b"event: response.output_text.delta\ndata: {not json\n\n", blocks[-1]])
    directory = tmp_path / "recordings"
    overrides: dict[str, Any] = {}
    if keyed:
        monkeypatch.setenv("UPKEY_H", "sk-UPSTREAMSECRET1234567890")
        overrides.update(upstream_api_key_env="UPKEY_H", allow_unguarded_upstream_key=True)
    with (
        caplog.at_level("INFO"),
        raw_upstream(_framed(body)) as url,
        recorder(tmp_path, url, directory, **overrides) as rec,
    ):
        with pytest.raises(json.JSONDecodeError), client(rec).responses.stream(**QUESTION) as events:
            events.get_final_response()
    assert not list(directory.glob("*.yaml"))
    assert any("its stream has an event whose data is not a JSON object" in m for m in _logged(caplog))


def test_the_done_sentinel_is_no_refusal(tmp_path: Path) -> None:
    body = b"".join([*_blocks(stream()), b"data: [DONE]\n\n"])
    directory = tmp_path / "recordings"
    with raw_upstream(_framed(body)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1


def test_a_socket_message_that_is_not_json_keeps_the_answer_from_being_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from websockets.sync.client import connect

    said = stream()

    async def answer(socket: Any) -> None:
        async for _ in socket:
            for event in said:
                if event["type"] == "response.completed":
                    await socket.send("{not json")
                await socket.send(json.dumps(event))

    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), ws_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            socket.send(json.dumps({"type": "response.create", **QUESTION}))
            got = [socket.recv(timeout=60) for _ in range(len(said) + 1)]
        assert "{not json" in got
    assert not list(directory.glob("*.yaml"))
    assert any("its socket sent a message that is not a JSON object" in m for m in _logged(caplog))


def _other_item(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "item_id": "msg_other"} if "item_id" in event else event


NODE = {  # the Node SDK's error (openai 7.60), the recorder's reason
    "item-id-of-another-item": (
        [_other_item(e) for e in stream()],
        "a response.content_part.added event names item 'msg_other', not the item at output index 0",
    ),
    "delta-without-item-id": (
        stream({k: v for k, v in DELTA.items() if k != "item_id"}),
        "a response.output_text.delta event at output index 0 has no item_id",
    ),
    "unknown-event": (
        stream({"type": "response.frobnicate", "x": 1}),
        "it sends an event of a type the Node SDK's stream does not know ('response.frobnicate')",
    ),
    "done-without-added": (
        [
            {**e, "sequence_number": n}
            for n, e in enumerate(
                [
                    stream()[0],
                    {"type": "response.output_item.done", "output_index": 0, "item": DONE},
                    stream()[-1],
                ]
            )
        ],
        "a response.output_item.done event at output index 0 names no output item added there",
    ),
}


@pytest.mark.parametrize(("said", "why"), list(NODE.values()), ids=list(NODE))
def test_a_stream_the_node_sdk_refuses_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, said: list[dict[str, Any]], why: str
) -> None:
    """The Python SDK takes these streams; the Node SDK's raises (`expected item_id 'msg_1', got
    'msg_other'`, `expected a non-empty item_id`, `Unhandled response stream event`, `missing
    output at index 0`). Before, they were recorded, and a JS test that failed live passed on replay."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert not list(directory.glob("*.yaml"))
    assert any(f"its stream breaks the output items' order: {why}" in m for m in _logged(caplog)), _logged(caplog)


def test_a_well_ordered_stream_with_its_parts_and_item_ids_is_recorded(tmp_path: Path) -> None:
    """The control: the stream the hosted API sends (every item event naming its item)."""
    said = stream(
        {"type": "response.output_text.done", "output_index": 0, "content_index": 0, "item_id": "msg_1",
         "text": "right"},
        {"type": "response.content_part.done", "output_index": 0, "content_index": 0, "item_id": "msg_1",
         "part": {"type": "output_text", "text": "right", "annotations": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": DONE},
    )  # fmt: skip
    directory = tmp_path / "recordings"
    with raw_upstream(_sse(said)) as url, recorder(tmp_path, url, directory) as rec:
        with client(rec).responses.stream(**QUESTION) as events:
            assert events.get_final_response().output_text == "right"
    assert len(list(directory.glob("*.yaml"))) == 1
    assert EMPTY and PART  # the stream's pieces, as `stream` lays them out


# ---- conversations -------------------------------------------------------------------------------

TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}",
        "status": "completed"}  # fmt: skip


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "id": "msg_9", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}], **extra}  # fmt: skip


def _conversation(first: dict[str, Any]) -> Any:
    """Answers JSON: `first` to a request without a call's output, a final message to one with it."""
    count = [0]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        body = json.loads(await reader.readexactly(length))
        count[0] += 1
        if "function_call_output" in json.dumps(body.get("input")):
            said = {**response("completed", f"resp_up{count[0]}"), "output": [_message("Done.")]}
        else:
            said = {**response("completed", f"resp_up{count[0]}"), **first}
        said["previous_response_id"] = body.get("previous_response_id")
        data = json.dumps(said).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    return answer


def _plain(rec: Any) -> Any:
    """The official SDK, its answers not checked against the full schema (the upstream's are short)."""
    import openai

    return openai.OpenAI(base_url=rec.server_url, api_key="sk-test", max_retries=0)


PREAMBLE = _message("Let me check. ")
CONVERSATIONS = {
    "first-incomplete": (
        {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [CALL]},
        "before the last one: it is 'incomplete'",
    ),
    "first-with-error": (
        {"error": {"code": "server_error", "message": "boom"}, "output": [CALL]},
        "before the last one: it is completed but carries an error",
    ),
    "preamble-incomplete": (
        {"output": [{**PREAMBLE, "status": "incomplete"}, CALL]},
        "before the last one: its message at output.0 is 'incomplete', not completed",
    ),
    "preamble-final-answer": (
        {"output": [{**PREAMBLE, "phase": "final_answer"}, CALL]},
        "says a message of phase 'final_answer'",
    ),
    "preamble-no-parts": ({"output": [{**PREAMBLE, "content": []}, CALL]}, "says a message with no content parts"),
    "preamble-annotated": (
        {
            "output": [
                _message(
                    "Let me check. ",
                    content=[
                        {
                            "type": "output_text",
                            "text": "Let me check. ",
                            "annotations": [
                                {
                                    "type": "url_citation",
                                    "url": "https://x.test",
                                    "title": "x",
                                    "start_index": 0,
                                    "end_index": 3,
                                }
                            ],
                        }
                    ],
                ),
                CALL,
            ]
        },
        "says a message whose text carries annotations",
    ),  # fmt: skip
}


@pytest.mark.parametrize(("first", "why"), list(CONVERSATIONS.values()), ids=list(CONVERSATIONS))
@pytest.mark.parametrize("chained", [True, False], ids=["previous-response-id", "store-false"])
def test_a_conversation_a_recording_would_change_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, first: dict[str, Any], why: str, chained: bool
) -> None:
    """Before, each was recorded, and replayed as a clean `completed` first response (or a completed
    `commentary` preamble with one text part and no annotations)."""
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_conversation(first)) as url, recorder(tmp_path, url, directory) as rec:
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=chained)  # type: ignore[arg-type]
        out = [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        if chained:
            r2 = sdk.responses.create(model="gpt-test", input=out, tools=TOOLS, previous_response_id=r1.id)  # type: ignore[arg-type]
        else:
            items += [i.model_dump(exclude_none=True) for i in r1.output] + out
            r2 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
        assert r2.output_text == "Done."
    assert not list(directory.glob("*.yaml"))
    said = [m for m in _logged(caplog) if "was not recorded" in m]
    assert any(why in m or (not chained and "after the user message is 'incomplete'" in m) for m in said), said


def test_a_clean_conversation_with_a_preamble_is_recorded(tmp_path: Path) -> None:
    directory = tmp_path / "recordings"
    with raw_upstream(_conversation({"output": [PREAMBLE, CALL]})) as url, recorder(tmp_path, url, directory) as rec:
        sdk = _plain(rec)
        r1 = sdk.responses.create(model="gpt-test", input="no scenario matches this", tools=TOOLS)  # type: ignore[arg-type]
        out = [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        sdk.responses.create(model="gpt-test", input=out, tools=TOOLS, previous_response_id=r1.id)  # type: ignore[arg-type]
    assert len(list(directory.glob("*.yaml"))) == 1


def test_a_client_that_goes_away_is_logged_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before, it was logged as the upstream's answer taking longer than the deadline, and a 504
    error event was sent to the gone client."""
    gone = asyncio.Event()

    async def forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        try:
            while not reader.at_eof():
                writer.write(b"4\r\n: .\n\r\n")
                await writer.drain()
                await asyncio.sleep(0.02)
        except (ConnectionError, OSError):
            pass
        gone.set()
        writer.close()

    with caplog.at_level("INFO"), raw_upstream(forever) as url, recorder(tmp_path, url, tmp_path / "r") as rec:
        with httpx.Client(base_url=rec.server_url, timeout=60) as http:
            with http.stream("POST", "/responses", json={**QUESTION, "stream": True}) as answer:
                assert next(answer.iter_raw()).startswith(b":")
            for _ in range(600):
                if any("the client went away" in m for m in _logged(caplog)):
                    break
                http.get(rec.server_url.removesuffix("/v1") + "/_emulator/health")
    said = _logged(caplog)
    assert any("the client went away" in m for m in said), said
    assert not any("took longer than" in m for m in said), said
