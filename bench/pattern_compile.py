"""What a user-given pattern costs to compile, the accepted worst against the refused (`emulator/patterns.py`).

RE2's compile holds the interpreter, even in a worker thread: every client waits for it. The
5000-instruction bound limits a program's size, not its compile: Unicode property classes cost
RE2 0.1 to 0.2 ms each to build (folded again under `(?i)`). Each row compiles a pattern afresh
(a text of its own, so that no cache has it) within the first compile's memory bound, and prints
the median ms, and what `compile_pattern` says of it now. The first two were accepted before
`MAX_PROPERTY_CLASSES` (what a request could hold the server for); the others are the costliest
shapes found that pass the text's checks (some then refused by their size, at the cost shown).
Measured: 140 ms and 38 ms refused; the others 0.8 to 3.2 ms.

    .venv/bin/python bench/pattern_compile.py
"""

from __future__ import annotations

import itertools
import statistics
import time

import re2

from ptc_emulator.emulator.patterns import (
    _PROBE_MEM,
    MAX_PATTERN_CHARS,
    MAX_PROPERTY_CLASSES,
    PatternError,
    _options,
    compile_pattern,
)

_NONCE = itertools.count()


def _fill(prefix: str, unit: str, suffix: str = "") -> str:
    """`prefix`, then `unit` alternated as often as fits in `MAX_PATTERN_CHARS` (less a nonce's room)."""
    room = MAX_PATTERN_CHARS - len(prefix) - len(suffix) - 20
    return prefix + "(?:" + "|".join([unit] * (room // (len(unit) + 1))) + ")" + suffix


def _classes(count: int) -> str:
    return "(?i)(?:" + "|".join([r"\PL"] * count) + ")"


CASES: list[tuple[str, str]] = [
    ("(?i) \\PL x1000 (4 KB)", _fill("(?i)", r"\PL")),
    ("(?i) [\\PL\\pN\\pP...] (4 KB)", "(?i)[" + r"\PL\pN\pP" * 450 + "]"),
    (f"(?i) \\PL x{MAX_PROPERTY_CLASSES} + 3.9 KB literal", _classes(MAX_PROPERTY_CLASSES) + "a" * 3900),
    (f"(?i) \\PL x{MAX_PROPERTY_CLASSES} + [^a] alternatives", _fill(_classes(MAX_PROPERTY_CLASSES), "[^a]")),
    ("(?i) \\W alternatives (4 KB)", _fill("(?i)", r"\W")),
    ("(?i) [\\x{0}-\\x{10fff0}] alternatives", _fill("(?i)", r"[\x{0}-\x{10fff0}]")),
    ("(?si) .* alternatives", _fill("(?si)", ".*")),
    ("(?i) folded Unicode literal (4 KB)", "(?i)" + "ǅσΣß" * 1000),
]


def _compile_ms(pattern: str) -> float:
    text = f"{pattern}|x{next(_NONCE)}z"  # a text no cache has seen
    start = time.perf_counter()
    try:
        re2.compile(text, options=_options(_PROBE_MEM))
    except re2.error:
        pass  # too large a program: what it cost to find out still counts
    return (time.perf_counter() - start) * 1000


def main() -> None:
    print(f"{'pattern':58} {'chars':>6} {'median ms':>10} {'max ms':>8}  now")
    for name, pattern in CASES:
        times = [_compile_ms(pattern) for _ in range(7)]
        try:
            compile_pattern(pattern)
            now = "accepted"
        except PatternError as e:
            now = "refused: " + str(e)[:40]
        print(f"{name:58} {len(pattern):6} {statistics.median(times):10.2f} {max(times):8.2f}  {now}")


if __name__ == "__main__":
    main()
