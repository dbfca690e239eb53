"""What checking a tool schema's declaration costs (meta-schema check and pattern compile), for the
hostile shapes of docs/limits.md: each at a size past the bounds (refused by the count, before the
check) and at the largest size within them (checked, in a worker thread when a request carries it).

    .venv/bin/python bench/schemas.py [--runs 3]

Prints one line a case: its values, the median seconds of `schema_problem` on a fresh schema, and
what it answered; then the largest schema within the bounds (24,000 properties) checked both ways:
the meta-schema check as it is (`metaschema.meta_problem`), and jsonschema's `check_schema` of all
of it, as it was before (7 to 9 s there; some 0.1 s here). Run it on two checkouts to set them side
by side.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.rules import contract

Shape = Callable[[int], dict[str, Any]]

SHAPES: dict[str, tuple[Shape, int, int]] = {
    # name: (the schema of n entries, n past the bound, n within it)
    "properties": (
        lambda n: {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(n)}},
        100_000,
        24_000,
    ),
    "properties, 1 wrong": (
        lambda n: {"type": "object", "properties": {f"p{i}": {"type": "string" if i else "strin"} for i in range(n)}},
        100_000,
        24_000,
    ),
    "allOf": (lambda n: {"allOf": [{"type": "object"} for _ in range(n)]}, 100_000, 24_000),
    "$anchor": (lambda n: {"$defs": {f"d{i}": {"$anchor": f"a{i}"} for i in range(n)}}, 50_000, 1_000),
    "$id": (lambda n: {"$defs": {f"d{i}": {"$id": f"https://example.com/{i}"} for i in range(n)}}, 20_000, 1_000),
    "patternProperties": (lambda n: {"patternProperties": {f"^p{i}$": {} for i in range(n)}}, 5_000, 256),
    "prefixItems": (lambda n: {"prefixItems": [{"type": "string"} for _ in range(n)]}, 30_000, 24_000),
    "if-then": (
        lambda n: {"allOf": [{"if": {"type": "string"}, "then": {"minLength": 1}} for _ in range(n)]},
        20_000,
        9_000,
    ),
    "enum of arrays": (lambda n: {"enum": [list(range(1_000)) for _ in range(n)]}, 1_000, 45),
    "type list": (lambda n: {"type": ["strin"] * n}, 60_000, 45_000),
}


def _median(schema: dict[str, Any], runs: int) -> tuple[float, str]:
    times, answer = [], ""
    for _ in range(runs):
        contract._schemas.clear()
        start = time.perf_counter()
        answer = contract.schema_problem(schema) or "valid"
        times.append(time.perf_counter() - start)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    contract.schema_problem({"type": "object"})  # the validator class and the meta-schema, once
    print(f"{'shape':<20} {'size':<8} {'values':>8} {'median s':>9}  answer")
    for name, (shape, past, within) in SHAPES.items():
        for size, n in (("past", past), ("within", within)):
            schema = shape(n)
            seconds, answer = _median(schema, runs)
            values = contract.schema_values(schema, 10**9)
            print(f"{name:<20} {size:<8} {values:>8} {seconds:>9.3f}  {answer[:70]}")
    _before_after(SHAPES["properties"][0](SHAPES["properties"][2]), runs)


def _before_after(schema: dict[str, Any], runs: int) -> None:
    """The meta-schema check of one schema, as made now and as jsonschema made it before."""
    from jsonschema import Draft202012Validator

    from ptc_emulator.emulator.rules import metaschema

    formats = contract._validator_class().FORMAT_CHECKER

    def whole() -> None:
        Draft202012Validator.check_schema(schema, format_checker=formats)

    def fast() -> None:
        metaschema.meta_problem(schema)

    medians = {}
    for label, check in (("before: check_schema", whole), ("after: meta_problem", fast)):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            check()
            times.append(time.perf_counter() - start)
        medians[label] = statistics.median(times)
        print(f"{label:<24} {contract.schema_values(schema, 10**9):>8} values {medians[label]:>9.3f} s (median)")
    before, after = medians.values()
    print(f"{'ratio':<24} {before / after:>24.0f}x")


if __name__ == "__main__":
    main()
