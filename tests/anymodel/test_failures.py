"""What the user sees when the model upstream fails or gets something wrong: an error in the
OpenAI envelope (never a 500, never a hang), or, for code that does not parse, a program that ends
`incomplete` with the syntax error (which goes back to the upstream like any result)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.anymodel.anymodel_support import (
    CODE_TOOL,
    FakeUpstream,
    call,
    echo,
    fail,
    hold,
    program,
    raw_body,
    raw_call,
    raw_stream,
    say,
    stall,
    streamed,
)

PTC = {"type": "programmatic_tool_calling"}


def _error(any_server: Callable[..., EmulatorServer], **options: Any) -> openai.APIStatusError:
    emulator = PTCEmulator(any_server(**options).base_url)
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.", tools=[PTC])
    emulator.close()
    return raised.value


def _envelope(error: openai.APIStatusError) -> dict[str, Any]:
    body = error.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_a_code_call_without_code(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    upstream.reply(raw_call(CODE_TOOL, '{"program": "text(1)"}'))
    error = _error(any_server)
    assert error.status_code == 502
    envelope = _envelope(error)
    assert envelope["code"] == "upstream_invalid_tool_call" and envelope["type"] == "server_error"
    assert envelope["message"] == (
        'The model upstream called run_javascript without a `code` argument (a string): \'{"program": "text(1)"}\'.'
    )


def test_code_that_does_not_parse_is_an_incomplete_program(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(program("const = ;"), echo("The program failed: "))
    response = sdk.responses.create(model="m", input="Go.", tools=[PTC])
    assert [i.type for i in response.output] == ["program", "program_output", "message"]
    output = response.output[1]
    assert output.status == "incomplete" and "SyntaxError" in output.result
    assert response.output_text.startswith("The program failed: The program ended incomplete: ")
    assert "SyntaxError" in upstream.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (["not json", "[DONE]"], "streamed a chunk that is not JSON"),
        (["[1, 2]", "[DONE]"], "streamed a chunk of an unknown shape: `(the chunk)` is a list, not an object"),
        (
            ['{"choices": [{"delta": {"tool_calls": "many"}}]}', "[DONE]"],
            "streamed a chunk of an unknown shape: `choices[0].delta.tool_calls` is a string, not a list",
        ),
    ],
)
def test_a_malformed_stream(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, lines: list[str], says: str
) -> None:
    upstream.reply(raw_stream(*lines))
    error = _error(any_server)
    assert error.status_code == 502
    assert _envelope(error)["message"] == f"The model upstream at {upstream.url} {says}."


def test_an_unknown_tool_name(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    upstream.reply(call("delete_everything", really=True))
    error = _error(any_server)
    assert error.status_code == 502
    assert _envelope(error)["message"] == (
        "The model upstream called a function this request does not offer: 'delete_everything' "
        "(offered: run_javascript)."
    )


def test_an_upstream_500_is_retried_a_bounded_number_of_times(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    upstream.reply(fail(500), fail(500), fail(500), say("never reached"))
    error = _error(any_server, model_upstream_retries=2)
    assert error.status_code == 502
    envelope = _envelope(error)
    assert envelope["code"] == "upstream_error"
    assert envelope["message"].startswith(f"The model upstream at {upstream.url}/chat/completions answered 500: ")
    assert "upstream exploded" in envelope["message"]
    assert len(upstream.requests) == 3


def test_a_passing_500_is_retried(sdk: openai.OpenAI, upstream: FakeUpstream) -> None:
    upstream.reply(fail(503), say("Fine now."))
    assert sdk.responses.create(model="m", input="Go.", tools=[PTC]).output_text == "Fine now."
    assert len(upstream.requests) == 2


def test_an_upstream_400_is_not_retried(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    upstream.reply(fail(400, "model 'm' not found"), say("never reached"))
    error = _error(any_server)
    assert error.status_code == 502 and "answered 400" in _envelope(error)["message"]
    assert len(upstream.requests) == 1


def test_a_compressed_error_body_is_not_unpacked(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    """A 500 whose body is a gzip bomb: its start was unpacked (64 KiB read are 64 MiB unpacked)
    and quoted, NULs and all. It is named, not read."""
    upstream.reply(raw_body(gzip.compress(b"\0" * 2**24), code=500, **{"content-encoding": "gzip"}))
    envelope = _envelope(_error(any_server, model_upstream_retries=0))
    assert envelope["message"] == (
        f"The model upstream at {upstream.url}/chat/completions answered 500: "
        "answered with Content-Encoding 'gzip' although asked for none."
    )


def test_an_html_page_is_named_as_such(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    """An upstream URL that answers a web page (200, text/html: a login page, a proxy's, a wrong
    path's) was read as a stream with no events in it: "ended its stream before it finished", the
    wrong reason. It is now the 502 naming the status and the content type, read no further."""
    page = "<!doctype html><html><head><title>Sign in</title></head><body>Sign in</body></html>"
    upstream.reply(raw_body(page, content_type="text/html; charset=utf-8"))
    error = _error(any_server)
    assert error.status_code == 502
    envelope = _envelope(error)
    assert envelope["message"] == (
        f"The model upstream at {upstream.url} answered 200 with Content-Type 'text/html; charset=utf-8', "
        "not JSON or server-sent events."
    )
    assert envelope["type"] == "server_error" and envelope["code"] == "upstream_error"
    assert len(upstream.requests) == 1  # not retried: the same page would come again


def test_a_redirect_is_an_answered_status(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    """Not followed, and not read as an empty answer (`ended its stream before it finished`)."""
    upstream.reply(raw_body("", code=302, location="http://elsewhere.example/v1/chat/completions"))
    error = _error(any_server)
    assert error.status_code == 502
    assert _envelope(error)["message"].startswith(f"The model upstream at {upstream.url}/chat/completions answered 302")
    assert len(upstream.requests) == 1


def test_a_timeout(any_server: Callable[..., EmulatorServer], upstream: FakeUpstream) -> None:
    """The fake holds the request until the test ends; the emulator's upstream timeout is short."""
    upstream.reply(hold())
    error = _error(any_server, model_upstream_timeout_s=0.5, model_upstream_retries=0)
    assert error.status_code == 504
    envelope = _envelope(error)
    assert envelope["code"] == "upstream_timeout"
    assert envelope["message"] == f"The model upstream at {upstream.url} did not answer within 0.5 s."


def test_a_stream_that_stalls_after_its_first_chunk(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    upstream.reply(stall(), stall())
    error = _error(any_server, model_upstream_timeout_s=0.5, model_upstream_retries=1)
    assert error.status_code == 504 and _envelope(error)["code"] == "upstream_timeout"
    assert len(upstream.requests) == 2  # retried once


def test_an_unreachable_upstream(make_server: Callable[..., EmulatorServer]) -> None:
    import socket

    with socket.socket() as held:  # bound, never listening: nothing answers on it meanwhile
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        emulator = PTCEmulator(make_server(model_upstream=url, model_upstream_retries=1, pool_size=1).base_url)
        with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
            sdk.responses.create(model="m", input="Go.", tools=[PTC])
        emulator.close()
    assert raised.value.status_code == 502
    assert _envelope(raised.value)["message"] == (
        f"The model upstream at {url}/chat/completions could not be reached (ConnectError)."
    )


KEY = "sk-upstream-secret-4f9c2e"


def test_the_upstream_key_reaches_only_the_upstream(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    caplog.set_level("DEBUG")
    server = any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY")
    emulator = PTCEmulator(server.base_url)
    upstream.reply(program("text('k=' + typeof process)"), echo(), *[fail(500, f"bad key {KEY}")] * 3)
    with emulator.client(max_retries=0) as sdk:
        response = sdk.responses.create(model="m", input="Go.", tools=[PTC])
        with pytest.raises(openai.APIStatusError) as raised:
            sdk.responses.create(model="m", input="Again.", tools=[PTC], previous_response_id=response.id)
        seen = [json.dumps(r.model_dump()) for r in (response, sdk.responses.retrieve(response.id))]
    assert [h.get("authorization") for h in upstream.headers] == [f"Bearer {KEY}"] * 5
    seen.append(json.dumps(emulator.journal))
    assert "bad key [redacted]" in raised.value.response.text
    seen.append(raised.value.response.text)
    seen.append(emulator.admin.get("/ui/").text)
    seen.append(caplog.text)
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    assert all(KEY not in text for text in seen)
    assert response.output_text == "k=undefined"
    emulator.close()


@pytest.mark.parametrize("client", ["json", "sse"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_upstream_key_in_a_mid_stream_failure_or_its_text_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    api: str,
    client: str,
) -> None:
    """An upstream that echoes the key in a mid-stream failure (the hostile round's finding: the
    502 and the INFO log carried it), and one that streams it in its text, split across chunks."""
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    caplog.set_level("DEBUG")
    server = any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY", model_upstream_api=api)
    emulator = PTCEmulator(server.base_url)
    half = len(KEY) // 2
    if api == "chat":
        failure = json.dumps({"error": {"message": f"bad key {KEY}"}})
        pieces = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in ("k=", KEY[:half], KEY[half:])]
        text = raw_stream(
            *map(json.dumps, pieces),
            json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            "[DONE]",
        )
    else:
        failure = json.dumps({"type": "error", "error": {"message": f"bad key {KEY}"}})
        deltas = [{"type": "response.output_text.delta", "delta": text} for text in ("k=", KEY[:half], KEY[half:])]
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"k={KEY}"}]}
        done = {"type": "response.completed", "response": {"status": "completed", "output": [message]}}
        text = raw_stream(*map(json.dumps, [*deltas, done]))
    upstream.reply(raw_stream(failure), text)
    seen: list[str] = []
    with emulator.client(max_retries=0) as sdk:
        for _ in range(2):
            if client == "json":
                try:
                    seen.append(json.dumps(sdk.responses.create(model="m", input="Go.", tools=[PTC]).model_dump()))
                except openai.APIStatusError as e:
                    assert e.status_code == 502
                    seen.append(e.response.text)
            else:
                events = sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True)
                seen.append(json.dumps([e.model_dump() for e in events]))
    assert "bad key [redacted]" in seen[0]
    assert "k=[redacted]" in seen[1]
    seen.append(json.dumps(emulator.journal))
    seen.append(caplog.text)
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    assert all(KEY not in text for text in seen)
    emulator.close()


