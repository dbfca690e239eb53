"""How a model upstream's answer begins: a UTF-8 byte order mark before its first event (skipped,
as an event-stream decoder skips it), and a whole JSON answer sent under a type the emulator
reads as a stream (`text/plain`, none at all), which is named with its status and type."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    FakeUpstream,
    chat_completion,
    fake_upstream,
    raw_body,
    raw_bytes,
    responses_events,
    responses_object,
    say,
)

BOM = "\ufeff".encode()


def _chat_event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(body)}\n\n".encode()


def _with_bom(api: str, split: bool) -> list[bytes]:
    """'Hello world' streamed, the stream's first bytes a byte order mark (`split`: its bytes in
    two chunks); Chat Completions without the role chunk, so the first event is text."""
    if api == "chat":
        events = [_chat_event({"content": "Hello "}), _chat_event({"content": "world"}), _chat_event({}, "stop")]
        events.append(b"data: [DONE]\n\n")
    else:
        events = [f"data: {json.dumps(e)}\n\n".encode() for e in responses_events(say("Hello world"))]
    if split:
        return [BOM[:1], BOM[1:] + events[0], *events[1:]]
    return [BOM + events[0], *events[1:]]


def _text(sdk: openai.OpenAI, streamed: bool) -> str:
    if not streamed:
        return sdk.responses.create(model="m", input="Go.").output_text
    with sdk.responses.stream(model="m", input="Go.") as stream:
        for _ in stream:
            pass
        return stream.get_final_response().output_text


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_byte_order_mark_before_the_first_event_is_skipped(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, api: str, streamed: bool, split: bool
) -> None:
    """Before, the mark made the first line's field `\\ufeffdata`, not `data`: the first chunk
    ("Hello ") was dropped and the response was `completed` with 'world'."""
    emulator = PTCEmulator(any_server(model_upstream_api=api).base_url)
    upstream.reply(raw_bytes(*_with_bom(api, split)))
    with emulator.client(max_retries=0) as sdk:
        assert _text(sdk, streamed) == "Hello world"
    emulator.close()


def test_a_byte_order_mark_before_the_first_event_is_recorded_whole(
    make_server: Callable[..., EmulatorServer], tmp_path: Path
) -> None:
    recordings = tmp_path / "recordings"
    with fake_upstream() as upstream:
        upstream.reply(raw_bytes(*_with_bom("chat", split=False)))
        live = make_server(model_upstream=upstream.url, record_dir=recordings)
        emulator = PTCEmulator(live.base_url)
        with emulator.client(max_retries=0) as sdk:
            assert sdk.responses.create(model="m", input="Go.").output_text == "Hello world"
        emulator.close()
        live.stop()
    [recording] = recordings.glob("*.yaml")
    assert "Hello world" in recording.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["text/plain; charset=utf-8", "", "text/event-stream; charset=utf-8"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_whole_json_answer_under_a_stream_type_is_named_with_its_status_and_type(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, api: str, kind: str
) -> None:
    """Before, it was read as a stream with no events in it: "ended its stream before it
    finished", the wrong reason. As docs/any-model.md says, it is named with its status and type."""
    body = chat_completion(say("Hello world")) if api == "chat" else responses_object(say("Hello world"))
    upstream.reply(raw_body("\n " + json.dumps(body), content_type=kind))
    emulator = PTCEmulator(any_server(model_upstream_api=api).base_url)
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.")
    emulator.close()
    assert raised.value.status_code == 502
    labelled = f"Content-Type {kind!r}" if kind else "no Content-Type"
    assert raised.value.response.json()["error"]["message"] == (
        f"The model upstream at {upstream.url} answered 200 with {labelled} a body that is JSON, not server-sent "
        "events (a streamed answer is read as events unless its Content-Type is JSON's)."
    )
    assert len(upstream.requests) == 1


_JUNK = {
    "utf16_mark": (b"\xff\xfe", "that is not UTF-8"),
    "stray_byte": (b"\xc3", "that is not UTF-8"),
    "no_break_space": ("\u00a0".encode(), "'\\xa0data'"),
    "capital": (b"D", "'Data'"),
    "mark_on_a_later_line": (BOM, "'\\ufeffdata'"),
}


@pytest.mark.parametrize("where", ["first", "second"])
@pytest.mark.parametrize("junk", sorted(_JUNK))
@pytest.mark.parametrize("streamed", [False, True])
def test_a_data_line_with_junk_before_its_field_is_the_502_not_dropped(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, junk: str, streamed: bool, where: str
) -> None:
    """Before, a line whose field was not exactly `data` was skipped without a word: the stream
    ended `completed` without that chunk ('world' for 'Hello world'). A line not UTF-8 is the 502
    docs/any-model.md promises; a line of a field the event-stream format does not know is the 502
    naming it."""
    prefix, said = _JUNK[junk]
    events = [_chat_event({"content": "Hello "}), _chat_event({"content": "world"}), _chat_event({}, "stop")]
    events.append(b"data: [DONE]\n\n")
    if junk == "capital":
        events[where == "second"] = b"D" + events[where == "second"][1:]
    else:
        events[where == "second"] = prefix + events[where == "second"]
    if junk == "mark_on_a_later_line" and where == "first":
        events.insert(0, b": a comment first\n\n")
    upstream.reply(raw_bytes(*events))
    emulator = PTCEmulator(any_server(model_upstream_api="chat").base_url)
    with emulator.client(max_retries=0) as sdk:
        if streamed:
            events = [e.model_dump() for e in sdk.responses.create(model="m", input="Go.", stream=True)]
            assert events[-1]["type"] == "error" and "response.completed" not in [e["type"] for e in events]
            message = events[-1]["message"]
        else:
            with pytest.raises(openai.APIStatusError) as raised:
                sdk.responses.create(model="m", input="Go.")
            assert raised.value.status_code == 502
            message = raised.value.response.json()["error"]["message"]
        assert [e["status"] for e in emulator.journal] == [502]
    emulator.close()
    if said.startswith("'"):
        assert message == (
            f"The model upstream at {upstream.url} streamed a line whose field {said} is none of server-sent "
            "events' (data, event, id, retry, or ':' for a comment); it is not skipped, as a line left unread "
            "may hold the answer."
        )
    else:
        assert message == f"The model upstream at {upstream.url} streamed a line that is not UTF-8."


