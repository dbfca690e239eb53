"""A long text's count is bounded work, and a create counts it once.

Before, cutting a text of line breaks alone into pieces stepped back over every line break of each
65,536-character window, in Python (a 15.5 MB body of `\\n` escapes: 4.4 s of CPU a count), and a
text over 1 MiB was never cached whole, so a create counted it again for its usage and its prompt's
segments (about 11 s for that body). Nothing is timed: the steps and the counts are counted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.responses import usage
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message


class _Watched(str):
    """A text that counts the calls made on it from Python (a regular-expression scan makes none)."""

    calls = 0

    def rfind(self, *args: Any) -> int:
        _Watched.calls += 1
        return super().rfind(*args)

    def __getitem__(self, key: Any) -> str:
        _Watched.calls += 1
        return super().__getitem__(key)


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    usage.clear_cache()
    yield
    usage.clear_cache()


@pytest.mark.parametrize("unit", ["\n", "\r\n", "\n a", " \n\t"])
def test_cutting_a_text_of_line_breaks_takes_a_few_steps_a_piece(fresh_cache: None, unit: str) -> None:
    text = unit * (2_000_000 // len(unit))
    _Watched.calls = 0
    tokens = usage.count(_Watched(text))
    pieces = -(-len(text) // 65_536)
    assert _Watched.calls <= 4 * usage._STEPS * pieces, _Watched.calls  # about 3 x 65,536 a piece before
    assert tokens == usage.count(text) > 0


def test_a_long_text_with_a_cut_far_back_is_still_counted_exactly(fresh_cache: None) -> None:
    """A window whose last line breaks are all followed by spaces is looked through in one scan for
    the last one a word follows: the pieces are those the step-by-step walk cut, the count exact."""
    text = ("word\n" + " \n" * 20_000) * 16
    assert usage.count(text) == len(usage.encoding().encode(text, disallowed_special=()))


def test_a_create_counts_its_long_text_once(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch, fresh_cache: None
) -> None:
    cut: list[int] = []
    real = usage._pieces

    def pieces(text: str) -> Any:
        cut.append(len(text))
        return real(text)

    monkeypatch.setattr(usage, "_pieces", pieces)
    server = make_server()
    long = "\n" * 3_000_000
    body = {
        "model": "m",
        "tools": PTC_TOOLS,
        "input": [{"role": "user", "content": long}, {"role": "user", "content": program_message("text('ok')")}],
    }
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        first = http.post("/responses", json=body)
        assert first.status_code == 200, first.text[:500]
        assert cut.count(len(long)) == 1, cut  # its pieces cut once (two or three times before)
        again = http.post("/responses", json={**body, "store": False})
        assert again.status_code == 200, again.text[:500]
    assert cut.count(len(long)) == 1, cut  # the same text again: its count kept by its digest
    assert again.json()["usage"]["input_tokens"] == first.json()["usage"]["input_tokens"]
    assert first.json()["usage"]["input_tokens"] >= usage.count(long)