@pytest.mark.parametrize("client", ["json", "sse"])
def test_the_upstream_key_written_with_json_escapes_in_a_call_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    client: str,
) -> None:
    """The key written as `\\u0073\\u006b...` inside a call's arguments: before, redaction looked
    at the raw argument text only, so the decoded key reached the program's code, its output, the
    SSE events, the store, the journal and the recording."""
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    caplog.set_level("DEBUG")
    recordings = tmp_path / "recordings"
    data = tmp_path / "escaped-data"
    server = any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY", record_dir=recordings, data_dir=data)
    emulator = PTCEmulator(server.base_url)
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
    upstream.reply(raw_call(CODE_TOOL, '{"code": "text(\\"k=' + escaped + '\\")"}'), echo("said "))
    seen: list[str] = []
    with emulator.client(max_retries=0) as sdk:
        if client == "json":
            response = sdk.responses.create(model="m", input="Go.", tools=[PTC])
        else:
            events = list(sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True))
            seen.append(json.dumps([e.model_dump() for e in events]))
            response = next(e.response for e in events if e.type == "response.completed")
        seen += [json.dumps(r.model_dump()) for r in (response, sdk.responses.retrieve(response.id))]
    assert response.output_text == "said k=[redacted]"
    seen.append(json.dumps(emulator.journal))
    seen.append(caplog.text)
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    server.stop()
    recorded = list(recordings.glob("*.yaml"))
    assert recorded
    seen += [p.read_text(encoding="utf-8") for p in recorded]
    seen += [p.read_bytes().decode("latin-1") for p in data.rglob("*") if p.is_file()]
    assert all(KEY not in text for text in seen)
    emulator.close()


