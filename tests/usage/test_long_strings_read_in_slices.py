"""A long string in a request's body is decoded a slice at a time in the worker thread that reads
the body (`jsonpieces.loads`, `_piece`), the other threads let in between two slices. Health and a
small create are answered while the first slice is held on an event the test sets. On the code
before, the string was one call of the C scanner, holding the interpreter (the event loop's
included) for all of it: the held step was never reached and the test failed there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.testing.server import EmulatorServer
from tests.usage.held import Held, long_create, while_held

TEXT = "y" * 600_000 + 'é"\\\n' + "z" * 300_000


def test_a_long_string_of_a_body_is_read_a_slice_at_a_time(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    slices: list[int] = []
    real = getattr(jsonpieces, "_piece", None)

    def piece(text: str, start: int, end: int) -> str:
        slices.append(end - start)
        assert real is not None
        return str(real(text, start, end))

    monkeypatch.setattr(jsonpieces, "_piece", held.around(piece), raising=False)
    server = make_server()
    done = while_held(server, held, lambda client: client.post("/responses", json=long_create(TEXT)))
    assert done["output"][-1]["content"][0]["text"] == "ok"
    assert len(slices) >= 3 and max(slices) <= 256 * 1024


def test_a_long_body_is_decoded_a_piece_at_a_time(
    make_server: Callable[..., EmulatorServer], held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long body's bytes are made text a piece at a time too (`jsonpieces.decode`): here 2 MB of
    Cyrillic, which one `bytes.decode` call on the code before made in one go."""
    monkeypatch.setattr(
        jsonpieces, "_bytes_piece", held.around(getattr(jsonpieces, "_bytes_piece", None)), raising=False
    )
    server = make_server()
    body = long_create("й" * 1_000_000)
    done = while_held(server, held, lambda client: client.post("/responses", json=body))
    assert done["output"][-1]["content"][0]["text"] == "ok"
