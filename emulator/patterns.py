"""User-given regular expressions, run by RE2, with a bound on what one match may cost.

A scenario's matchers (`match.input`, `match.model`, the `match.*` of instructions, history and
outputs), the hosted tools' `code_interpreter.code` and `shell.command`, and a tool schema's
`pattern` and `patternProperties` come from whoever can add a scenario or send a request. Python's
backtracking engine takes exponential time on patterns such as `^(a+)+$`, long enough to freeze
the server; RE2 never backtracks. It has no backreferences or lookaround: a pattern that needs
them is refused when it is given, naming the field.

RE2 is linear in the text, but not free of the pattern: its fast matcher (a lazily built DFA) has
a memory budget (`_MAX_MEM`), and a pattern whose states overflow it (counted repetition such as
`((a|a)+){1,1000}`, or `(a|b)*a(a|b){20}`) falls back to a simulation that costs up to the
compiled program's size per byte of text (6 to 8 ns per instruction and byte measured:
`bench/patterns.py`). Both factors are bounded:

- a pattern that compiles to more than `MAX_PROGRAM_SIZE` instructions is refused when given,
  compiled first within `_PROBE_MEM` so that RE2 stops building one far larger (the refusal kept);
- a match whose program size times the text's length in UTF-8 bytes exceeds its budget raises
  `PatternTooCostly` instead of running, which each caller turns into its own clear refusal
  naming the field. The budget depends on where the match runs: on the event loop
  `MATCH_BUDGET` (at most about 8 ms, so no other client waits longer); in a worker thread (a
  request holding a long text is read off the loop, `Engine.off_loop`), where RE2 releases the
  interpreter and only the request itself waits, `OFF_LOOP_MATCH_BUDGET` (about 2 s at worst;
  a pattern the fast matcher keeps, the usual case, takes a few ms on a megabyte);
- the matches of one request (a scenario registry's `match`, a hosted call's entries) together
  stay within one such budget (`metered`): `MATCH_BUDGET` on the event loop, so the request's
  matching holds it a few ms at most, `OFF_LOOP_MATCH_BUDGET` in a worker thread. The callers
  move their matching to a worker thread when its patterns' instructions times the texts' bytes
  may pass `MATCH_BUDGET` (`Engine.attempt_off_loop`, `Hosted`'s calls), and past the budget the
  match raises `MatchingTooCostly`, which each turns into its own 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any

import re2

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import PROCESS, Memo

__all__ = [
    "MATCH_BUDGET",
    "OFF_LOOP_MATCH_BUDGET",
    "MAX_PATTERN_CHARS",
    "MAX_GRAMMAR_PROGRAM_SIZE",
    "MAX_PROGRAM_SIZE",
    "MAX_PROPERTY_CLASSES",
    "MatchingTooCostly",
    "Meter",
    "Pattern",
    "PatternError",
    "PatternTooCostly",
    "compile_grammar",
    "compile_pattern",
    "group_names",
    "match_budget",
    "metered",
    "spend",
]

MAX_PATTERN_CHARS = 4096
MAX_PROGRAM_SIZE = 5000
"""RE2 instructions a pattern may compile to (a 4096-character case-insensitive literal is about 4100)."""
MATCH_BUDGET = 1_000_000
"""Program size times text bytes one match on the event loop may cost: a 10-instruction pattern
matches 100,000 bytes."""
OFF_LOOP_MATCH_BUDGET = 300_000_000
"""The same, for a match in a worker thread: a 20-instruction pattern matches 15 MB."""
_MAX_MEM = 8 * 2**20  # RE2's own bound on a compiled program and its DFA
MAX_PROPERTY_CLASSES = 16
"""Unicode property classes (`\\pL`, `\\P{Greek}`, ...) one pattern or regex grammar may name. RE2
builds each as a set of ranges (`\\PL` is some 1,200 of them, folded again under `(?i)`): 0.1 to 0.2
ms of compile each, and RE2's compile holds the interpreter even in a worker thread, so the
5000-instruction bound did not bound it (`(?i)(?:\\PL|\\PL|...)`, 4,087 characters and 1,214
instructions, compiled in 0.2 to 0.3 s). Counted in the text before any compile (a `\\p` inside
`\\Q...\\E` too); with this many, the costliest accepted pattern compiles in a few ms
(`bench/pattern_compile.py`)."""
MAX_GRAMMAR_PROGRAM_SIZE = 20_000
"""RE2 instructions a custom tool's regex grammar may compile to (`compile_grammar`): more than a
matcher's `MAX_PROGRAM_SIZE`, since a grammar spells a whole input, and compiled within a memory
bound of its size so that RE2 stops building one far larger (compiled within `_MAX_MEM`,
`(?i)[\\pL\\pN\\pP]{300}` was built to 432,000 instructions in 0.3 s)."""


class PatternError(ValueError):
    pass


class PatternTooCostly(Exception):
    """A match refused before it runs: `instructions` × `length` (bytes) is over `MATCH_BUDGET`."""

    def __init__(self, pattern: str, instructions: int, length: int, budget: int = MATCH_BUDGET) -> None:
        super().__init__(pattern, instructions, length, budget)
        self.pattern = pattern
        self.instructions = instructions
        self.length = length
        self.budget = budget


class MatchingTooCostly(PatternTooCostly):
    """A match refused because the matches of one request (`metered`) would together cost more
    than its `budget`: `spent` is what they cost before this one."""

    def __init__(self, pattern: str, instructions: int, length: int, budget: int, spent: int) -> None:
        super().__init__(pattern, instructions, length, budget)
        self.spent = spent


class Meter:
    """What the matches inside `metered` have cost together (instructions × bytes), and may."""

    __slots__ = ("budget", "spent")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.spent = 0


_meter: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("pattern_meter", default=None)


@contextlib.contextmanager
def metered(budget: int | None = None) -> Iterator[Meter]:
    """The matches inside cost `budget` at most together (`match_budget()` when not given: a match
    on the event loop has `MATCH_BUDGET` for all of a request's matches, one in a worker thread
    `OFF_LOOP_MATCH_BUDGET`); the one that would pass it raises `MatchingTooCostly` instead of
    running. Inside a meter already running, that one counts."""
    running = _meter.get()
    if running is not None:
        yield running
        return
    meter = Meter(match_budget() if budget is None else budget)
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def spend(units: int, what: str) -> None:
    """Count `units` of work that is not an RE2 match (`match.outputs`' JSON comparisons, in the
    units of a match: about 8 ns each) against the running meter, as a match is: past its budget,
    `MatchingTooCostly` (`what` in place of a pattern) and the work is not done. Outside a meter,
    against `match_budget()` alone."""
    meter = _meter.get()
    if meter is None:
        budget = match_budget()
        if units > budget:
            raise PatternTooCostly(what, units, 1, budget)
        return
    if meter.spent + units > meter.budget:
        raise MatchingTooCostly(what, units, 1, meter.budget, meter.spent)
    meter.spent += units


def match_budget() -> int:
    """What a match may cost here: `MATCH_BUDGET` on an event loop's thread, more in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return OFF_LOOP_MATCH_BUDGET
    return MATCH_BUDGET


