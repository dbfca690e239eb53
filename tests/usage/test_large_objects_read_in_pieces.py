"""A large body's objects are read a piece at a time, and an overfull `metadata` is refused before
its values are looked at, on every route, over HTTP and over a WebSocket.

Before, an object of 1,450,000 members anywhere below a body's top level (under an unknown key, in
an input item, in a conversation item, in an agent session's body) was read by one call of the C
scanner, and an input item holding it was read that way twice more; each call held every other
client 1-3.4 s. A `metadata` of 300,000 members of the wrong type made an error per member before
its 16 keys were counted (5.5 s, and 2.5 GB for 1,450,000). A WebSocket `response.create` frame was
read in one `json.loads` and freed on the event loop.

Nothing is timed: the tests note what the scanner read in one call (the longest, and in all),
the errors a refusal built, and which thread read a frame and took it apart.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.emulator import jsonpieces, messages, release
from ptc_emulator.emulator.history import replayed
from ptc_emulator.testing.server import EmulatorServer

MEMBERS = 40_000
"""Members of the large object: some 360,000 characters of text, over `jsonpieces.LONG_TEXT`."""
ONE_CALL = 64 * 1024
"""The most text one scanner call may read (`jsonpieces.STEP`)."""
HEADERS = {"OpenAI-Beta": "agents=v1", "content-type": "application/json"}
LARGE = {f"{n:x}": 0 for n in range(MEMBERS)}


class Scans:
    """What every scanner call read, in characters (`json.loads` calls too)."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def note(self, chars: int) -> None:
        with self.lock:
            self.reads.append(chars)
            self.threads.add(threading.current_thread().name)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scans]:
    noted = Scans()
    scan = jsonpieces._SCAN
    loads = json.loads

    def scanned(text: str, i: int) -> tuple[Any, int]:
        value, end = scan(text, i)
        noted.note(int(end) - i)
        return value, end

    def loaded(text: Any, *args: Any, **kwargs: Any) -> Any:
        noted.note(len(text))
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(jsonpieces, "_SCAN", scanned)
    monkeypatch.setattr(replayed, "_SCAN", scanned)
    monkeypatch.setattr(json, "loads", loaded)
    yield noted


def _post(server: EmulatorServer, path: str, body: str) -> httpx.Response:
    with httpx.Client(base_url=server.base_url, timeout=300, headers=HEADERS) as client:
        return client.post(path, content=body)


def _conversation(server: EmulatorServer) -> str:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        made = client.post("/conversations", json={})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/responses", {"model": "m", "input": "hi", "x": LARGE}, "x"),
        ("/responses", {"model": "m", "input": "hi", "x": [LARGE]}, "x"),
        ("/responses", {"model": "m", "input": [{"role": "user", "content": "hi", "zz": LARGE}]}, "input[0].zz"),
        ("/conversations", {"x": LARGE}, "x"),
        ("items", {"items": [{"role": "user", "content": "hi", "zz": LARGE}]}, "items[0].zz"),
        ("/agents/sessions", {"environment": {}, "x": LARGE}, "x"),
    ],
)
def test_a_large_object_is_read_a_piece_at_a_time_and_once(
    make_server: Callable[..., EmulatorServer], scans: Scans, route: str, body: dict[str, Any], param: str
) -> None:
    server = make_server()
    path = f"/conversations/{_conversation(server)}/items" if route == "items" else route
    text = json.dumps(body)
    scans.reads.clear()
    refused = _post(server, path, text)
    assert refused.status_code == 400, refused.text[:500]
    assert refused.json()["error"]["param"] == param
    assert max(scans.reads) <= ONE_CALL, f"{max(scans.reads)} characters read in one call"
    # Read once: a refused create was read again to find its input items' ends (twice more).
    assert sum(scans.reads) < 1.5 * len(text), f"{sum(scans.reads)} characters read for a body of {len(text)}"


