"""A large body refused with a 400 is freed in the worker thread that read it, not on the event loop.

The refusal kept the parsed body and its errors for the 400's wording, and the exception's frames
held them in a cycle: once answered, a full collection on the event loop freed them, and a body of
3,900,000 small arrays (15.6 MB, within the 16 MiB bound) held every other client 2-4 s (issue 38).
Now only what the wording reads is kept, and the body goes with the worker's last reference. The
test counts what a full collection run on the event loop after the answer frees (`gc.collect`):
before, the body's arrays, every one; now, next to nothing. Nothing is timed.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.testing.server import EmulatorServer

ARRAYS = 60_000


def _collected_on_the_loop(server: EmulatorServer) -> int:
    async def collect() -> int:
        return gc.collect()

    assert server.loop is not None
    return asyncio.run_coroutine_threadsafe(collect(), server.loop).result(60)


@pytest.mark.parametrize(
    ("path", "extra", "param"),
    [
        ("/responses", {"x": [[0]] * ARRAYS}, "x"),
        ("/responses", {"metadata": {"a": [[0]] * ARRAYS}}, "metadata.a"),
        ("/conversations", {"metadata": {"a": [[0]] * ARRAYS}}, "metadata.a"),
    ],
)
def test_a_refused_large_body_is_not_left_to_the_event_loop(
    make_server: Callable[..., EmulatorServer], path: str, extra: dict[str, Any], param: str
) -> None:
    server = make_server()
    body = {"model": "m", "input": "hi", **extra} if path == "/responses" else extra
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        _collected_on_the_loop(server)
        refused = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert refused.status_code == 400, refused.text[:500]
    assert refused.json()["error"]["param"] == param
    freed = _collected_on_the_loop(server)
    assert freed < ARRAYS // 2, f"a full collection on the event loop freed {freed} objects of the refused body"


@pytest.mark.parametrize("path", ["/responses", "/conversations"])
def test_a_refused_large_body_is_never_parsed_in_one_call(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Nor parsed in one `json.loads` call, which holds the interpreter throughout (0.2 s for 15 MB
    of small arrays): a piece at a time (`jsonpieces`). The longest text parsed in one call is noted."""
    server = make_server()
    longest = [0]
    real = json.loads

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        longest[0] = max(longest[0], len(text))
        return real(text, *args, **kwargs)

    body = json.dumps(
        {"model": "m", "input": "hi", "x": [[0]] * ARRAYS} if path == "/responses" else {"x": [[0]] * ARRAYS}
    )
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        monkeypatch.setattr(json, "loads", loads)
        refused = client.post(path, content=body, headers={"content-type": "application/json"})
        monkeypatch.undo()
    assert refused.status_code == 400, refused.text[:500]
    assert longest[0] < len(body) // 2, f"{longest[0]} characters parsed in one call"
