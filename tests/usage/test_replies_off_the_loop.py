"""A long reply is encoded off the event loop: `POST /v1/responses`, `GET /v1/responses/{id}` and
its `input_items` hand a reply of some 64 K characters or more to a worker thread (`api.replies.rendered`), which
makes `JSONResponse`'s bytes a piece at a time. Health and a small create are answered while that
step is held on an event the test sets. On the code before, `JSONResponse` encoded every reply on
the loop (a 7 MB one 20-40 ms): the held step was never reached and the test failed there.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.responses import JSONResponse

from ptc_emulator.api import replies, sse
from ptc_emulator.api.journaling import Journaling
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import Held, others_answered_while_held, while_held

CHARS = 200_000


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch, held: Held) -> list[bytes]:
    """Every reply made in the worker thread; the first one held until the test lets it go."""
    made: list[bytes] = []
    real = replies.rendered

    def render(value: Any) -> bytes:
        held.hold()
        made.append(real(value))
        assert made[-1] == JSONResponse(value).body  # the bytes the loop made before
        return made[-1]

    monkeypatch.setattr(replies, "rendered", render)
    return made


def _long_text(store: bool) -> dict[str, Any]:
    code = f"text('é\"'.repeat({CHARS // 2}))"
    return {"model": "m", "input": program_message(code), "tools": PTC_TOOLS, "store": store}


def test_a_long_create_reply_is_encoded_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, rendered: list[bytes]
) -> None:
    server = make_server()
    done = while_held(server, held, lambda client: client.post("/responses", json=_long_text(False)))
    assert done["output"][-1]["content"][0]["text"] == 'é"' * (CHARS // 2)
    assert len(rendered) == 1


def test_a_long_stored_reply_is_read_back_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, rendered: list[bytes]
) -> None:
    server = make_server()
    held.entered.set()  # the create's own reply passes
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        created = client.post("/responses", json=_long_text(True))
    assert created.status_code == 200, created.text[:500]
    held.entered.clear()
    answer = created.json()
    got = while_held(server, held, lambda client: client.get(f"/responses/{answer['id']}"))
    assert got["output"] == answer["output"]
    assert len(rendered) == 2


def test_a_long_page_of_input_items_is_encoded_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, rendered: list[bytes]
) -> None:
    """A page of input items as long (here one item of `CHARS` characters) is a long reply too: on
    the code before, FastAPI encoded it on the loop and the held step was never reached."""
    server = make_server()
    held.entered.set()  # the create's own reply passes
    long_item = {"role": "user", "content": 'é"' * (CHARS // 2)}
    body = {"model": "m", "input": [long_item, {"role": "user", "content": program_message("text('ok')")}]}
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        created = client.post("/responses", json={**body, "tools": PTC_TOOLS})
    assert created.status_code == 200, created.text[:500]
    held.entered.clear()
    rendered.clear()
    response_id = created.json()["id"]
    page = while_held(server, held, lambda client: client.get(f"/responses/{response_id}/input_items?order=asc"))
    assert page["data"][0]["content"][0]["text"] == long_item["content"]
    assert len(rendered) == 1


def test_a_long_reply_is_journaled_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its journal entry is made in a worker thread too (the reply's bytes copied, or its text made
    when they are not the journal's own, as here with its non-ASCII text); on the code before,
    the entry was made on the loop as the request ended, and the held step held every client."""
    monkeypatch.setattr(Journaling, "finish", held.around(Journaling.finish))
    server = make_server()
    done = while_held(server, held, lambda client: client.post("/responses", json=_long_text(False)))
    with httpx.Client(timeout=60) as client:
        kept = client.get(server.base_url.removesuffix("/v1") + "/_emulator/journal").json()
    (entry,) = [e for e in kept["data"] if (e.get("response") or {}).get("id") == done["id"]]
    assert entry["response"]["output"] == done["output"]
    assert entry["figures"]["output_tokens"] == done["usage"]["output_tokens"]


def test_a_long_reply_is_journaled_once(make_server: Callable[..., EmulatorServer]) -> None:
    """A create of a long body is journaled in its worker thread; the entry is not finished again as
    the request ends (the calls it counts counted twice, its response put back as the dict)."""
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        code = "const r = await tools.echo({text: 'x'}); text(r.text);"
        long_input = [{"role": "user", "content": "é" * CHARS}, {"role": "user", "content": program_message(code)}]
        first = client.post("/responses", json={"model": "m", "input": long_input, "tools": PTC_TOOLS, "store": False})
        assert first.status_code == 200, first.text[:500]
        journal = client.get(server.base_url.removesuffix("/v1") + "/_emulator/journal").json()["data"]
    (entry,) = [e for e in journal if (e.get("response") or {}).get("id") == first.json()["id"]]
    calls = [item for item in first.json()["output"] if item["type"] == "function_call"]
    assert calls and sum(c["program"] + c["direct"] for c in entry["figures"]["calls"].values()) == len(calls)


def test_a_short_reply_is_encoded_where_it_is(
    make_server: Callable[..., EmulatorServer], rendered: list[bytes]
) -> None:
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        body = {"model": "m", "input": program_message("text('hi')"), "tools": PTC_TOOLS}
        reply = client.post("/responses", json=body)
    assert reply.status_code == 200, reply.text[:500]
    assert rendered == []


def test_a_long_event_of_a_stream_is_framed_off_the_loop(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`response.output_item.done` and `response.completed` of a long reply are framed in a worker
    thread (`sse.long_frame`), in order; on the code before, `frame` made them on the loop."""
    real = sse.long_frame
    framed: list[str] = []

    def long_frame(event: dict[str, Any]) -> bytes:
        held.hold()
        made = real(event)
        assert made == sse.frame(event)
        framed.append(event["type"])
        return made

    monkeypatch.setattr(sse, "long_frame", long_frame)
    server = make_server()

    def large() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return client.post("/responses", json={**_long_text(False), "stream": True})

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(large)
        others_answered_while_held(server, held.entered, held.release, pending)
        reply = pending.result(timeout=300)
    assert reply.status_code == 200, reply.text[:500]
    kinds = [line.removeprefix("event: ") for line in reply.text.splitlines() if line.startswith("event: ")]
    assert kinds[-1] == "response.completed"
    sent = iter(kinds)
    assert all(kind in sent for kind in framed)  # a subsequence: in the stream's order
    assert "response.completed" in framed