def test_an_accepted_body_with_a_large_object_reads_as_sent(
    make_server: Callable[..., EmulatorServer], scans: Scans
) -> None:
    """A large array of objects in an accepted create's item: read in pieces, and as sent (its input
    items read back)."""
    server = make_server()
    parts = [{"type": "input_text", "text": f"{n:x}"} for n in range(MEMBERS // 4)]
    parts.append({"type": "input_text", "text": "```js\ntext(String(1 + 1))\n```"})
    text = json.dumps({"model": "m", "input": [{"role": "user", "content": parts}]})
    created = _post(server, "/responses", text)
    assert created.status_code == 200, created.text[:500]
    assert created.json()["status"] == "completed"
    assert max(scans.reads) <= ONE_CALL, f"{max(scans.reads)} characters read in one call"
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        listed = client.get(f"/responses/{created.json()['id']}/input_items", params={"limit": 1, "order": "asc"})
    assert listed.json()["data"][0]["content"] == parts


def test_a_large_socket_create_is_read_in_pieces_and_taken_apart_off_the_loop(
    make_server: Callable[..., EmulatorServer], scans: Scans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused `response.create` frame of a large object: read a piece at a time in worker
    threads (the event loop's thread reads none of it), once, and its parsed frame handed to the
    release thread when refused, not freed on the event loop."""
    server = make_server()
    taken: list[tuple[str, bool]] = []
    dismantle = release.dismantle

    def noted(value: Any) -> None:
        taken.append((threading.current_thread().name, isinstance(value, dict) and "x" in value))
        dismantle(value)

    from ptc_emulator.api.routes import websocket

    monkeypatch.setattr(websocket, "dismantle", noted)
    frame = json.dumps({"type": "response.create", "model": "m", "store": False, "input": "hi", "x": LARGE})
    scans.reads.clear()
    scans.threads.clear()
    with websockets.sync.client.connect(
        f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
    ) as ws:
        ws.send(frame)
        event = json.loads(ws.recv(timeout=300))
    assert event["type"] == "error", event
    assert event["error"]["param"] == "x", event
    assert max(scans.reads) <= ONE_CALL, f"{max(scans.reads)} characters read in one call"
    assert server._thread.name not in scans.threads  # the event loop's thread read none of it
    # Read once (nothing else waited on the socket: kept parsed until it played), and taken apart.
    assert sum(scans.reads) < 1.5 * len(frame), f"{sum(scans.reads)} characters read for a frame of {len(frame)}"
    assert [whole for _, whole in taken] == [True], taken


WHOLE = json.dumps({"model": "m", "input": [{"role": "user", "content": "hi", "zz": LARGE}]})
BROKEN = {
    "cut short": WHOLE[:-1],
    "a byte after": WHOLE + "x",
    "a long number last": WHOLE[:-2] + ', "n": ' + "9" * 5_000 + "}]}",
}
DENSE = json.dumps({"model": "m", "input": [{"role": "user", "content": "hi", "zz": LARGE}], "x": "\n" * 400_000})
"""Valid, but a string of escapes only: no place to cut it was found, and the text was read whole."""


@pytest.mark.parametrize("kind", [*BROKEN, "dense escapes"])
@pytest.mark.parametrize("over", ["http", "websocket"])
def test_a_large_body_that_fails_late_is_not_read_again_whole(
    make_server: Callable[..., EmulatorServer], scans: Scans, kind: str, over: str
) -> None:
    """Before, a large text the piece reader stopped in (not JSON, or a string dense with escapes)
    was read again whole by one `json.loads` call: 1.0 s of one call for a 14 MB body, every other
    client waiting (0.9-3.2 s over HTTP, 1.3-2.8 s over a WebSocket)."""
    server = make_server()
    text = DENSE if kind == "dense escapes" else BROKEN[kind]
    scans.reads.clear()
    if over == "http":
        refused = _post(server, "/responses", text)
        assert refused.status_code == 400, refused.text[:500]
        error = refused.json()["error"]
    else:
        frame = '{"type": "response.create", ' + text[1:]
        with websockets.sync.client.connect(
            f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
        ) as ws:
            ws.send(frame)
            event = json.loads(ws.recv(timeout=300))
        assert event["type"] == "error", event
        error = event["error"]
    if kind == "dense escapes":
        assert error["param"] == "input[0].zz", error
    else:
        assert (
            error["message"] == (messages.json_parse_error() if over == "http" else messages.frame_not_json()).message
        )
    most = ONE_CALL if kind != "dense escapes" else jsonpieces._SLICE + 2  # (a long string: a slice at a time)
    assert max(scans.reads) <= most, f"{max(scans.reads)} characters read in one call"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The members of every object the piece reader made in one `dict(...)` call (the reader's own
    name `dict`, shadowed here)."""
    made: list[int] = []

    def noted(*args: Any, **kwargs: Any) -> dict[Any, Any]:
        built = dict(*args, **kwargs)
        made.append(len(built))
        return built

    monkeypatch.setattr(jsonpieces, "dict", noted, raising=False)
    return made


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/responses", {"model": "m", "input": "hi", "zz": LARGE}, "zz"),
        ("/responses/input_tokens", {"model": "m", "input": "hi", "zz": LARGE}, "zz"),
        ("/conversations", {"metadata": LARGE}, "metadata"),
        ("websocket", {"type": "response.create", "model": "m", "store": False, "input": "hi", "zz": LARGE}, "zz"),
    ],
)
def test_a_large_object_is_made_a_member_at_a_time(
    make_server: Callable[..., EmulatorServer], builds: list[int], route: str, body: dict[str, Any], param: str
) -> None:
    """Before, the reader made an object of many members in one `dict(pairs)` call at its end: one
    of 1,860,000 members (16 MiB) held every other client 0.9-4.6 s. Now no object is made in one
    call of more than `PIECE` members."""
    server = make_server()
    text = json.dumps(body)
    if route == "websocket":
        with websockets.sync.client.connect(
            f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
        ) as ws:
            ws.send(text)
            error = json.loads(ws.recv(timeout=300))["error"]
    else:
        refused = _post(server, route, text)
        assert refused.status_code == 400, refused.text[:500]
        error = refused.json()["error"]
    assert error["param"] == param, error
    assert max(builds, default=0) <= jsonpieces.PIECE, f"an object of {max(builds)} members made in one call"


def test_a_large_object_read_a_member_at_a_time_keeps_json_s_reading_of_a_key_given_twice(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """A key given twice in an object the reader reads by hand (its text longer than one call reads):
    its first place and its last value, as `json.loads` reads it."""
    server = make_server()
    gap = " " * (2 * ONE_CALL)
    text = '{"metadata": {"a": "1", "b": "2",' + gap + '"a": "3", "c": "4"}, "items": []}' + " " * jsonpieces.LONG_TEXT
    assert json.loads(text)["metadata"] == {"a": "3", "b": "2", "c": "4"}
    made = _post(server, "/conversations", text)
    assert made.status_code == 200, made.text[:500]
    assert list(made.json()["metadata"].items()) == list(json.loads(text)["metadata"].items())
