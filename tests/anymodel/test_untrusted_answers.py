"""A model upstream is untrusted input: whatever it answers, the client gets a response with
something in it or an error in the OpenAI envelope that says what was wrong, never a 500, a cut
stream or a `completed` response with nothing in it.

Each malformed answer is sent by the fake upstream exactly as a server would send it (the fake's
own JSON for a good answer, changed in one place), through both protocols, whole and streamed,
to a client that asks for JSON and to one that streams (server-sent events, through the official
SDK). The byte budget is small here (`LIMIT`) so that an endless answer is refused quickly."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.sandbox import Limits
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    Answer,
    FakeUpstream,
    chat_chunks,
    chat_completion,
    fake_upstream,
    raw_body,
    raw_bytes,
    raw_call,
    raw_stream,
    responses_events,
    responses_object,
    say,
)

LIMIT = 256 * 1024
"""The servers' `model_upstream_max_answer_bytes` here."""

HUGE = 40 * 2**20
"""The answer the hostile round sent: 40 MB."""

DEEP = "[" * 100_000 + "]" * 100_000
"""Nested far past what Python's `json` takes (it recurses once a level)."""

PTC = {"type": "programmatic_tool_calling"}

Change = Callable[[Any], Any]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with fake_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def servers(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EmulatorServer]]:
    """An emulator for each protocol, both on the fake; no retries (each answer is asked once)."""
    made = {
        api: EmulatorServer(
            Settings(
                data_dir=tmp_path_factory.mktemp(f"untrusted-{api}"),
                pool_size=1,
                bundled_fixtures=False,
                limits=Limits(timeout_s=30.0),
                model_upstream=fake.url,
                model_upstream_api=api,
                model_upstream_retries=0,
                model_upstream_timeout_s=60.0,
                model_upstream_max_answer_bytes=LIMIT,
            )
        ).start()
        for api in ("chat", "responses")
    }
    yield made
    for server in made.values():
        server.stop()


# ---- the malformed answers ------------------------------------------------------------------------


def _whole(api: str, change: Change, answer: Answer | None = None) -> Answer:
    """The fake's whole answer for `answer` (a short text by default), changed by `change`."""
    answer = answer or say("Fine.")
    body = chat_completion(answer) if api == "chat" else responses_object(answer)
    return raw_body(json.dumps(change(body) or body))


def _streamed(api: str, change: Change, answer: Answer | None = None) -> Answer:
    """The fake's stream for `answer`, its list of chunks (events) changed by `change`."""
    answer = answer or say("Fine.")
    events = chat_chunks(answer) if api == "chat" else responses_events(answer)
    events = change(events) or events
    return raw_stream(*[e if isinstance(e, str) else json.dumps(e) for e in events])


def _done(events: list[Any]) -> list[Any]:
    return [*events, "[DONE]"]


def _set(path: str, value: Any) -> Change:
    """Set `value` at a dotted path (`choices.0.message`) of a JSON value."""

    def change(data: Any) -> Any:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is _DELETE:
            del node[last]
        else:
            node[last] = value
        return data

    return change


_DELETE = object()


def _each(kind: str, change: Change) -> Change:
    """`change` on every chunk, or every Responses event of type `kind`."""

    def each(events: list[Any]) -> list[Any]:
        return [change(e) if kind in ("*", e.get("type")) else e for e in events]

    return each


def _content_chunks(change: Change) -> Change:
    """`change` on every Chat Completions chunk that carries text."""

    def each(events: list[Any]) -> list[Any]:
        return [change(e) if e["choices"] and e["choices"][0]["delta"].get("content") else e for e in events]

    return each


@dataclass(frozen=True)
class Case:
    """One malformed answer: the fake's answer and what the client is told, by protocol and by
    whether the upstream answers whole."""

    name: str
    make: Callable[[str, bool], tuple[Answer, str]]
    """(api, whole) -> (the fake's answer, the end of the message after "The model upstream at <url> ")."""
    code: str = "upstream_error"


