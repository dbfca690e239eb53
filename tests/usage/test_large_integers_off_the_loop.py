"""An integer's digits count like a string's characters when work is judged long.

`usage.counts_much` counted only strings and `jsonreply.long` counted a number as 8 characters, so
a tool whose parameters held an `enum` of thousands of integers of thousands of digits (slow to
write as text, then tokenized as digits) was counted, and its stored response encoded, on the
event loop: 3,500 of them held every other client 2-5 s, a GET of a stored one 1-2 s. Here the
tokenizer notes every text of the test's digits it encodes with an event loop running in its
thread (create, input_tokens, a WebSocket create), and the reply encoder notes the replies made
in its worker thread (a GET of the stored response). On the code before, the digits were encoded
on the loop and the GET's reply was made there. Nothing is timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import websockets.sync.client

from ptc_emulator.api import replies
from ptc_emulator.emulator import jsonreply
from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import program_message
from tests.usage.on_loop import Noting, noted

DIGITS = 3_000
COUNT = 30
"""Integers in the enum: 90,000 digits in all, over `usage.COUNTED_ON_LOOP` and `jsonreply.LONG_CHARS`."""
MARK = "7" * 40
"""A run no other text of the test holds."""
CODE = program_message("text('ok')")


@pytest.fixture
def noting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Noting]:
    yield from noted(monkeypatch, MARK)


def _tools(salt: int, count: int = COUNT) -> list[dict[str, Any]]:
    numbers = [int("7" * DIGITS) + salt * 1000 + i for i in range(count)]
    parameters = {"type": "object", "properties": {"a": {"type": "integer", "enum": numbers}}}
    return [{"type": "function", "name": "f", "parameters": parameters}, {"type": "programmatic_tool_calling"}]


def _body(salt: int, count: int = COUNT, **more: Any) -> dict[str, Any]:
    return {"model": "m", "input": CODE, "tools": _tools(salt, count), **more}


def test_large_integers_are_counted_off_the_loop(make_server: Callable[..., EmulatorServer], noting: Noting) -> None:
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        made = http.post("/responses", json=_body(1, store=False))
        assert made.status_code == 200, made.text[:500]
        assert made.json()["usage"]["input_tokens"] > COUNT * DIGITS // 4
        counted = http.post("/responses/input_tokens", json=_body(2))
        assert counted.status_code == 200, counted.text[:500]
    with websockets.sync.client.connect(
        f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30, max_size=None
    ) as ws:
        ws.send(json.dumps({"type": "response.create", **_body(3, store=False)}))
        while (event := json.loads(ws.recv(timeout=120)))["type"] not in ("response.completed", "error"):
            pass
        assert event["type"] == "response.completed", str(event)[:500]
    assert noting.on_loop == []  # before: the digits were encoded on the event loop


def test_a_stored_response_of_large_integers_is_read_back_off_the_loop(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[bytes] = []
    real = replies.rendered

    def render(value: Any) -> bytes:
        made.append(real(value))
        return made[-1]

    monkeypatch.setattr(replies, "rendered", render)
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        created = http.post("/responses", json=_body(4))
        assert created.status_code == 200, created.text[:500]
        before = len(made)
        got = http.get(f"/responses/{created.json()['id']}")
        assert got.status_code == 200, got.text[:500]
    assert (
        got.json()["tools"][0]["parameters"]["properties"]["a"]["enum"]
        == _tools(4)[0]["parameters"]["properties"]["a"]["enum"]
    )
    assert len(made) == before + 1  # before: the GET's reply, "short", was encoded on the loop


def test_long_tool_definitions_are_written_a_piece_at_a_time(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The definitions' text is made a piece at a time (`jsonreply.texts`, the same text), letting
    other threads run between two pieces: before, `usage` made it in one `json.dumps` (1 s for
    3,500 such integers), holding the interpreter, the loop too, from the worker thread."""
    long_calls: list[int] = []
    real = json.dumps

    def dumps(value: Any, *args: Any, **options: Any) -> str:
        text = real(value, *args, **options)
        if len(text) > jsonreply.LONG_CHARS:
            long_calls.append(len(text))
        return text

    monkeypatch.setattr(usage, "json", SimpleNamespace(dumps=dumps, loads=json.loads))
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        counted = http.post("/responses/input_tokens", json=_body(5, 10 * COUNT))
        assert counted.status_code == 200, counted.text[:500]
    assert counted.json()["input_tokens"] > 10 * COUNT * DIGITS // 4
    assert long_calls == []  # before: one call of the whole definitions
