"""What a custom tool's lark grammar costs, before and after its bounds (`emulator/rules/larkgrammar.py`):
median ms side by side.

"before" is lark as the code before ran it: `Lark(text)` within the compile budget of calls, the
parse on lark's own `re` matcher. "after" goes through the contract's compile (imports and the
expanded size checked first, terminals matched by RE2) and its parse.

    .venv/bin/python bench/grammars.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.rules import contract

JSON = r"""
?start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""
JSON_TEXT = '{"a": [1, 2.5, "x\\"y", true, null], "b": {"c": "d"}}'

CASES: list[tuple[str, str, str | None]] = [
    ("json grammar, compile + parse", JSON, JSON_TEXT),
    ("/(a|aa)+c/ on 27 a's and a b", "start: /(a|aa)+c/", "a" * 27 + "b"),
    ("thirty optional items, compile", "start: " + " ".join('"a"?' for _ in range(30)), None),
]


def _median_ms(run: Callable[[], Any], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _before(definition: str, text: str | None) -> None:
    from lark import Lark

    try:
        parser: Any = contract._within_calls(lambda g: Lark(g, start="start"), definition, 2_000_000)
    except contract._TooManyCalls:
        return
    if text is not None:
        try:
            parser.parse(text)
        except Exception:  # noqa: BLE001 - a mismatch is an answer too
            pass


def _after(definition: str, text: str | None) -> None:
    contract._cached_grammar.cache_clear()
    try:
        matcher = contract._compile_grammar("lark", definition)
    except ValueError:
        return
    if text is not None:
        matcher(text)


def main() -> None:
    contract.import_checkers()
    print(f"{'case':40} {'before ms':>10} {'after ms':>10}")
    for name, definition, text in CASES:
        repeat = 1 if "optional" in name or "aa" in name else 5
        before = _median_ms(lambda d=definition, t=text: _before(d, t), repeat)
        after = _median_ms(lambda d=definition, t=text: _after(d, t), repeat)
        print(f"{name:40} {before:10.1f} {after:10.1f}")


if __name__ == "__main__":
    main()
