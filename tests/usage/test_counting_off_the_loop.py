"""A request's token counting never holds the event loop: health and a small request are answered
while a large request is inside the tokenizer.

The server runs in this process, so the test holds the large request inside its count: the
tokenizer is wrapped so that encoding a text of the large output's marker character waits on an
event the test sets. Health and a small create must be answered while it waits, and only then is
the large one let go (it still completes). Nothing is timed: before the count ran in a worker
thread, the held count held the event loop, and health got no answer until the event was set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.held import others_answered_while_held

MARK = "\ua66e"
"""The large output's character: no other text of the test holds it."""
BIG = 2_000_000
"""Characters of the large output (6 MB of UTF-8, within the default 16 MiB body)."""
CODE = program_message("const r = await tools.echo({text: 'x'}); text(`got ${r.text.length}`);")


class _Held:
    """The tokenizer, wrapped: encoding a text of MARKs waits until `release` is set."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()

    def encode(self, text: str, **options: Any) -> Any:
        if MARK * 16 in text[:64]:
            self.entered.set()
            assert self.release.wait(120), "never released"
        return self.real.encode(text, **options)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Held]:
    usage.clear_cache()
    wrapper = _Held(usage.encoding())
    monkeypatch.setattr(usage, "encoding", lambda: wrapper)
    yield wrapper
    wrapper.release.set()
    usage.clear_cache()


def test_health_and_a_small_request_are_answered_while_a_large_one_is_being_counted(
    make_server: Callable[..., EmulatorServer], held: _Held
) -> None:
    server = make_server()
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        first = http.post("/responses", json={"model": "m", "input": CODE, "tools": PTC_TOOLS, "store": False})
        assert first.status_code == 200, first.text[:500]
        (call,) = [o for o in first.json()["output"] if o["type"] == "function_call"]
        answer = {
            "type": "function_call_output",
            "call_id": call["call_id"],
            "caller": call["caller"],
            "output": json.dumps({"text": MARK * BIG}, ensure_ascii=False),
        }
        items = [{"role": "user", "content": CODE}, *first.json()["output"], answer]
        big_body = {"model": "m", "input": items, "tools": PTC_TOOLS, "store": False}

    def big() -> httpx.Response:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            return client.post("/responses", json=big_body)

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(big)
        others_answered_while_held(server, held.entered, held.release, pending)
        large = pending.result(timeout=300)
    assert large.status_code == 200, large.text[:500]
    assert large.json()["output"][-1]["content"][0]["text"] == f"got {BIG}"


def test_a_long_text_is_counted_exactly_when_it_has_line_breaks_and_the_same_on_every_count() -> None:
    usage.clear_cache()
    lines = "".join(f"line {i}: {'word ' * (i % 40)}\n" for i in range(20_000))
    assert len(lines) > 4 * 65_536
    exact = len(usage.encoding().encode(lines, disallowed_special=()))
    assert usage.count(lines) == exact
    repeated = MARK * 300_000
    assert usage.count(repeated) == usage.count(MARK * 300_000) > 0
    usage.clear_cache()
