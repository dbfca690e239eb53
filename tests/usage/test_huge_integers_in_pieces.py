"""A body of huge integers is read, checked and written a bounded stretch of text at a time.

A create whose function tool's `parameters` schema held 3,500 integers of 4,000 digits (14 MB,
within the body limit; CPython converts up to 4,300 digits) held every other client 0.8-3.4 s:
turning a digit run into an int (and back) is quadratic in its digits, so a value's cost is not
its count. The body reader paused every 1,000 values whatever their length (4 MB of digits
between two pauses), and the schema check wrote the whole schema in one `json.dumps` and read it
back in one `json.loads` (some 0.8 s and 0.3 s, in a worker thread, but holding the interpreter).

Nothing is timed: the tests note, per thread, the characters the scanner read between two pauses
(`jsonpieces.between`), and the longest text one `json.dumps` call wrote.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import jsonpieces
from ptc_emulator.sandbox._pieces import PIECE_CHARS
from ptc_emulator.testing.server import EmulatorServer

DIGITS = 4_000
COUNT = 300
"""Integers in the schema: 1.2 MB of digits, under the 1,000 values the reader used to pause at."""
BOUND = 2 * 64 * 1024
"""The most text scanned between two pauses: `jsonpieces.READ_CHARS`, and one value of at most
`jsonpieces.STEP` characters read past it."""
PROGRAM = "```js\ntext('ok')\n```"


class Noted:
    """Per thread: characters scanned since its last pause, and the most seen between two."""

    def __init__(self) -> None:
        self.since: dict[int, int] = {}
        self.most = 0
        self.dumped = 0
        self.lock = threading.Lock()

    def scanned(self, chars: int) -> None:
        with self.lock:
            ident = threading.get_ident()
            self.since[ident] = self.since.get(ident, 0) + chars
            self.most = max(self.most, self.since[ident])

    def paused(self) -> None:
        with self.lock:
            self.since[threading.get_ident()] = 0


def _noting(monkeypatch: pytest.MonkeyPatch) -> Noted:
    seen = Noted()
    scan = jsonpieces._SCAN
    between = jsonpieces.between
    dumps = json.dumps

    def scanned(text: str, i: int) -> tuple[Any, int]:
        value, end = scan(text, i)
        seen.scanned(int(end) - i)
        return value, end

    def paused() -> None:
        seen.paused()
        between()

    def dumped(value: Any, *args: Any, **kwargs: Any) -> str:
        text = dumps(value, *args, **kwargs)
        with seen.lock:
            seen.dumped = max(seen.dumped, len(text))
        return text

    monkeypatch.setattr(jsonpieces, "_SCAN", scanned)
    monkeypatch.setattr(jsonpieces, "between", paused)
    monkeypatch.setattr(json, "dumps", dumped)
    return seen


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("huge-ints")), store="memory", pool_size=1)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


def test_a_schema_of_huge_integers_is_read_and_checked_in_bounded_stretches(
    server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ints = [10 ** (DIGITS - 1) + n for n in range(COUNT)]
    schema = {"type": "object", "properties": {"n": {"type": "integer", "enum": ints}}}
    body = {
        "model": "gpt-5",
        "store": False,
        "input": PROGRAM,
        "tools": [{"type": "function", "name": "f", "parameters": schema}],
    }
    text = json.dumps(body)  # (before the server's calls are noted)
    noted = _noting(monkeypatch)
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        created = client.post("/responses", content=text, headers={"content-type": "application/json"})
    assert created.status_code == 200, created.text[:500]
    assert created.json()["tools"][0]["parameters"]["properties"]["n"]["enum"] == ints  # as sent
    # Before: all 1.2 MB of digits read between two pauses (they were under 1,000 values).
    assert noted.most <= BOUND, f"{noted.most} characters scanned between two pauses"
    # Before: the schema check wrote the whole schema (1.2 MB) in one `json.dumps` call.
    assert noted.dumped <= 2 * PIECE_CHARS, f"{noted.dumped} characters written in one json.dumps call"