def test_the_upstream_key_written_with_json_escapes_in_an_error_body_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A 400 whose body writes the key with `\\u` escapes (some characters plain, hex in both
    cases): before, its start was quoted verbatim in the 502's message, the log and the journal
    (the plain key only was replaced), and the client's JSON parser decoded it to the key."""
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    caplog.set_level("DEBUG")
    emulator = PTCEmulator(any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY").base_url)
    escaped = "".join(c if i % 3 == 2 else f"\\u{ord(c):04{'X' if i % 2 else 'x'}}" for i, c in enumerate(KEY))
    upstream.reply(raw_body(('{"error":{"message":"bad key ' + escaped + '"}}').encode(), code=400))
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.", tools=[PTC])
    assert raised.value.status_code == 502
    message = _envelope(raised.value)["message"]
    assert "answered 400" in message and "[redacted]" in message
    seen = [message, raised.value.response.text, json.dumps(emulator.journal), caplog.text]
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    assert all(KEY not in text and escaped not in text and escaped.lower() not in text for text in seen)
    emulator.close()


def test_an_upstream_that_never_stops_running_programs(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream
) -> None:
    """Each program ends and the upstream writes another: one response takes at most MAX_TURNS."""
    upstream.reply(*[program("text('again')")] * 17)
    error = _error(any_server)
    assert error.status_code == 502
    envelope = _envelope(error)
    assert envelope["code"] == "upstream_invalid_tool_call"
    assert envelope["message"] == "The model upstream took more than 16 turns in one response."


SLASHED = "sk-h48f/SeCrEt+k3y9"
"""A key with a `/`, which JSON may write as `\\/`."""


@pytest.mark.parametrize("form", ["slash", "content-type"])
def test_the_upstream_key_in_other_escapes_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    form: str,
) -> None:
    """Before, an error body writing the key's `/` as JSON's `\\/` escape was quoted as it came
    (the 502's message, the log, the journal: only `\\u` escapes were looked for), and a
    Content-Type holding the key in `\\u` escapes was quoted through repr (`\\\\u0073...`), which
    the redaction did not find. Now every JSON escape of each character is looked for, and the
    Content-Type is redacted before it is quoted."""
    monkeypatch.setenv("ANY48_UPSTREAM_KEY", SLASHED)
    caplog.set_level("DEBUG", logger="ptc_emulator")  # httpcore's own trace shows the headers
    emulator = PTCEmulator(any_server(model_upstream_api_key_env="ANY48_UPSTREAM_KEY").base_url)
    escaped = "".join(f"\\u{ord(c):04x}" for c in SLASHED)
    if form == "slash":
        shown = SLASHED.replace("/", "\\/")
        upstream.reply(raw_body(('{"error":{"message":"echo ' + shown + '"}}').encode(), code=400))
    else:
        shown = escaped
        upstream.reply(raw_body("<p>x</p>", content_type=f"text/html; x={escaped}"))
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.", tools=[PTC])
    assert raised.value.status_code == 502
    message = _envelope(raised.value)["message"]
    assert "[redacted]" in message
    seen = [message, raised.value.response.text, json.dumps(emulator.journal), caplog.text]
    for text in seen:
        assert SLASHED not in text and shown not in text and shown.replace("\\", "\\\\") not in text
        assert json.dumps(SLASHED)[1:-1] not in text and escaped[:12] not in text.replace("\\\\", "\\")
    emulator.close()