def _empty(api: str, whole: bool) -> tuple[Answer, str]:
    nothing = "answered neither text nor a tool call."
    if api == "chat" and whole:
        return _whole(api, _set("choices", [])), "answered no choices (`choices` is empty)."
    if api == "chat":

        def finish_alone(chunks: list[Any]) -> list[Any]:  # the chunk that finishes it, with no delta
            return _done(
                [c if c["choices"] and c["choices"][0]["finish_reason"] else {**c, "choices": []} for c in chunks]
            )

        return _streamed(api, finish_alone), nothing
    if whole:
        return _whole(api, _set("output", [])), nothing

    def created_and_completed(events: list[Any]) -> list[Any]:
        done = events[-1]
        return [events[0], {**done, "response": {**done["response"], "output": []}}]

    return _streamed(api, created_and_completed), nothing


def _no_message(api: str, whole: bool) -> tuple[Answer, str]:
    if api == "chat" and whole:
        shape = "answered a body of an unknown shape: `choices[0].message` is missing."
        return _whole(api, _set("choices.0.message", _DELETE)), shape
    if api == "chat":
        shape = "streamed a chunk of an unknown shape: `choices[0].delta` is missing."
        return _streamed(api, lambda chunks: _done([_set("choices.0.delta", None)(c) for c in chunks[:1]])), shape
    message = {"type": "message", "id": "msg_up", "role": "assistant", "status": "completed"}  # no `content`
    nothing = "answered neither text nor a tool call."
    if whole:
        return _whole(api, _set("output.0", message)), nothing

    def without_content(events: list[Any]) -> list[Any]:
        done = events[-1]
        added = {"type": "response.output_item.added", "output_index": 0, "item": message}
        return [
            events[0],
            added,
            {**added, "type": "response.output_item.done"},
            _set("response.output.0", message)(done),
        ]

    return _streamed(api, without_content), nothing


REFUSAL = "I can't help with that."


def _refusal(api: str, whole: bool) -> tuple[Answer, str]:
    """A refusal alone (Chat Completions' `refusal`, a Responses `refusal` part): said as one. It
    was said as an answer of "neither text nor a tool call", hiding why."""
    said = f"refused to answer: {REFUSAL}"
    if api == "chat" and whole:
        return _whole(api, _set("choices.0.message", {"role": "assistant", "content": None, "refusal": REFUSAL})), said
    if api == "chat":

        def refusing(chunk: Any) -> Any:
            return _set("choices.0.delta", {"refusal": chunk["choices"][0]["delta"]["content"]})(chunk)

        return _streamed(api, _content_chunks(refusing), say(REFUSAL)), said
    message = {
        "type": "message",
        "id": "msg_up",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": REFUSAL}],
    }
    if whole:
        return _whole(api, _set("output.0", message)), said

    def refused(events: list[Any]) -> list[Any]:
        done = events[-1]
        return [events[0], _set("response.output.0", message)(done)]

    return _streamed(api, refused), said


def _deep(api: str, whole: bool) -> tuple[Answer, str]:
    def deepened(data: Any) -> str:
        return json.dumps(data)[:-1] + ', "x": ' + DEEP + "}"

    if whole:
        answer = chat_completion(say("Fine.")) if api == "chat" else responses_object(say("Fine."))
        return raw_body(deepened(answer)), "answered a body nested deeper than 64 levels."
    if api == "chat":
        stream = _streamed(api, lambda chunks: _done([deepened(c) for c in chunks]))
        return stream, "streamed a chunk nested deeper than 64 levels."
    return _streamed(
        api, lambda events: [deepened(e) for e in events]
    ), "streamed an event nested deeper than 64 levels."


def _non_finite(shown: str) -> Callable[[str, bool], tuple[Answer, str]]:
    """A token count that is no JSON number (`Infinity`), or one beyond a double (`1e999`)."""
    said = (
        f"holding {shown}, which JSON does not have"
        if shown == "Infinity"
        else f"holding a number beyond a double's range ({shown})"
    )

    def make(api: str, whole: bool) -> tuple[Answer, str]:
        def counted(data: Any) -> str:
            text = json.dumps(data)
            return text.replace('"prompt_tokens": 11', f'"prompt_tokens": {shown}').replace(
                '"input_tokens": 11', f'"input_tokens": {shown}'
            )

        if whole:
            answer = chat_completion(say("Fine.")) if api == "chat" else responses_object(say("Fine."))
            return raw_body(counted(answer)), f"answered a body {said}."
        if api == "chat":
            return _streamed(api, lambda chunks: _done([counted(c) for c in chunks])), f"streamed a chunk {said}."
        return _streamed(api, lambda events: [counted(e) for e in events]), f"streamed an event {said}."

    return make


