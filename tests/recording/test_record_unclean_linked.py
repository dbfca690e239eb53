"""How the recorder links a `store: false` conversation's resent items to the earlier response
they came from (docs/record-replay.md, "Limits"): a conversation continued from a response a
recording cannot replay as it went is not recorded, and one that only says the same text, or
reuses a call id, in another conversation is.

- A response whose stream an official SDK raises on (the Node SDK's item identity rules) is noted
  as unclean: before, the tape never saw it, and a client whose SDK took it (Python) had the
  conversation recorded whole, that response replayed to the Node SDK as clean.
- An assistant message is linked by the texts a client resends it as: `response.output_text`
  joins parts, and messages, with nothing between (before, only the parts joined by line breaks
  linked, and a two-part `incomplete` message resent as `output_text` replayed `completed`).
- A `program` item resent without its id is linked by its `call_id` (before, only `*_call` kinds).
- A call id or a text links only within the conversation it was said in, by its user messages
  (before, an `incomplete` answer that said `'Done.'` kept any later conversation resending an
  assistant `'Done.'` from being recorded).

The upstream is a small server on loopback answering each request in turn, as scripted."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import recorder
from tests.recording.test_record_both_sdks import TOOLS, _logged, _plain
from tests.recording.test_record_hostile_upstream import raw_upstream

Answer = Callable[[dict[str, Any], str], "list[dict[str, Any]] | dict[str, Any]"]
"""The request's body and a response id -> a response (JSON) or its events (SSE)."""


def _response(response_id: str, output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": 1, "status": "completed", "model": "gpt-test",
            "output": output, **fields}  # fmt: skip


def _message(item_id: str, *texts: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": t, "annotations": []} for t in texts]
    return {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": content}


def _call(item_id: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "lookup", "arguments": "{}",
            "status": "completed"}  # fmt: skip


INCOMPLETE = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}


def _streamed(response: dict[str, Any]) -> list[dict[str, Any]]:
    """`response`'s events as the hosted API streams them, each item added and done whole."""
    created = {**response, "status": "in_progress", "output": []}
    said: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for index, item in enumerate(response["output"]):
        said.append({"type": "response.output_item.added", "output_index": index, "item": item})
        said.append({"type": "response.output_item.done", "output_index": index, "item": item})
    said.append({"type": f"response.{response['status']}", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(said)]


def _scripted(*answers: Answer) -> Any:
    """Answers the n-th request with `answers[n]` (the last one after), as JSON or as SSE."""
    count = itertools.count(1)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        body = json.loads(await reader.readexactly(length))
        n = next(count)
        said = answers[min(n, len(answers)) - 1](body, f"resp_up{n}")
        if isinstance(said, list):
            data, kind = (
                b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in said),
                "text/event-stream",
            )
        else:
            data, kind = json.dumps(said).encode(), "application/json"
        head = f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nconnection: close\r\ncontent-length: {len(data)}\r\n\r\n"
        writer.write(head.encode() + data)
        await writer.drain()
        writer.close()

    return answer


def _done(body: dict[str, Any], response_id: str) -> dict[str, Any]:
    return _response(response_id, [_message(f"msg_{response_id}", "Done.")])


def _bare(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("id", "status")}


def _not_recorded(directory: Path, caplog: pytest.LogCaptureFixture, why: str) -> None:
    assert not list(directory.glob("*.yaml"))
    said = [m for m in _logged(caplog) if "was not recorded" in m]
    assert any(why in m for m in said), said


# ---- a response an SDK raises on ----------------------------------------------------------------------


def _node_refuses(body: dict[str, Any], response_id: str) -> list[dict[str, Any]]:
    """[reasoning with no id, a call]: the Node SDK's stream raises ("expected a non-empty output
    item id"); the Python SDK's takes it."""
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}
    return _streamed(_response(response_id, [reasoning, _call("fc_1")]))


