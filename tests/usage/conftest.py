"""The `held` fixture of the tests of work kept off the event loop (tests/usage/held.py): a `Held`
released at the end whatever happened, so that no worker thread stays held after a failed test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.usage.held import Held


@pytest.fixture
def held() -> Iterator[Held]:
    holder = Held()
    yield holder
    holder.release.set()
