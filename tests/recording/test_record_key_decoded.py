"""The recording proxy refuses an answer that holds its upstream key as a client decodes it, not only
as UTF-8 text: bytes a JSON reader takes as UTF-16 (or UTF-8 with an encoded surrogate) whatever
the Content-Type, the same in a binary WebSocket message, and the key inside a JSON string inside a
string (a call's arguments, which the app decodes again), whole or split across argument deltas. An
escape after an escaped backslash is not rewritten into broken JSON. Each test fails on the code
before; each upstream is a small server on loopback; nothing is timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.recording.test_record_key_fail_closed import _post, _recorded, _response, through_socket

KEY = "sk-h48f/SeCrEt+k3y9"
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY)
BINARY = b"200 OK\r\ncontent-type: application/octet-stream"


def _refused(response: httpx.Response, why: str) -> None:
    assert response.status_code == 502, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "upstream_error"
    assert why in error["message"]
    _free(response.content)


def _free(data: bytes) -> None:
    """No form of the key a JSON reader could decode from `data`."""
    assert KEY.encode() not in data and KEY.encode("utf-16-le") not in data
    text = data.decode("utf-8", "replace")
    assert ESCAPED not in text.lower() and "\\u0073" not in text.lower(), text[:500]


def _call(arguments: str) -> dict[str, Any]:
    response = _response("")
    response["output"] = [
        {
            "type": "function_call",
            "id": "fc_key48",
            "call_id": "call_key48",
            "name": "look",
            "arguments": arguments,
            "status": "completed",
        }
    ]
    return response


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-32"])
def test_a_utf_16_body_of_another_content_type_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """Before: not textual, so not looked at; `json.loads(bytes)` reads UTF-16, and the recording held the key."""
    body = json.dumps({**_response("hi"), "note": KEY}).encode(codec)
    assert json.loads(body)["note"] == KEY
    response = _post(tmp_path, monkeypatch, BINARY, body)
    _refused(response, "as a JSON reader decodes its bytes")
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def test_an_escaped_key_beside_an_encoded_surrogate_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the bytes were not strict UTF-8 (an encoded surrogate), so they went on unscanned."""
    body = json.dumps(_response(f"it is {KEY}")).replace(KEY, ESCAPED).encode()
    body = body[:-1] + b',"x":"\xed\xbf\xbf"}'
    assert json.loads(body)["output"][0]["content"][0]["text"] == f"it is {KEY}"
    response = _post(tmp_path, monkeypatch, BINARY, body)
    _refused(response, "as a JSON reader decodes its bytes")
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def test_binary_bytes_that_are_no_json_still_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xed\xbf\xbf" + KEY.encode() + bytes(range(256))
    response = _post(tmp_path, monkeypatch, BINARY, body)
    assert response.status_code == 200
    assert response.content == body.replace(KEY.encode(), b"[redacted]")


def test_a_binary_websocket_message_read_as_json_with_the_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: not UTF-8 and not \"wide\", so sent as it came, parsed (surrogate accepted) and recorded."""
    text = json.dumps({"type": "response.completed", "response": _response(f"it is {KEY}")}).replace(KEY, ESCAPED)
    raw = text.encode()[:-1] + b',"x":"\xed\xbf\xbf"}'
    assert KEY in json.dumps(json.loads(raw))

    first, close_code = through_socket(tmp_path, monkeypatch, raw, closes=True)
    assert isinstance(first, str)
    event = json.loads(first)
    assert event["type"] == "error" and "as a JSON reader decodes its bytes" in event["error"]["message"]
    assert close_code == 1014
    _free(first.encode())
    assert not list((tmp_path / "recordings").glob("*.yaml"))