@pytest.mark.parametrize("strip", [False, True], ids=["ids-kept", "ids-stripped"])
def test_a_conversation_resending_a_response_an_sdk_raised_on_is_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, strip: bool
) -> None:
    directory = tmp_path / "recordings"
    with (
        caplog.at_level("INFO"),
        raw_upstream(_scripted(_node_refuses, _done)) as url,
        recorder(tmp_path, url, directory) as rec,
    ):
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        with sdk.responses.stream(model="gpt-test", input=items, tools=TOOLS, store=False) as events:  # type: ignore[arg-type]
            r1 = events.get_final_response()
        resent = [i.model_dump(exclude_none=True) for i in r1.output]
        items += [_bare(i) if strip else i for i in resent]
        items += [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        r2 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
        assert r2.output_text == "Done."
    _not_recorded(directory, caplog, "its response resp_up1 before the last one: an official SDK raises on its stream")


# ---- a message resent as the client reads it -----------------------------------------------------------


CUT = {  # r1's output, `incomplete`: its `output_text` is 'Part one. Part two.'
    "two-parts": [_message("msg_a", "Part one. ", "Part two.", status="incomplete")],
    "two-messages": [_message("msg_a", "Part one. "), _message("msg_b", "Part two.", status="incomplete")],
}


@pytest.mark.parametrize("output", list(CUT.values()), ids=list(CUT))
def test_an_unclean_message_resent_as_its_output_text_is_linked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, output: list[dict[str, Any]]
) -> None:
    directory = tmp_path / "recordings"

    def cut(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        return _response(response_id, output, **INCOMPLETE)

    with (
        caplog.at_level("INFO"),
        raw_upstream(_scripted(cut, _done)) as url,
        recorder(tmp_path, url, directory) as rec,
    ):
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, store=False)
        assert r1.output_text == "Part one. Part two."
        items.append({"role": "assistant", "content": r1.output_text})
        assert sdk.responses.create(model="gpt-test", input=items, store=False).output_text == "Done."
    _not_recorded(directory, caplog, "its response resp_up1 before the last one: its message at output.")


# ---- a program resent without its id ------------------------------------------------------------------


