"""A large create's body is freed off the event loop, a container at a time, whatever it holds.

A create whose tool schema held millions of small nested arrays (a `default` of 7,600,000 empty
lists in 15 MB, refused afterwards for its size) was freed as the request's frames ended on the
event loop: one call chain of some 0.3 s in which no other client was answered (issue 38). The
test has the body's marked objects made as a dict type of its own (the body's parser
wrapped), which notes the thread that frees each one; once answered, none may have been freed on
the event loop's thread, and all by the thread that takes a body apart a container at a time (in
one go, even in a worker, 7,600,000 arrays held the interpreter 0.1-0.3 s). Nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.history import replayed
from ptc_emulator.testing.server import EmulatorServer

VALUES = 60_000
"""Past the 50,000 values one tool schema may hold: the create is refused after it validated."""


class _Freed:
    def __init__(self) -> None:
        self.threads: list[int] = []
        self.all = threading.Event()


freed = _Freed()


class _Marked(dict[str, Any]):
    def __del__(self) -> None:
        freed.threads.append(threading.get_ident())
        if len(freed.threads) >= VALUES:
            freed.all.set()


def _marked(pairs: dict[str, Any]) -> Any:
    return _Marked(pairs) if "mark" in pairs else pairs


@pytest.fixture
def marking(monkeypatch: pytest.MonkeyPatch) -> _Freed:
    freed.threads.clear()
    freed.all.clear()
    monkeypatch.setattr(replayed, "_loads", lambda raw: json.loads(raw, object_hook=_marked))
    return freed


@pytest.mark.parametrize("where", ["schema", "unknown", "metadata"])
def test_a_large_body_is_not_freed_on_the_event_loop(
    make_server: Callable[..., EmulatorServer], marking: _Freed, where: str
) -> None:
    """`schema`: refused after it validated; `unknown`, `metadata`: refused as it is validated."""
    server = make_server()
    marked = [{"mark": [n]} for n in range(VALUES)]
    schema = {"type": "object", "default": marked}
    body: dict[str, Any] = {"model": "m", "input": "hi"}
    if where == "schema":
        body["tools"] = [{"type": "function", "name": "f", "parameters": schema}]
    elif where == "unknown":
        body["x"] = marked
    else:
        body["metadata"] = {"a": marked}
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        refused = client.post("/responses", content=json.dumps(body), headers={"content-type": "application/json"})
    assert refused.status_code == 400, refused.text[:500]
    code = {"schema": "invalid_function_parameters", "unknown": "unknown_parameter", "metadata": None}[where]
    if code is not None:
        assert refused.json()["error"]["code"] == code
    assert marking.all.wait(120), f"only {len(marking.threads)} of the body's {VALUES} objects were freed"

    async def ident() -> int:
        return threading.get_ident()

    assert server.loop is not None
    loop_thread = asyncio.run_coroutine_threadsafe(ident(), server.loop).result(60)
    on_the_loop = sum(1 for thread in marking.threads if thread == loop_thread)
    assert on_the_loop == 0, f"{on_the_loop} of the body's objects were freed on the event loop"
    # Nor in one go in a worker (one call holding the interpreter): by the thread that takes a
    # body apart a container at a time.
    taker = {t.ident: t.name for t in threading.enumerate()}
    assert {taker.get(thread) for thread in marking.threads} == {"ptc-emulator-release"}
