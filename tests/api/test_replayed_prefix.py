"""A replayed `store: false` conversation validates only its new items (history/replayed.py), and
answers exactly as if it validated them all: the same outputs, the same 400s for a tampered,
missing or reordered item, whether the item sits in the already-seen prefix or not.

The app runs in this process (httpx's ASGI transport, the real edge and the real V8 workers), so
the test can read the cache's counters and switch it off for the comparison."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.history.replayed import PrefixCache
from ptc_emulator.emulator.rules import conversation
from tests.support import ADD_TOOL, add_answers, in_process_http, js

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
PROGRAM = js("let t = 0;\nfor (let i = 0; i < 4; i++) t = await tools.add({a: t, b: i});\ntext('t=' + t)")


def reader(http: httpx.AsyncClient) -> PrefixCache:
    """The app's body reader (the engine owns it)."""
    bodies: PrefixCache = http._transport.app.state.emulator.engine.history.bodies  # type: ignore[attr-defined]
    return bodies


@pytest.fixture
async def app_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(data_dir=tmp_path, store="memory", bundled_fixtures=False, pool_size=1)
    async with in_process_http(settings) as (client, _):
        yield client


@pytest.fixture
async def http(app_client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """The cache on for bodies of any size: these conversations are smaller than its `min_bytes`."""
    smallest, reader(app_client).min_bytes = reader(app_client).min_bytes, 0
    try:
        yield app_client
    finally:
        reader(app_client).min_bytes = smallest


async def post(http: httpx.AsyncClient, items: list[Any]) -> httpx.Response:
    body = json.dumps({"model": "m", "input": items, "tools": TOOLS, "store": False}).encode()
    return await http.post("/v1/responses", content=body, headers={"content-type": "application/json"})


async def both_ways(http: httpx.AsyncClient, items: list[Any]) -> tuple[httpx.Response, httpx.Response]:
    """The same body with the prefix cache on (after the conversation warmed it) and off."""
    on = await post(http, items)
    size, reader(http).max_bytes = reader(http).max_bytes, 0
    try:
        off = await post(http, items)
    finally:
        reader(http).max_bytes = size
    return on, off


async def test_a_replayed_chain_validates_only_new_items_and_ends_the_same(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader(http).clear()
    hits = reader(http).hits
    read = 0
    param = conversation._param

    def counted(index: int, new_from: int, shift: int = 0) -> str:  # once per item the rules read
        nonlocal read
        read += 1
        return param(index, new_from, shift)

    monkeypatch.setattr(conversation, "_param", counted)
    items: list[Any] = [{"role": "user", "content": PROGRAM}]
    steps = 0
    sent_before = 0
    while True:
        read = 0
        reply = await post(http, items)
        assert reply.status_code == 200, reply.text
        # The conversation rules read only what this request added: its prefix (the very item
        # objects the body reader handed it) was read for the request before, and its cursor kept.
        assert read == len(items) - sent_before, (read, len(items), sent_before)
        sent_before = len(items)
        output = reply.json()["output"]
        if not any(o["type"] == "function_call" for o in output):
            break
        items = [*items, *output, *add_answers(output)]
        steps += 1
    assert steps == 4
    assert output[-1]["content"][0]["text"] == "t=6"
    assert reader(http).hits - hits >= 3  # every request after the first extended a known prefix
    assert 0 < reader(http).bytes <= reader(http).max_bytes

    # The last request again, with the cache off: the same output, item for item (less the ids).
    on, off = await both_ways(http, items[:-1] + items[-1:])
    assert on.status_code == off.status_code == 200
    strip = ("id", "call_id", "created_at", "completed_at", "response_id")
    assert _without(on.json()["output"], strip) == _without(off.json()["output"], strip)


async def _warm(http: httpx.AsyncClient) -> list[Any]:
    """A conversation two calls in (its prefix known to the cache)."""
    items: list[Any] = [{"role": "user", "content": PROGRAM}]
    for _ in range(2):
        reply = await post(http, items)
        assert reply.status_code == 200, reply.text
        output = reply.json()["output"]
        items = [*items, *output, *add_answers(output)]
    return items


@pytest.mark.parametrize(
    "tamper",
    [
        "arguments",
        "output",
        "drop_call",
        "drop_program",
        "swap",
        "nan",
        "surrogate",
        "repeat_output",
        "repeat_program",
        "repeat_call",
    ],
)
async def test_a_tampered_item_in_the_known_prefix_is_still_refused(http: httpx.AsyncClient, tamper: str) -> None:
    reader(http).clear()
    items = await _warm(http)
    hits = reader(http).hits
    bad = copy.deepcopy(items)
    calls = [i for i, item in enumerate(bad) if item.get("type") == "function_call"]
    first = calls[0]
    if tamper == "arguments":  # a program's call, signed by the emulator, its arguments changed
        bad[first]["arguments"] = json.dumps({"a": 100, "b": 0})
    elif tamper == "output":  # a settled answer rewritten: the replayed program diverges
        outputs = [i for i, item in enumerate(bad) if item.get("type") == "function_call_output"]
        bad[outputs[0]]["output"] = "41"
    elif tamper == "drop_call":  # an orphan output: its call is missing
        del bad[first]
    elif tamper == "drop_program":
        del bad[[i for i, item in enumerate(bad) if item.get("type") == "program"][0]]
    elif tamper == "nan":  # after the known prefix: the JSON check still sees the new items
        bad.append({"role": "user", "content": [{"type": "input_text", "text": "x", "n": float("nan")}]})
    elif tamper == "surrogate":
        bad.append({"role": "user", "content": "\ud800"})
    elif tamper.startswith("repeat_"):  # a new item that repeats one of the known prefix: a duplicate
        kind = {"repeat_output": "function_call_output", "repeat_program": "program", "repeat_call": "function_call"}
        bad.append(copy.deepcopy(next(item for item in bad if item.get("type") == kind[tamper])))
    else:
        bad[first], bad[first + 1] = bad[first + 1], bad[first]
    on, off = await both_ways(http, bad)
    assert on.status_code == off.status_code
    assert on.json() == off.json()
    if tamper != "output":
        assert on.status_code == 400, on.text
    # The untampered conversation still extends its prefix from the cache.
    reply = await post(http, items)
    assert reply.status_code == 200 and reader(http).hits > hits


async def test_a_body_that_is_not_plain_takes_the_ordinary_path(http: httpx.AsyncClient) -> None:
    """A repeated top-level `input` (JSON keeps the last) is never matched against a prefix."""
    reader(http).clear()
    items = await _warm(http)
    prefix = json.dumps({"model": "m", "input": items, "tools": TOOLS, "store": False})
    doubled = prefix[:-1] + ', "input": [{"role": "user", "content": "hi"}]}'
    hits = reader(http).hits
    headers = {"content-type": "application/json"}
    on = await http.post("/v1/responses", content=doubled.encode(), headers=headers)
    assert reader(http).hits == hits
    size, reader(http).max_bytes = reader(http).max_bytes, 0
    try:
        off = await http.post("/v1/responses", content=doubled.encode(), headers=headers)
    finally:
        reader(http).max_bytes = size
    assert on.status_code == off.status_code and on.json() == off.json()


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


async def test_a_stored_conversation_validates_each_stored_response_once(http: httpx.AsyncClient) -> None:
    """`store: true` with `previous_response_id`: each finished response's items are validated once
    (history/stored.py keeps them), and the conversation ends as it always did."""
    engine = http._transport.app.state.emulator.engine  # type: ignore[attr-defined]
    body: dict[str, Any] = {"model": "m", "input": [{"role": "user", "content": PROGRAM}], "tools": TOOLS}
    ids = []
    while True:
        reply = await http.post("/v1/responses", json=body)
        assert reply.status_code == 200, reply.text
        response = reply.json()
        ids.append(response["id"])
        outputs = add_answers(response["output"])
        if not outputs:
            break
        body = {"model": "m", "input": outputs, "tools": TOOLS, "previous_response_id": response["id"]}
    assert response["output"][-1]["content"][0]["text"] == "t=6"
    cached = engine.history.validated
    assert all(cached.get(i) is not None for i in ids[:-1]) and 0 < cached.bytes <= cached.max_bytes
    # A deleted response is not continued from the cache.
    assert (await http.delete(f"/v1/responses/{ids[-2]}")).status_code == 200
    reply = await http.post("/v1/responses", json={**body, "previous_response_id": ids[-2]})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "previous_response_not_found"


async def test_a_body_under_the_smallest_size_takes_the_ordinary_path(app_client: httpx.AsyncClient) -> None:
    """Below `min_bytes` nothing is looked up or kept, and the chain ends as it does with the cache
    off (the `http` fixture's tests run the same chain with the cache on for every size)."""
    cache = reader(app_client)
    assert cache.min_bytes == 4096
    cache.clear()
    hits, misses = cache.hits, cache.misses
    items: list[Any] = [{"role": "user", "content": PROGRAM}]
    while True:
        assert len(json.dumps({"model": "m", "input": items, "tools": TOOLS, "store": False})) < 4096
        on, off = await both_ways(app_client, items)
        assert on.status_code == off.status_code == 200, on.text[:300]
        strip = ("id", "call_id", "caller_id", "created_at", "completed_at", "response_id", "fingerprint")
        assert _without(on.json()["output"], strip) == _without(off.json()["output"], strip)
        output = on.json()["output"]
        if not any(o["type"] == "function_call" for o in output):
            break
        items = [*items, *output, *add_answers(output)]
    assert output[-1]["content"][0]["text"] == "t=6"
    assert (cache.hits, cache.misses, cache.bytes) == (hits, misses, 0)


@pytest.mark.parametrize("pad", [10, 5000])
async def test_a_body_that_is_not_strict_utf8_gets_the_same_400_with_the_cache_on_or_off(
    http: httpx.AsyncClient, pad: int
) -> None:
    """The JSON parser reads a lone surrogate encoded in the body's bytes; the cache, which reads the
    body as strict UTF-8, leaves such a body to the ordinary path (which refuses it, naming the
    surrogate), whatever its size."""
    content = b'"x' + b"y" * pad + b'\xed\xa0\x80"'
    body = b'{"model":"m","input":[{"role":"user","content":' + content + b'}],"store":false}'
    replies = []
    for on in (True, False):
        size, reader(http).max_bytes = reader(http).max_bytes, reader(http).max_bytes if on else 0
        try:
            replies.append(await http.post("/v1/responses", content=body, headers={"content-type": "application/json"}))
        finally:
            reader(http).max_bytes = size
    assert replies[0].status_code == replies[1].status_code == 400
    assert replies[0].json() == replies[1].json()
    assert "lone UTF-16 surrogate" in replies[0].json()["error"]["message"]


@pytest.mark.parametrize(
    "change", ["unknown_field", "wrong_type", "bad_setting", "unknown_key", "truncated", "trailing", "deep"]
)
async def test_a_bad_body_after_a_known_prefix_gets_the_same_400_with_the_cache_on_or_off(
    http: httpx.AsyncClient, change: str
) -> None:
    """The known prefix's items stand in as models; whatever is wrong after them is found, and
    worded and located, exactly as without the cache."""
    reader(http).clear()
    items = await _warm(http)
    body: dict[str, Any] = {"model": "m", "input": copy.deepcopy(items), "tools": TOOLS, "store": False}
    if change == "unknown_field":
        body["input"].append({"role": "user", "content": "hi", "colour": "red"})
    elif change == "wrong_type":
        body["input"][-1]["output"] = 7
    elif change == "bad_setting":
        body["store"] = "no"
    elif change == "unknown_key":
        body["temperatures"] = 1
    elif change == "deep":
        deep = json.loads("[" * 80 + "]" * 80)
        body["input"].append({"role": "user", "content": [{"type": "input_text", "text": "x", "n": deep}]})
    text = json.dumps(body)
    if change == "truncated":
        text = text[:-40]
    elif change == "trailing":
        text += " x"
    hits = reader(http).hits
    headers = {"content-type": "application/json"}
    on = await http.post("/v1/responses", content=text.encode(), headers=headers)
    size, reader(http).max_bytes = reader(http).max_bytes, 0
    try:
        off = await http.post("/v1/responses", content=text.encode(), headers=headers)
    finally:
        reader(http).max_bytes = size
    assert on.status_code == off.status_code == 400, on.text[:300]
    assert on.json() == off.json()
    if change in ("unknown_field", "wrong_type", "bad_setting", "unknown_key", "deep"):
        assert reader(http).hits > hits  # read with the known prefix's models
    if change == "unknown_field":
        assert on.json()["error"]["param"] == f"input[{len(items)}].colour"