@pytest.mark.parametrize("client", ["json", "sse"])
def test_the_upstream_key_escaped_twice_in_a_call_is_refused_and_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    client: str,
) -> None:
    """The key written as `\\u005cu0073...` inside a call's arguments: JSON decodes that to
    `\\u0073...`, which a program's string literal (or an app decoding the argument again) turns
    into the key. Before, redaction decoded the arguments once, found no key and passed the call
    on: the program printed the key. Now such a call is the 502, and the key reaches no one."""
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    caplog.set_level("DEBUG")
    recordings = tmp_path / "recordings"
    data = tmp_path / "nested-data"
    server = any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY", record_dir=recordings, data_dir=data)
    emulator = PTCEmulator(server.base_url)
    nested = "".join(f"\\u005cu{ord(c):04x}" for c in KEY)
    upstream.reply(raw_call(CODE_TOOL, '{"code": "text(\\"k=' + nested + '\\")"}'), echo("said "))
    seen: list[str] = []
    with emulator.client(max_retries=0) as sdk:
        if client == "json":
            with pytest.raises(openai.APIStatusError) as caught:
                sdk.responses.create(model="m", input="Go.", tools=[PTC])
            assert caught.value.status_code == 502
            seen.append(caught.value.response.text)
            message = caught.value.response.json()["error"]["message"]
        else:
            events = list(sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True))
            seen.append(json.dumps([e.model_dump() for e in events]))
            failed = next(e for e in events if e.type in ("response.failed", "error"))
            message = json.dumps(failed.model_dump())
    assert "whose arguments hold the upstream's key" in message, message
    seen.append(json.dumps(emulator.journal))
    seen.append(caplog.text)
    captured = capfd.readouterr()
    seen += [captured.out, captured.err]
    server.stop()
    seen += [p.read_text(encoding="utf-8") for p in recordings.glob("*.yaml")]
    seen += [p.read_bytes().decode("latin-1") for p in data.rglob("*") if p.is_file()]
    assert all(KEY not in text for text in seen)
    emulator.close()