def _subject(api: str, whole: bool) -> str:
    return "answered a body" if whole else "streamed a chunk" if api == "chat" else "streamed an event"


def _surrogate(api: str, whole: bool) -> tuple[Answer, str]:
    said = f"{_subject(api, whole)} holding invalid Unicode (a lone surrogate)."
    text = say("Fine \ud800.")  # json.dumps escapes it: "Fine \\ud800."
    if whole:
        return _whole(api, lambda body: body, text), said
    return _streamed(api, lambda events: _done(events) if api == "chat" else events, text), said


def _not_utf8(api: str, whole: bool) -> tuple[Answer, str]:
    said = f"{_subject(api, whole)} that is not UTF-8."
    body = chat_completion(say("Fine \u00ff.")) if api == "chat" else responses_object(say("Fine \u00ff."))
    latin1 = json.dumps(body, ensure_ascii=False).encode("latin-1")  # \xff alone: no UTF-8
    if whole:
        return raw_body(latin1), said
    events = chat_chunks(say("Fine \u00ff.")) if api == "chat" else responses_events(say("Fine \u00ff."))
    lines = [b"data: " + json.dumps(e, ensure_ascii=False).encode("latin-1") + b"\n\n" for e in events]
    return raw_bytes(*lines, b"data: [DONE]\n\n"), said


def _wrong_type(api: str, whole: bool) -> tuple[Answer, str]:
    wrong = "is a number, not a string."
    if api == "chat" and whole:
        where = "choices[0].message.content"
        return _whole(
            api, _set("choices.0.message.content", 5)
        ), f"answered a body of an unknown shape: `{where}` {wrong}"
    if api == "chat":
        where = "choices[0].delta.content"
        change = _content_chunks(_set("choices.0.delta.content", 5))
        return _streamed(
            api, lambda chunks: _done(change(chunks))
        ), f"streamed a chunk of an unknown shape: `{where}` {wrong}"
    if whole:
        where = "output[0].content[0].text"
        return _whole(
            api, _set("output.0.content.0.text", 5)
        ), f"answered a body of an unknown shape: `{where}` {wrong}"
    change = _each("response.output_text.delta", _set("delta", 5))
    return _streamed(api, change), f"streamed an event of an unknown shape: `delta` {wrong}"


