"""User-given regular expressions, run by RE2: linear time in the text, whatever the pattern.

A scenario's matchers (`match.input`, `match.model`, the `match.*` of instructions, history and
outputs) and the hosted tools' `code_interpreter.code` and `shell.command` come from whoever can
add a scenario. Python's
backtracking engine takes exponential time on patterns such as `^(a+)+$`, long enough to freeze
the server; RE2 never backtracks. It has no backreferences or lookaround: a pattern that needs
them is refused when the scenario is added, naming the field.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

from ptc_emulator.emulator.caches import PROCESS, Memo

__all__ = ["MAX_PATTERN_CHARS", "PatternError", "compile_pattern"]

MAX_PATTERN_CHARS = 4096
_MAX_MEM = 8 * 2**20  # RE2's own bound on a compiled program


class PatternError(ValueError):
    pass


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """A compiled RE2 pattern (`search`, `fullmatch`, `groupdict` as in `re`), or `PatternError`."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"longer than {MAX_PATTERN_CHARS} characters")
    try:
        return re2.compile(pattern, options=_options())
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise PatternError(f"{reason} (patterns run on RE2: no backreferences or lookaround)") from e


PROCESS.add("compiled patterns", Memo(compile_pattern))