@pytest.mark.parametrize(
    "inner",
    ["\\u005cu0073" + KEY[1:], "\\\\u0073" + KEY[1:]],
    ids=["escaped-backslash-as-u-escape", "escaped-backslash"],
)
def test_call_arguments_that_decode_again_to_the_key_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inner: str
) -> None:
    """Before: the first passed (`json.loads(arguments)` gave the key); the second was rewritten to
    `\\\\[redacted]`, broken JSON the client could not read."""
    arguments = '{"a":"' + inner + '"}'
    body = json.dumps(_call("ARGS")).replace('"ARGS"', '"' + arguments.replace('"', '\\"') + '"').encode()
    told = json.loads(body)["output"][0]["arguments"]
    value = json.loads(told)["a"]  # what the app decodes from the arguments
    assert KEY in (value, json.loads('"' + value + '"'))
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: application/json", body)
    _refused(response, "cannot take out in place")
    assert not list((tmp_path / "recordings").glob("*.yaml"))


def test_an_escape_cut_across_argument_deltas_is_held_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `{"a":"\\u` went on (only plain beginnings of the key were held), then `0073k-...`:
    the client's joined arguments decoded to the key."""
    arguments = '{"a":"' + ESCAPED + '"}'
    assert json.loads(arguments)["a"] == KEY
    cut = arguments.index("\\u") + 2
    kind = "response.function_call_arguments.delta"
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**_call(""), "status": "in_progress"}},
        {"type": kind, "sequence_number": 1, "item_id": "fc_key48", "output_index": 0, "delta": arguments[:cut]},
        {"type": kind, "sequence_number": 2, "item_id": "fc_key48", "output_index": 0, "delta": arguments[cut:]},
        {"type": "response.completed", "sequence_number": 3, "response": _call('{"a":"[redacted]"}')},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", stream, True)
    assert response.status_code == 200
    told = [json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: ")]
    joined = "".join(e["delta"] for e in told if e["type"] == kind)
    assert json.loads(joined) == {"a": "[redacted]"}
    _free(response.content)


def test_a_nested_escape_cut_across_argument_deltas_ends_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key two decodes deep, cut across deltas: the stream ends with an `error` event before the
    delta that completes it. Before: both deltas went on."""
    arguments = '{"a":"\\u005cu0073' + KEY[1:] + '"}'
    cut = arguments.index("u0073")
    kind = "response.function_call_arguments.delta"
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {**_call(""), "status": "in_progress"}},
        {"type": kind, "sequence_number": 1, "item_id": "fc_key48", "output_index": 0, "delta": arguments[:cut]},
        {"type": kind, "sequence_number": 2, "item_id": "fc_key48", "output_index": 0, "delta": arguments[cut:]},
        {"type": "response.completed", "sequence_number": 3, "response": _call("{}")},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    response = _post(tmp_path, monkeypatch, b"200 OK\r\ncontent-type: text/event-stream", stream, True)
    told = [json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: ")]
    assert told[-1]["type"] == "error" and "cannot take out in place" in told[-1]["message"]
    assert KEY[1:] not in response.text
    assert not _recorded(tmp_path)


@pytest.mark.parametrize("codec", ["utf-8", "utf-16-le"])
def test_a_long_json_body_of_another_content_type_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """Before: past KEPT_BYTES a body that was not textual went on as it came, only the plain key
    bytes taken out: its `\\u`-escaped (or UTF-16) key reached a client that parses it."""
    from ptc_emulator.api import proxy

    monkeypatch.setattr(proxy, "KEPT_BYTES", 4096)
    body = json.dumps(_response(ESCAPED + "x" * 8192)).encode(codec)
    response = _post(tmp_path, monkeypatch, BINARY, body)
    _refused(response, "the proxy reads whole")


def test_a_long_binary_body_that_is_no_json_still_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ptc_emulator.api import proxy

    monkeypatch.setattr(proxy, "KEPT_BYTES", 4096)
    body = b"RIFF\x00\x01\x02\x03WAVE" + bytes(range(256)) * 40 + KEY.encode()
    response = _post(tmp_path, monkeypatch, BINARY, body)
    assert response.status_code == 200
    assert response.content == body.replace(KEY.encode(), b"[redacted]")