def _options(memory: int = _MAX_MEM) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = memory
    return options


def _length(text: str) -> int:
    """The text's length in UTF-8 bytes, what RE2 steps through (`isascii` is constant time)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class Pattern:
    """A compiled pattern whose `search` and `fullmatch` (as in `re`) refuse a text too long for
    the program's size (`PatternTooCostly`) before running. `regexp` compiled within less memory
    than `_MAX_MEM` (`full=False`: the size check's) gives the size; the pattern is compiled again
    within `_MAX_MEM`, for its fast matcher, when it first matches."""

    __slots__ = ("_regexp", "pattern", "size")

    def __init__(self, pattern: str, regexp: Any, *, full: bool = True) -> None:
        self.pattern = pattern
        self._regexp = regexp if full else None
        self.size = max(int(regexp.programsize), int(regexp.reverseprogramsize))

    def _matcher(self) -> Any:
        regexp = self._regexp
        if regexp is None:  # two threads may both compile it: the same program either way
            regexp = self._regexp = re2.compile(self.pattern, options=_options())
        return regexp

    def ready(self) -> Pattern:
        """The pattern with its fast matcher built now: what keeps it (a scenario, a hosted entry)
        compiles it once, as it is added (in a worker thread), and never at a match, whatever
        another client does to the shared cache of `compile_pattern`."""
        self._matcher()
        return self

    def _check(self, text: str) -> None:
        meter = _meter.get()
        if meter is None and self.size * len(text) * 4 <= MATCH_BUDGET:
            return  # within even at 4 bytes a character: no need to count
        length = _length(text)
        budget = match_budget()
        if self.size * length > budget:
            raise PatternTooCostly(self.pattern, self.size, length, budget)
        if meter is not None:
            if meter.spent + self.size * length > meter.budget:
                raise MatchingTooCostly(self.pattern, self.size, length, meter.budget, meter.spent)
            meter.spent += self.size * length

    def search(self, text: str) -> Any:
        self._check(text)
        return self._matcher().search(text)

    def fullmatch(self, text: str) -> Any:
        self._check(text)
        return self._matcher().fullmatch(text)


def property_classes(pattern: str) -> int:
    """How many Unicode property classes (`\\p`, `\\P`) the pattern names: a scan of its text, no compile."""
    count = 0
    at = pattern.find("\\")
    while 0 <= at < len(pattern) - 1:
        if pattern[at + 1] in "pP":
            count += 1
        at = pattern.find("\\", at + 2)
    return count


def group_names(pattern: str) -> list[str]:
    """The names of the pattern's named groups (`(?P<name>...)`, `(?<name>...)`), in order, one
    given twice twice: a scan of its text that skips escapes, `\\Q...\\E` and character classes.
    RE2 accepts a name given twice (`(?P<x>a)|(?P<x>b)`) and its `groupindex` keeps the first
    only, so this is what tells it."""
    names: list[str] = []
    at, end = 0, len(pattern)
    while at < end:
        char = pattern[at]
        if char == "\\":
            if pattern.startswith("Q", at + 1):
                close = pattern.find("\\E", at + 2)
                at = end if close < 0 else close + 2
            else:
                at += 2
        elif char == "[":
            at = _class_end(pattern, at)
        elif char == "(" and pattern.startswith("?", at + 1):
            start = at + 4 if pattern.startswith("P<", at + 2) else at + 3 if pattern.startswith("<", at + 2) else -1
            close = pattern.find(">", start) if start > 0 else -1
            if close > 0:
                names.append(pattern[start:close])
                at = close + 1
            else:
                at += 2
        else:
            at += 1
    return names


def _class_end(pattern: str, at: int) -> int:
    """Where the character class opening at `at` ends (past its `]`): a `]` first in it is a
    member, as are escapes and `[:alpha:]`."""
    at += 1
    if pattern.startswith("^", at):
        at += 1
    if pattern.startswith("]", at):
        at += 1
    end = len(pattern)
    while at < end:
        char = pattern[at]
        if char == "\\":
            at += 2
        elif char == "[" and pattern.startswith(":", at + 1):
            close = pattern.find(":]", at + 2)
            at = at + 1 if close < 0 else close + 2
        elif char == "]":
            return at + 1
        else:
            at += 1
    return end


def _costly_to_compile(pattern: str) -> str | None:
    """Why compiling the pattern may cost more than a few ms (`MAX_PATTERN_CHARS`,
    `MAX_PROPERTY_CLASSES`), None when it may not: told from its text before any compile."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    count = property_classes(pattern)
    if count > MAX_PROPERTY_CLASSES:
        return messages.pattern_too_many_property_classes(count, MAX_PROPERTY_CLASSES)
    return None


def compile_grammar(definition: str) -> Pattern:
    """A custom tool's regex grammar, bounded before its compile as every pattern is (its length,
    its property classes), then compiled within a memory bound for `MAX_GRAMMAR_PROGRAM_SIZE`
    instructions (and again within `_MAX_MEM` when it first matches); its matches are bounded as
    every pattern's are. Raises `PatternError` (too costly) or `re2.error` (not RE2's syntax)."""
    why = _costly_to_compile(definition)
    if why is not None:
        raise PatternError(why)
    try:
        regexp = re2.compile(definition, options=_options(64 * MAX_GRAMMAR_PROGRAM_SIZE))
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        if reason == _TOO_LARGE:
            raise PatternError(messages.grammar_too_large(MAX_GRAMMAR_PROGRAM_SIZE)) from None
        raise
    compiled = Pattern(definition, regexp, full=False)
    if compiled.size > MAX_GRAMMAR_PROGRAM_SIZE or compiled.size < 0:
        raise PatternError(messages.grammar_too_large(MAX_GRAMMAR_PROGRAM_SIZE))
    return compiled


_PROBE_MEM = 64 * MAX_PROGRAM_SIZE
"""RE2's memory bound for the first compile of a user-given pattern: room for `MAX_PROGRAM_SIZE`
instructions and more (RE2 takes 24 to 32 bytes of it an instruction, measured), where the compile
of a program too large stops as it outgrows it. Compiled within `_MAX_MEM` at once,
`(?i)[\\pL\\pN\\pP]{300}` was built to its 432,000 instructions (0.3 s, the interpreter held) before
its size was refused; within this bound it stops in 2 ms."""

_TOO_LARGE = "pattern too large - compile failed"


def compile_pattern(pattern: str) -> Pattern:
    """A compiled RE2 pattern, or `PatternError` (too long, too large a program, or not RE2's
    syntax). Both are kept (at most 512 patterns): a pattern refused once is refused again at no
    cost. A pattern is compiled within `_PROBE_MEM`, so one too large a program is refused before
    RE2 builds all of it; one that fits is compiled again within `_MAX_MEM`, the memory its fast
    matcher works in, when it first matches (a schema's pattern checked and never matched is
    compiled once)."""
    compiled = _compiled(pattern)
    if isinstance(compiled, PatternError):
        raise PatternError(*compiled.args)
    return compiled


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Pattern | PatternError:
    why = _costly_to_compile(pattern)
    if why is not None:
        return PatternError(why)
    too_large = PatternError(
        f"compiles to more than {MAX_PROGRAM_SIZE} RE2 instructions "
        "(counted repetition such as {1,1000} multiplies the pattern)"
    )
    try:
        regexp = re2.compile(pattern, options=_options(_PROBE_MEM))
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        if reason == _TOO_LARGE:
            return too_large
        return PatternError(f"{reason} (patterns run on RE2: no backreferences or lookaround)")
    compiled = Pattern(pattern, regexp, full=False)
    if compiled.size > MAX_PROGRAM_SIZE:
        return PatternError(
            f"compiles to {compiled.size} RE2 instructions, more than {MAX_PROGRAM_SIZE} "
            "(counted repetition such as {1,1000} multiplies the pattern)"
        )
    if compiled.size < 0:
        return too_large
    return compiled


PROCESS.add("compiled patterns", Memo(_compiled))