def test_the_other_fields_and_comments_of_an_event_stream_are_read_past(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    events = [b": keep-alive\r\nid: 1\r\nretry: 100\r\nevent: chunk\r\n" + _chat_event({"content": "Hello "})]
    events += [b"event\n" + _chat_event({"content": "world"}), _chat_event({}, "stop"), b"data: [DONE]\n\n"]
    upstream.reply(raw_bytes(*events))
    emulator = PTCEmulator(any_server(model_upstream_api="chat").base_url)
    with emulator.client(max_retries=0) as sdk:
        assert _text(sdk, True) == "Hello world"
    emulator.close()


def _disagreeing(case: str) -> list[bytes]:
    """A Responses stream whose deltas are not its final text: 'streamed words' then a final
    'different words', or a delta at an output the final response does not hold."""
    events = responses_events(say("different words" if case == "other_words" else "Hello "))
    deltas = [n for n, e in enumerate(events) if e["type"] == "response.output_text.delta"]
    if case == "other_words":
        pieces = [dict(events[deltas[0]], delta="streamed word"), dict(events[deltas[0]], delta="s")]
    else:
        ghost = dict(events[deltas[0]], output_index=3, item_id="m9", delta="GHOST")
        pieces = [*(events[n] for n in deltas), ghost]
    events = [e for n, e in enumerate(events) if n not in deltas]
    events[deltas[0] : deltas[0]] = pieces
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events]


@pytest.mark.parametrize("case", ["other_words", "other_output"])
def test_responses_deltas_that_do_not_add_up_to_the_final_text_are_an_error(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, case: str
) -> None:
    """Before, the client was shown the deltas' text ('streamed words', 'Hello GHOST') and the
    response completed with another ('different words', 'Hello '), without a word."""
    upstream.reply(raw_bytes(*_disagreeing(case)))
    emulator = PTCEmulator(any_server(model_upstream_api="responses").base_url)
    with emulator.client(max_retries=0) as sdk:
        events = [e.model_dump() for e in sdk.responses.create(model="m", input="Go.", stream=True)]
        assert [e["status"] for e in emulator.journal] == [502]
    emulator.close()
    assert "response.completed" not in [e["type"] for e in events]
    told, final = (14, 15) if case == "other_words" else (11, 6)
    assert events[-1]["type"] == "error" and events[-1]["message"] == (
        f"The model upstream at {upstream.url} streamed text deltas ({told} characters) that do not add up to "
        f"its final response's text ({final} characters): the text streamed is not the answer."
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_key_shorter_than_eight_characters_leaves_the_models_words_alone(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    """Before, a local server's dummy key (`lo`, `EMPTY`, `ollama`) was taken out wherever it
    matched: 'hello there' came back 'hel[redacted] there'. Shorter than 8 characters, it is no
    secret, and `serve` says at start that it is not redacted."""
    monkeypatch.setenv("SHORT_UPSTREAM_KEY", "lo")
    upstream.reply(say("hello there, lookup lo"), say("hello again"))
    emulator = PTCEmulator(any_server(model_upstream_api_key_env="SHORT_UPSTREAM_KEY", model_upstream_api=api).base_url)
    with emulator.client(max_retries=0) as sdk:
        assert sdk.responses.create(model="m", input="Go.").output_text == "hello there, lookup lo"
        assert _text(sdk, True) == "hello again"
    emulator.close()
    assert [h.get("authorization") for h in upstream.headers] == ["Bearer lo"] * 2


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("said", [["a", "b/c"], {"nested": "ü"}])
def test_a_mid_stream_failure_whose_message_is_not_a_string_is_quoted_as_json(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, api: str, said: Any
) -> None:
    """Before, a list or an object was quoted as Python writes it (`['a', 'b/c']`)."""
    if api == "chat":
        failure = {"error": {"message": said}}
    else:
        failure = {"type": "error", "message": said}
    upstream.reply(raw_bytes(f"data: {json.dumps(failure)}\n\n".encode()))
    emulator = PTCEmulator(any_server(model_upstream_api=api).base_url)
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.")
    emulator.close()
    assert raised.value.response.json()["error"]["message"] == (
        f"The model upstream at {upstream.url} failed mid-stream: {json.dumps(said, ensure_ascii=False)}"
    )
