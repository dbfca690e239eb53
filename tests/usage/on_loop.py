"""The tokenizer, wrapped for the tests that show counting runs off the event loop: each text
holding a marker that is encoded while an event loop runs in its thread is noted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from ptc_emulator.emulator.responses import usage


class Noting:
    """The tokenizer, wrapped: each text holding `mark` encoded with a running event loop is noted."""

    def __init__(self, real: Any, mark: str) -> None:
        self.real = real
        self.mark = mark
        self.on_loop: list[int] = []

    def encode(self, text: str, **options: Any) -> Any:
        if self.mark in text:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                self.on_loop.append(len(text))
        return self.real.encode(text, **options)


def noted(monkeypatch: pytest.MonkeyPatch, mark: str) -> Iterator[Noting]:
    """The body of a fixture: the server's tokenizer wrapped (count cache emptied before and after)."""
    usage.clear_cache()
    wrapper = Noting(usage.encoding(), mark)
    monkeypatch.setattr(usage, "encoding", lambda: wrapper)
    yield wrapper
    usage.clear_cache()
