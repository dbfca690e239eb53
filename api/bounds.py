"""The one check of every number `ptc-emulator serve` takes (seconds, bytes, counts), shared by the
command line (each flag's argparse type) and the settings a program builds itself (the recording
proxy's `--upstream-timeout`).

Seconds are positive, finite and at most a week (`MAX_SECONDS`; past some 10^9 the standard
library's waits fail with an overflow, not a clear error). No flag has an "off": a deadline of
infinity, or of none, is the unbounded wait the deadlines are there to prevent; a long one is given
in seconds. Bytes and counts are whole numbers of at least one and at most `MAX_WHOLE` (2^40, where
the runtime's sizes would overflow), except where nought means something the flag's help says
(`--live-cache 0`: always replay; `--model-upstream-retries 0`: no further attempt; `--port 0`: any
free port). Before, the head and write-pause deadlines took `inf`, every other number took `nan`,
nought or a negative, and a port past 65535 was a traceback.

Two flags have a tighter bound, for what they cost the machine: `--lease-seconds` is at least
`MIN_LEASE_SECONDS` (a replica renews each lease it holds every third of it, the shared secret's
even when idle, api/replicas.py: `0.0001` made an idle replica run some 9,000 transactions a second against the shared
database), and `--workers` at most `MAX_WORKERS` (each V8 worker is a process of some 75 MB
resident, and the pool may start as many again for fairness, docs/sandbox.md: 1024 asked for
some 800 processes and ran a 24 GB machine out of memory).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

__all__ = [
    "BYTES",
    "COUNT",
    "LEASE_SECONDS",
    "MAX_SECONDS",
    "MAX_WHOLE",
    "MAX_WORKERS",
    "MIN_LEASE_SECONDS",
    "PORT",
    "SECONDS",
    "WORKERS",
    "Bound",
]

MAX_SECONDS = 7 * 24 * 3600
MAX_WHOLE = 2**40
MIN_LEASE_SECONDS = 1.0
MAX_WORKERS = 64


@dataclass(frozen=True)
class Bound:
    """What a flag's number may be: `seconds` (a float, positive and finite, at least `least`
    where that is set), or a whole number from `minimum` to `maximum`."""

    seconds: bool = False
    least: float = 0.0
    minimum: int = 1
    maximum: int = MAX_WHOLE

    def problem(self, value: object) -> str | None:
        """Why `value` will not do, or None."""
        if self.seconds:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:  # type: ignore[operator,arg-type]
                return f"not a positive, finite number of seconds (at most {MAX_SECONDS}, a week)"
            if value < self.least:  # type: ignore[operator]
                return f"not a number of seconds from {self.least:g} to {MAX_SECONDS} (a week)"
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not self.minimum <= value <= self.maximum:
            return self._wanted()
        return None

    def _wanted(self) -> str:
        if self.maximum != MAX_WHOLE:
            return f"not a whole number from {self.minimum} to {self.maximum}"
        least = "a positive whole number" if self.minimum == 1 else f"a whole number of at least {self.minimum}"
        return f"not {least} (at most 2^40)"

    def __call__(self, text: str) -> float | int:
        """The number `text` says (an argparse `type`): a clear error if it will not do."""
        value: float | int
        try:
            value = float(text) if self.seconds else int(text)
        except ValueError:
            value = math.nan
        if (problem := self.problem(value)) is not None:
            raise argparse.ArgumentTypeError(f"{problem}: {text!r}")
        return value

    @property
    def __name__(self) -> str:  # argparse names the type in some of its errors
        return "seconds" if self.seconds else "number"


SECONDS = Bound(seconds=True)
BYTES = COUNT = Bound()
PORT = Bound(minimum=0, maximum=65535)
LEASE_SECONDS = Bound(seconds=True, least=MIN_LEASE_SECONDS)
WORKERS = Bound(maximum=MAX_WORKERS)
