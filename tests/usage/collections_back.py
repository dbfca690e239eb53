"""The collector's thresholds as the tests of held-off collections read them.

The hold is process-wide: a request of an earlier test's server may still hold it for a moment
after that test ended (its release runs once the request's last piece is done, after its answer).
So the thresholds to compare with are read once no hold is on, and "they came back" is waited for
(polling, bounded at 60 s): what is asserted is that they come back at all, not how soon.
"""

from __future__ import annotations

import gc
import threading

from ptc_emulator.emulator import collector

__all__ = ["collections_back", "unheld_threshold"]


def _unheld() -> None:
    waited = threading.Event()
    for _ in range(600):
        if not collector.held():
            return
        waited.wait(0.1)
    raise AssertionError(f"full collections still held off after 60 s: {gc.get_threshold()}")


def unheld_threshold() -> tuple[int, int, int]:
    """The thresholds while no request holds full collections off."""
    _unheld()
    return gc.get_threshold()


def collections_back(before: tuple[int, int, int]) -> None:
    """Full collections as they were before the large request, once its hold has ended."""
    _unheld()
    assert gc.isenabled()
    assert gc.get_threshold() == before, "full collections came back once it was answered"
