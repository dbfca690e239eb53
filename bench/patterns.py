"""What one user-given pattern match costs on RE2, before and after the match budget
(`emulator/patterns.py`): median ms per match for a few pattern/text sizes, side by side.

"before" runs RE2 as the code before the budget did (any pattern, any text); "after" goes through
`compile_pattern` (refused when given past `MAX_PROGRAM_SIZE`, refused before running past
`MATCH_BUDGET`). The last column is ns per instruction × byte when the match ran: the slow path's
constant the budget is derived from (6 to 8 ns: 1,000,000 instruction-bytes is at most about 8 ms).

    .venv/bin/python bench/patterns.py
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import re2

from ptc_emulator.emulator.patterns import PatternError, PatternTooCostly, compile_pattern

_RANDOM = random.Random(1)
_AB = "".join(_RANDOM.choice("ab") for _ in range(100_000))
"""Random a/b text: `(a|b)*a(a|b){20}c` needs a DFA state per 21-byte window, past its memory."""

CASES: list[tuple[str, str, str]] = [
    ("((a|a)+){1,1000}!x", "a" * 10_000, "7005 instructions, 10,000 bytes"),
    ("((a|a)+){1,500}!x", "a" * 100_000, "3505 instructions, 100,000 bytes"),
    ("((a|a)+){1,500}!x", "a" * 280, "3505 instructions, 280 bytes"),
    ("(a|b)*a(a|b){20}c", _AB, "69 instructions (DFA blow-up), 100,000 bytes"),
    ("(a|b)*a(a|b){20}c", _AB[:14_000], "69 instructions (DFA blow-up), 14,000 bytes"),
    (r"(?i)hello (?P<w>\w+)", "x" * 100_000 + " hello there", "21 instructions, 100,012 bytes"),
    ("^(a+)+$", "a" * 100_000 + "!", "7 instructions, 100,001 bytes"),
]


def _median_ms(run: Callable[[], Any], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _after(pattern: str, text: str) -> str:
    try:
        compiled = compile_pattern(pattern)
    except PatternError:
        return "refused when given"
    try:
        compiled.search(text)
    except PatternTooCostly:
        start = time.perf_counter()
        try:
            compiled.search(text)
        except PatternTooCostly:
            pass
        return f"refused ({(time.perf_counter() - start) * 1e3:.3f} ms)"
    return f"{_median_ms(lambda: compiled.search(text)):.3f} ms"


def main() -> None:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 8 * 2**20
    print(f"{'case':48} {'before':>12} {'after':>26} {'ns/(instr*byte)':>16}")
    for pattern, text, label in CASES:
        regexp = re2.compile(pattern, options=options)
        # a fresh program each time: RE2 keeps the DFA states it built, so a second search is cheaper
        before = _median_ms(lambda pattern=pattern, text=text: re2.compile(pattern, options=options).search(text))
        per = before * 1e6 / (regexp.programsize * len(text.encode()))
        print(f"{label:48} {before:>9.3f} ms {_after(pattern, text):>26} {per:>16.3f}")


if __name__ == "__main__":
    main()
