"""A long output the server makes itself is counted in a worker thread, not only a long request.

`complete` moved the finish (usage, body) to a worker thread for a long conversation, `store`,
or a request long to count; with `store: false`, a short request whose program wrote a long
text (`text()` up to 1 MiB, or a scenario's long message) had that text tokenized on the event
loop (340,000 CJK characters held every other client 0.1-0.2 s). Here the tokenizer notes every
text of the test's marker it encodes with an event loop running in its thread; before, the
program's output was. Nothing is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message
from tests.usage.on_loop import Noting, noted

MARK = "\ua66e"
CHARS = 100_000
"""Over `usage.COUNTED_ON_LOOP`; the request holds the marker only as a JS escape."""


@pytest.fixture
def noting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Noting]:
    yield from noted(monkeypatch, MARK)


def test_a_long_program_output_is_counted_off_the_loop(
    make_server: Callable[..., EmulatorServer], noting: Noting
) -> None:
    server = make_server()
    code = f"text('\\ua66e'.repeat({CHARS}))"
    body = {"model": "m", "store": False, "tools": PTC_TOOLS, "input": program_message(code)}
    assert MARK not in str(body)
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        made = http.post("/responses", json=body)
    assert made.status_code == 200, made.text[:500]
    answer = made.json()
    assert answer["output"][-1]["content"][0]["text"] == MARK * CHARS
    assert answer["usage"]["output_tokens"] > 0
    assert noting.on_loop == []  # before: the output was encoded on the event loop