ESCAPED_KEY = "sk-test-SECRETKEY123"


@pytest.mark.parametrize("split", ["\\u00", "\\"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_upstream_key_escaped_and_split_across_streamed_pieces_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    api: str,
    split: str,
) -> None:
    """The key's first character written as `\\u0073` and the escape cut between two streamed
    pieces (`{"k": "\\u00` then `73k-...`): before, only an end that could start the plain key was
    held back, so each piece went on as it came and the client's joined text decoded to the key.
    Now an end that could start any escaped form of the key is held back too."""
    monkeypatch.setenv("ANY48E_UPSTREAM_KEY", ESCAPED_KEY)
    server = any_server(model_upstream_api_key_env="ANY48E_UPSTREAM_KEY", model_upstream_api=api)
    emulator = PTCEmulator(server.base_url)
    whole = '{"k": "\\u0073' + ESCAPED_KEY[1:] + '"}'
    assert json.loads(whole)["k"] == ESCAPED_KEY
    cut = whole.index("\\u0073") + len(split)
    upstream.reply(streamed(whole[:cut], whole[cut:]))
    with emulator.client(max_retries=0) as sdk:
        events = list(sdk.responses.create(model="m", input="Go.", tools=[PTC], stream=True))
    joined = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert joined == '{"k": "[redacted]"}'
    assert ESCAPED_KEY not in json.dumps(json.loads(joined))
    emulator.close()


def test_the_upstream_key_escaped_after_an_escaped_backslash_in_a_call_is_refused(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Arguments that are JSON holding `\\\\u0073k-...` (an escaped backslash, then `u0073`: the
    key once the string is decoded again). Before, the key's escape was replaced right after the
    escaped backslash (`\\\\[redacted]`), which is no JSON: the 502 said the arguments are not
    JSON, quoting them. Now the arguments are looked through before any such rewrite, and the call
    is refused because its arguments hold the key."""
    monkeypatch.setenv("ANY48E_UPSTREAM_KEY", ESCAPED_KEY)
    emulator = PTCEmulator(any_server(model_upstream_api_key_env="ANY48E_UPSTREAM_KEY").base_url)
    arguments = json.dumps({"code": "return JSON.parse('\"\\\\u0073" + ESCAPED_KEY[1:] + "\"')"})
    upstream.reply(raw_call(CODE_TOOL, arguments), echo("said "))
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.", tools=[PTC])
    assert raised.value.status_code == 502
    envelope = _envelope(raised.value)
    assert "whose arguments hold the upstream's key" in envelope["message"], envelope["message"]
    assert "not JSON" not in envelope["message"] and ESCAPED_KEY not in raised.value.response.text
    emulator.close()


@pytest.mark.parametrize("code", [200, 400])
def test_the_upstream_key_in_a_content_encoding_reaches_no_one(
    any_server: Callable[..., EmulatorServer],
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    code: int,
) -> None:
    """Before, the Content-Encoding was lowercased and then redacted: a key with capitals no longer
    matched, and the 502, the stored response and the journal quoted it lowercased. Now it is
    redacted as it came, then quoted."""
    monkeypatch.setenv("ANY48_UPSTREAM_KEY", SLASHED)
    caplog.set_level("DEBUG", logger="ptc_emulator")
    emulator = PTCEmulator(any_server(model_upstream_api_key_env="ANY48_UPSTREAM_KEY").base_url)
    upstream.reply(raw_body(b"{}", code=code, **{"content-encoding": SLASHED}))
    with emulator.client(max_retries=0) as sdk, pytest.raises(openai.APIStatusError) as raised:
        sdk.responses.create(model="m", input="Go.", tools=[PTC])
    assert raised.value.status_code == 502
    message = _envelope(raised.value)["message"]
    assert message.endswith("answered with Content-Encoding '[redacted]' although asked for none.")
    seen = [message, raised.value.response.text, json.dumps(emulator.journal), caplog.text]
    assert all(SLASHED.lower() not in text.lower() for text in seen)
    emulator.close()


@pytest.mark.parametrize("code", ["text('k=' + KEY)", "throw new Error('k=' + KEY)"], ids=["result", "error"])
def test_the_upstream_key_a_program_builds_is_out_of_its_output(
    any_server: Callable[..., EmulatorServer], upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    """Before, a program the upstream wrote could build its key from pieces at run time, and its
    output (or its error) carried the key to the client, the journal and back. Its output holds
    `[redacted]` now, with an id signed for that text: the conversation goes on from it."""
    monkeypatch.setenv("ANY30_UPSTREAM_KEY", KEY)
    server = any_server(model_upstream_api_key_env="ANY30_UPSTREAM_KEY")
    emulator = PTCEmulator(server.base_url)
    half = len(KEY) // 2
    built = f"var KEY = {KEY[:half]!r} + {KEY[half:]!r}; {code}"
    upstream.reply(program(built), echo(), echo(), echo())
    with emulator.client(max_retries=0) as sdk:
        response = sdk.responses.create(model="m", input="Go.", tools=[PTC])
        outputs = [item for item in response.output if item.type == "program_output"]
        assert len(outputs) == 1 and "k=[redacted]" in outputs[0].result, outputs
        again = sdk.responses.create(model="m", input="Again.", tools=[PTC], previous_response_id=response.id)
        assert again.status == "completed"
        resent = [*(i.model_dump(exclude_none=True) for i in response.output), {"role": "user", "content": "More."}]
        replayed = sdk.responses.create(model="m", input=resent, tools=[PTC], store=False)  # type: ignore[arg-type]
        assert replayed.status == "completed"  # the output's signed id holds for its redacted text
        seen = [json.dumps(r.model_dump()) for r in (response, sdk.responses.retrieve(response.id))]
    seen.append(json.dumps(emulator.journal))
    seen.append(json.dumps(upstream.requests[1:]))
    assert all(KEY not in text for text in seen)
    emulator.close()