def test_a_program_resent_without_its_id_is_linked_by_its_call_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "recordings"
    program = {"type": "program", "id": "pg_1", "call_id": "prog_1", "code": "text('42')", "fingerprint": "fp"}

    def cut(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        return _response(response_id, [program], **INCOMPLETE)

    def result(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        output = {"type": "program_output", "id": "po_1", "call_id": "prog_1", "result": "42", "status": "completed"}
        return _response(response_id, [output, _message("msg_2", "The result is 42.")])

    tools = [{"type": "programmatic_tool_calling"}]
    with (
        caplog.at_level("INFO"),
        raw_upstream(_scripted(cut, result)) as url,
        recorder(tmp_path, url, directory) as rec,
    ):
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, tools=tools, store=False)  # type: ignore[arg-type]
        items += [_bare(i.model_dump(exclude_none=True)) for i in r1.output]
        r2 = sdk.responses.create(model="gpt-test", input=items, tools=tools, store=False)  # type: ignore[arg-type]
        assert r2.output_text == "The result is 42."
    _not_recorded(directory, caplog, "its response resp_up1 before the last one: it is 'incomplete'")


# ---- another conversation ------------------------------------------------------------------------------


def _other_conversation(sdk: Any, resend: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """A conversation of its own: a clean first response ([a message 'Done.', a call `call_1`]:
    the same text and call id an earlier `incomplete` response said), resent, then the answer."""
    items: list[Any] = [{"role": "user", "content": "another question"}]
    r1 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)
    items += [resend(i.model_dump(exclude_none=True)) for i in r1.output]
    items += [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
    assert sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False).output_text == "Fine."


def _easy(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") != "message":
        return _bare(item)
    return {"role": "assistant", "content": "".join(p["text"] for p in item["content"])}


@pytest.mark.parametrize("resend", [_bare, _easy], ids=["bare", "easy-message"])
def test_a_text_or_call_id_said_in_another_conversation_does_not_link(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resend: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """An earlier conversation's first response is `incomplete` and says 'Done.' and calls with
    `call_1` (an upstream may reuse call ids); another conversation's clean response says and calls
    the same, and that conversation is recorded. Before, it was refused, its log naming the other
    conversation's response."""
    directory = tmp_path / "recordings"

    def first(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        said = [_message(f"msg_{response_id}", "Done."), _call(f"fc_{response_id}")]
        unclean = "another question" not in json.dumps(body["input"])
        return _response(response_id, said, **(INCOMPLETE if unclean else {}))

    def fine(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        return _response(response_id, [_message(f"msg_{response_id}", "Fine.")])

    with (
        caplog.at_level("INFO"),
        raw_upstream(_scripted(first, first, fine)) as url,
        recorder(tmp_path, url, directory) as rec,
    ):
        sdk = _plain(rec)
        unclean = sdk.responses.create(model="gpt-test", input="no scenario matches this", tools=TOOLS, store=False)
        assert unclean.status == "incomplete"
        _other_conversation(sdk, resend)
    assert len(list(directory.glob("*.yaml"))) == 1, [m for m in _logged(caplog) if "was not recorded" in m]


@pytest.mark.parametrize("resend", [_bare, _easy], ids=["bare", "easy-message"])
def test_the_same_conversation_resent_after_an_unclean_response_is_still_linked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resend: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """The other direction: the conversation the `incomplete` response answered, resent without
    ids (the call by its call id, the message by its text), is not recorded."""
    directory = tmp_path / "recordings"

    def first(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        return _response(
            response_id, [_message(f"msg_{response_id}", "Done."), _call(f"fc_{response_id}")], **INCOMPLETE
        )

    def fine(body: dict[str, Any], response_id: str) -> dict[str, Any]:
        return _response(response_id, [_message(f"msg_{response_id}", "Fine.")])

    with (
        caplog.at_level("INFO"),
        raw_upstream(_scripted(first, fine)) as url,
        recorder(tmp_path, url, directory) as rec,
    ):
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "another question"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)
        items += [resend(i.model_dump(exclude_none=True)) for i in r1.output]
        items += [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        assert sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False).output_text == "Fine."
    _not_recorded(directory, caplog, "its response resp_up1 before the last one: it is 'incomplete'")


def test_a_socket_answer_the_client_raised_on_links_its_conversation_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Over the Responses WebSocket mode, an answer the client's socket session raises on (the Node
    lane: an item done at an output index that is no whole number) is noted as unclean too: before,
    the socket path returned without telling the tape, and the `store: false` conversation resending
    its call was recorded whole, the answer replayed as clean."""
    from websockets.sync.client import connect

    from tests.recording.test_record_hostile_upstream import ws_upstream

    first = _streamed(_response("resp_up1", [_call("fc_1")]))
    done = next(e for e in first if e["type"] == "response.output_item.done")
    done["output_index"] = 0.5
    second = _streamed(_done({}, "resp_up2"))
    answers = iter([first, second])

    async def answer(socket: Any) -> None:
        async for _ in socket:
            for event in next(answers):
                await socket.send(json.dumps(event))

    directory = tmp_path / "recordings"
    items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
    with caplog.at_level("INFO"), ws_upstream(answer) as url, recorder(tmp_path, url, directory) as rec:
        with connect(rec.server_url.replace("http", "ws", 1) + "/responses") as socket:
            create = {"type": "response.create", "model": "gpt-test", "tools": TOOLS, "store": False}
            socket.send(json.dumps({**create, "input": items}))
            got = [json.loads(socket.recv(timeout=60)) for _ in range(len(first))]
            items += [
                *got[-1]["response"]["output"],
                {"type": "function_call_output", "call_id": "call_1", "output": "{}"},
            ]
            socket.send(json.dumps({**create, "input": items}))
            got = [json.loads(socket.recv(timeout=60)) for _ in range(len(second))]
        assert got[-1]["response"]["output"][0]["content"][0]["text"] == "Done."
    _not_recorded(directory, caplog, "its response resp_up1 before the last one: an official SDK raises on its stream")