def _cut(api: str, whole: bool) -> tuple[Answer, str]:
    if whole:
        text = json.dumps(chat_completion(say("Fine.")) if api == "chat" else responses_object(say("Fine.")))
        return raw_body(text[: len(text) // 2]), "answered a body that is not JSON."
    if api == "chat":  # the text, then nothing: no finish_reason, no usage, no [DONE]
        return _streamed(api, lambda chunks: chunks[:2]), (
            "ended its stream before it finished (no `finish_reason`, no `[DONE]`)."
        )
    return _streamed(api, lambda events: events[:-1]), "ended its stream before the response was completed."


def _too_long(api: str, whole: bool) -> str:
    return f"{'answered' if whole else 'streamed'} more than {LIMIT} bytes (--model-upstream-max-answer-bytes)."


def _endless(api: str, whole: bool) -> tuple[Answer, str]:
    """An answer that never ends: a JSON string that never closes, or text chunks forever."""
    if whole:
        return raw_bytes(
            b'{"choices": [{"message": {"content": "', forever=b"x" * 4096, content_type="application/json"
        ), _too_long(api, whole)
    if api == "chat":
        chunk = {"choices": [{"index": 0, "delta": {"content": "more "}}]}
    else:
        chunk = {
            "type": "response.output_text.delta",
            "item_id": "msg_up",
            "output_index": 0,
            "content_index": 0,
            "delta": "more ",
        }
    return raw_bytes(forever=f"data: {json.dumps(chunk)}\n\n".encode() * 64), _too_long(api, whole)


def _huge(api: str, whole: bool) -> tuple[Answer, str]:
    """The 40 MB answer: one JSON string in a body, or one line of a stream that never breaks."""
    piece = b"x" * 2**16
    start = b'{"choices": [{"message": {"content": "' if whole else b'data: {"choices": [{"delta": {"content": "'
    kind = "application/json" if whole else "text/event-stream"
    return raw_bytes(start, *[piece] * (HUGE // len(piece)), b'"}}]}\n\n', content_type=kind), _too_long(api, whole)


def _arguments(arguments: str, said: str) -> Callable[[str, bool], tuple[Answer, str]]:
    def make(api: str, whole: bool) -> tuple[Answer, str]:
        return raw_call(CODE_TOOL, arguments), (f"called '{CODE_TOOL}' with arguments {said}: {arguments[:200]!r}.")

    return make


CASES = [
    Case("empty", _empty),
    Case("no_message", _no_message),
    Case("refusal", _refusal),
    Case("deep", _deep),
    Case("infinity", _non_finite("Infinity")),
    Case("beyond_a_double", _non_finite("1e999")),
    Case("lone_surrogate", _surrogate),
    Case("not_utf8", _not_utf8),
    Case("wrong_type", _wrong_type),
    Case("cut", _cut),
    Case("endless", _endless),
    Case("huge", _huge),
    Case(
        "deep_arguments",
        _arguments('{"code": "text(1)", "x": ' + DEEP[:5000] + DEEP[-5000:] + "}", "nested deeper than 64 levels"),
        "upstream_invalid_tool_call",
    ),
    Case(
        "surrogate_in_code",
        _arguments('{"code": "text(\\"\\ud800\\")"}', "holding invalid Unicode (a lone surrogate)"),
        "upstream_invalid_tool_call",
    ),
    Case(
        "infinity_in_arguments",
        _arguments('{"code": "text(1)", "n": Infinity}', "holding Infinity, which JSON does not have"),
        "upstream_invalid_tool_call",
    ),
]


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize("upstream_answers", ["whole", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_malformed_answer_is_an_error_that_says_what_is_wrong(
    case: Case, api: str, upstream_answers: str, client: str, fake: FakeUpstream, servers: dict[str, EmulatorServer]
) -> None:
    whole = upstream_answers == "whole"
    answer, tail = case.make(api, whole)
    _refused(answer, tail, case, api, whole, client, fake, servers)


def _refused(
    answer: Answer,
    tail: str,
    case: Case,
    api: str,
    whole: bool,
    client: str,
    fake: FakeUpstream,
    servers: dict[str, EmulatorServer],
) -> None:
    """`answer` from the fake is the 502 that ends with `tail`, to either client, never a response."""
    fake.script[:] = [answer]
    fake.streams = not whole  # the arguments' cases: the fake's own answer, whole or streamed
    prefix = f"The model upstream at {fake.url} " if case.code == "upstream_error" else "The model upstream "
    emulator = PTCEmulator(servers[api].base_url)
    try:
        with emulator.client(max_retries=0) as sdk:
            if client == "json":
                with pytest.raises(openai.APIStatusError) as raised:
                    sdk.responses.create(model="m", input="Go.", tools=[PTC])
                assert raised.value.status_code == 502
                assert raised.value.response.json() == {
                    "error": {"message": prefix + tail, "type": "server_error", "param": None, "code": case.code}
                }
            else:
                events = [
                    e.model_dump() for e in sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True)
                ]
                kinds = [e["type"] for e in events]
                assert kinds[:2] == ["response.created", "response.in_progress"]
                assert kinds[-1] == "error" and "response.completed" not in kinds  # an end, not a cut
                assert (events[-1]["code"], events[-1]["message"]) == (case.code, prefix + tail)
                assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert [e["status"] for e in emulator.journal] == [502]
        if case.name == "huge":  # refused as it came, not read whole first
            assert fake.sent < HUGE
    finally:
        fake.streams = True
        emulator.close()


# ---- an answer the upstream's token limit cut ------------------------------------------------------


FINISH_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}
"""Chat Completions' `finish_reason` for each `incomplete_details.reason`."""


def _cut_by_its_limit(api: str, whole: bool, reason: str = "max_output_tokens", item: bool = False) -> Answer:
    """The fake's answer to "Go." as an upstream sends it when its token limit (or its content
    filter: `reason`) cut the text; `item`: a Responses answer that says so only of its message
    item (`status: incomplete`), the response itself `completed`."""
    answer = say("The answer was cut sho")
    finish = FINISH_REASONS[reason]
    if api == "chat" and whole:
        return _whole(api, _set("choices.0.finish_reason", finish), answer)
    if api == "chat":
        return _streamed(
            api,
            _each(
                "*",
                lambda c: (
                    _set("choices.0.finish_reason", finish)(c)
                    if c["choices"] and c["choices"][0].get("finish_reason")
                    else c
                ),
            ),
            answer,
        )

    def incomplete(response: dict[str, Any]) -> dict[str, Any]:
        if item:
            output = [{**o, "status": "incomplete"} if o["type"] == "message" else o for o in response["output"]]
            return {**response, "output": output}
        return {**response, "status": "incomplete", "incomplete_details": {"reason": reason}}

    if whole:
        return _whole(api, incomplete, answer)

    def ended_incomplete(events: list[Any]) -> list[Any]:
        done = events[-1]
        kind = "response.completed" if item else "response.incomplete"
        return [*events[:-1], {**done, "type": kind, "response": incomplete(done["response"])}]

    return _streamed(api, ended_incomplete, answer)


CUTS = [
    ("chat", "max_output_tokens", False),
    ("responses", "max_output_tokens", False),
    ("chat", "content_filter", False),
    ("responses", "content_filter", False),
    ("responses", "max_output_tokens", True),
]


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize("upstream_answers", ["whole", "streamed"])
@pytest.mark.parametrize(
    ("api", "reason", "item"),
    CUTS,
    ids=["chat-length", "responses-length", "chat-content_filter", "responses-content_filter", "responses-item"],
)
def test_an_answer_the_upstreams_token_limit_cut_ends_the_response_incomplete(
    api: str,
    reason: str,
    item: bool,
    upstream_answers: str,
    client: str,
    fake: FakeUpstream,
    servers: dict[str, EmulatorServer],
) -> None:
    """Chat Completions' `finish_reason: "length"`, or a Responses answer `incomplete` for its
    `max_output_tokens`: the text is kept, and the response says it was cut, as the hosted API
    does. It was `completed`, as if the cut text were the whole answer. So it was for
    `finish_reason: "content_filter"` (which the hosted API says as `incomplete` for
    `content_filter`), and for a Responses answer `completed` whose message item is `incomplete`."""
    whole = upstream_answers == "whole"
    fake.script[:] = [_cut_by_its_limit(api, whole, reason, item)]
    fake.streams = not whole
    emulator = PTCEmulator(servers[api].base_url)
    try:
        with emulator.client(max_retries=0) as sdk:
            if client == "json":
                response = sdk.responses.create(model="m", input="Go.", tools=[PTC]).model_dump()
            else:
                events = [
                    e.model_dump() for e in sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True)
                ]
                assert events[-1]["type"] == "response.incomplete", [e["type"] for e in events]
                response = events[-1]["response"]
        assert response["status"] == "incomplete"
        assert response["incomplete_details"] == {"reason": reason}
        assert response["output"][-1]["content"][0]["text"] == "The answer was cut sho"
        assert response["output"][-1]["status"] == "incomplete"
    finally:
        fake.streams = True
        emulator.close()


# ---- an answer that does not say it finished -------------------------------------------------------


def _finished_with(reason: Any) -> Change:
    """Every chunk's `finish_reason` that is set, as `reason`."""
    return _each(
        "*",
        lambda c: (
            _set("choices.0.finish_reason", reason)(c) if c["choices"] and c["choices"][0]["finish_reason"] else c
        ),
    )


def _ended_with(status: Any) -> Change:
    """The `response.completed` event's response with this `status` (`_DELETE`: none)."""
    return _each("response.completed", _set("response.status", status))


UNFINISHED = [
    # (api, whole, the fake's answer, the end of the message)
    ("chat", True, _whole("chat", _set("choices.0.finish_reason", "banana")), "`finish_reason`: banana"),
    ("chat", False, _streamed("chat", lambda c: _finished_with("banana")(c)), "`finish_reason`: banana"),
    # the text and [DONE], but no chunk said the answer finished: a cut stream
    (
        "chat",
        False,
        _streamed("chat", lambda c: _done(_finished_with(None)(c))),
        "ended its stream without a `finish_reason` (the answer may have been cut short).",
    ),
    *[
        ("responses", True, _whole("responses", _set("status", status)), f"(status: {status}).")
        for status in ("cancelled", "in_progress", "queued")
    ],
    ("responses", True, _whole("responses", _set("status", _DELETE)), "(status: (none))."),
    *[
        ("responses", False, _streamed("responses", _ended_with(status)), f"(status: {status}).")
        for status in ("cancelled", "in_progress", "queued")
    ],
]


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize(
    ("api", "whole", "answer", "tail"),
    UNFINISHED,
    ids=[
        "chat-whole-banana",
        "chat-streamed-banana",
        "chat-streamed-no_finish_reason",
        "responses-whole-cancelled",
        "responses-whole-in_progress",
        "responses-whole-queued",
        "responses-whole-no_status",
        "responses-streamed-cancelled",
        "responses-streamed-in_progress",
        "responses-streamed-queued",
    ],
)
def test_an_answer_that_does_not_say_it_finished_is_an_error_naming_what_it_said(
    api: str,
    whole: bool,
    answer: Answer,
    tail: str,
    client: str,
    fake: FakeUpstream,
    servers: dict[str, EmulatorServer],
) -> None:
    """A `finish_reason` none of the documented ones, a stream whose chunks never give one, or a
    Responses answer whose status is not `completed`, `incomplete` or `failed`: each was a
    `completed` response (and a finished conversation for `--record`), as if the answer were
    whole. It is the 502 naming what the upstream said."""
    if "finish_reason`:" in tail:
        tail = f"answered with an unknown {tail}"
    elif tail.startswith("(status"):
        tail = f"answered a response that did not finish {tail}"
    _refused(answer, tail, Case("unfinished", lambda a, w: (answer, tail)), api, whole, client, fake, servers)


def _completed_with(path: str, value: Any, whole: bool) -> Answer:
    """A Responses answer `completed` with `value` at `path` of its response (whole: the body;
    streamed: `response.completed`'s response, the `output_item.done` events left as they were)."""
    if whole:
        return _whole("responses", _set(path, value), say("Hello"))
    return _streamed("responses", _each("response.completed", _set(f"response.{path}", value)), say("Hello"))


ITEM = "answered a response whose item {{at}}output[0] did not finish (status: {status})."
NOT_FINISHED = [
    ("output.0.status", "in_progress", ITEM.format(status="in_progress")),
    ("output.0.status", "failed", ITEM.format(status="failed")),
    ("output.0.status", "banana", ITEM.format(status="banana")),
    (
        "incomplete_details",
        "max_output_tokens",
        "answered a body of an unknown shape: `{at}incomplete_details` is a string, not an object.",
    ),
    (
        "incomplete_details",
        {"reason": 5},
        "answered a body of an unknown shape: `{at}incomplete_details.reason` is a number, not a string.",
    ),
    ("incomplete_details", {}, "answered a body of an unknown shape: `{at}incomplete_details.reason` is missing."),
]


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("path", "value", "tail"),
    NOT_FINISHED,
    ids=["item-in_progress", "item-failed", "item-banana", "details-string", "reason-number", "reason-missing"],
)
def test_a_completed_responses_answer_with_an_unfinished_item_or_odd_details_is_an_error(
    path: str,
    value: Any,
    tail: str,
    whole: bool,
    client: str,
    fake: FakeUpstream,
    servers: dict[str, EmulatorServer],
) -> None:
    """`status: completed` beside an output message item `in_progress` or `failed`, or beside
    `incomplete_details` of a shape not the protocol's (`"max_output_tokens"` as a bare string):
    each was a `completed` response, as if the answer were whole. It is the 502 naming the item
    and its status, or the path of the odd shape."""
    fake.streams = not whole
    at = "" if whole else "response."
    if not whole and tail.startswith("answered a body"):
        tail = tail.replace("answered a body", "streamed an event")
    tail = tail.format(at=at)
    case = Case("unfinished_item", lambda a, w: (_completed_with(path, value, whole), tail))
    _refused(_completed_with(path, value, whole), tail, case, "responses", whole, client, fake, servers)


# ---- an answer that contradicts itself about how it ended -------------------------------------------


def _two_reasons(first: str, second: str) -> Answer:
    """A stream whose choice 0 gives `first` with its text, then `second` with nothing, then `[DONE]`."""
    return raw_stream(
        json.dumps({"choices": [{"index": 0, "delta": {"content": "Hello cut"}, "finish_reason": first}]}),
        json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": second}]}),
        "[DONE]",
    )


def _said(answer: Answer, client: str, fake: FakeUpstream, servers: dict[str, EmulatorServer], api: str) -> Any:
    """The response the client gets for the fake's `answer` (streamed: the last event's)."""
    fake.script[:] = [answer]
    emulator = PTCEmulator(servers[api].base_url)
    try:
        with emulator.client(max_retries=0) as sdk:
            if client == "json":
                return sdk.responses.create(model="m", input="Go.", tools=[PTC]).model_dump()
            events = [e.model_dump() for e in sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True)]
            assert events[-1]["type"] in ("response.completed", "response.incomplete")
            assert events[-1]["type"] == f"response.{events[-1]['response']['status']}"
            return events[-1]["response"]
    finally:
        emulator.close()


@pytest.mark.parametrize("client", ["json", "sse"])
def test_a_stream_that_gives_two_different_finish_reasons_is_an_error_saying_so(
    client: str, fake: FakeUpstream, servers: dict[str, EmulatorServer]
) -> None:
    """`length` with the text, then `stop` alone, then `[DONE]`: the last one was kept and the
    response ended `completed`, the cut text taken as the whole answer. Which one is true is not
    known, so it is the 502 saying what the upstream said."""
    tail = (
        "answered two different `finish_reason`s for one choice: length, then stop"
        " (the answer may have been cut short)."
    )
    case = Case("two_reasons", lambda a, w: (_two_reasons("length", "stop"), tail))
    _refused(_two_reasons("length", "stop"), tail, case, "chat", False, client, fake, servers)


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize(("reason", "status"), [("stop", "completed"), ("length", "incomplete")])
def test_a_stream_that_gives_the_same_finish_reason_twice_is_taken(
    reason: str, status: str, client: str, fake: FakeUpstream, servers: dict[str, EmulatorServer]
) -> None:
    response = _said(_two_reasons(reason, reason), client, fake, servers, "chat")
    assert response["status"] == status
    assert response["output"][-1]["content"][0]["text"] == "Hello cut"


def _completed_but(sign: str, whole: bool) -> Answer:
    """A Responses answer `completed` with one sign of a cut: `details` (an `incomplete_details.reason`
    beside it) or `item` (streamed: its message's `output_item.done` says `incomplete`, the
    `response.completed` output says `completed`)."""
    answer = say("Hello cut")
    if whole:
        return _whole("responses", _set("incomplete_details", {"reason": "max_output_tokens"}), answer)
    if sign == "details":
        return _streamed(
            "responses",
            _each("response.completed", _set("response.incomplete_details", {"reason": "max_output_tokens"})),
            answer,
        )

    def item_cut(events: list[Any]) -> list[Any]:
        return [
            _set("item.status", "incomplete")(e)
            if e.get("type") == "response.output_item.done" and e["item"]["type"] == "message"
            else e
            for e in events
        ]

    return _streamed("responses", item_cut, answer)


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize(("sign", "whole"), [("details", True), ("details", False), ("item", False)])
def test_a_completed_responses_answer_with_any_sign_of_a_cut_ends_incomplete(
    sign: str, whole: bool, client: str, fake: FakeUpstream, servers: dict[str, EmulatorServer]
) -> None:
    """`status: completed` beside an `incomplete_details.reason`, or a message item the stream's
    `output_item.done` said was `incomplete` and `response.completed` says `completed`: both
    ended `completed`. Any sign of a cut wins (docs/any-model.md): the response is incomplete."""
    fake.streams = not whole
    try:
        response = _said(_completed_but(sign, whole), client, fake, servers, "responses")
    finally:
        fake.streams = True
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][-1]["content"][0]["text"] == "Hello cut"
