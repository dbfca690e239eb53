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
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

__all__ = ["BYTES", "COUNT", "MAX_SECONDS", "MAX_WHOLE", "PORT", "SECONDS", "WORKERS", "Bound"]

MAX_SECONDS = 7 * 24 * 3600
MAX_WHOLE = 2**40


@dataclass(frozen=True)
class Bound:
    """What a flag's number may be: `seconds` (a float, positive and finite), or a whole number
    from `minimum` to `maximum`."""

    seconds: bool = False
    minimum: int = 1
    maximum: int = MAX_WHOLE

    def problem(self, value: object) -> str | None:
        """Why `value` will not do, or None."""
        if self.seconds:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:  # type: ignore[operator,arg-type]
                return f"not a positive, finite number of seconds (at most {MAX_SECONDS}, a week)"
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
WORKERS = Bound(maximum=1024)
