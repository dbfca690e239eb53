"""A custom tool's lark grammar is anyone's input: what it may import, how far it may expand, and
its terminals run on RE2.

- **Imports.** lark's `%import` reads `.lark` files from lark's own folder and from paths relative
  to the server's working directory. Only `%import common.NAME` (and `%import common (A, B)`, with
  or without `-> ALIAS`), lark's common terminals, is allowed; any other import is refused when the
  grammar is given, naming it.
- **Size.** lark expands a rule's optional items and repetitions into alternatives before it
  builds its parser: thirty `"a"?` in one rule are 2**30 alternatives, `(("a"~30)~30)~30` one
  alternative of 27,000 symbols, and lark's work on an alternative grows with the square of its
  length. `expanded_size` estimates, from the grammar's tree and without expanding it, each
  rule's alternatives times the square of its longest alternative, summed; a grammar over
  `MAX_EXPANDED_SIZE` is refused at once, before the compile (whose own budget of calls stays the
  backstop: a long chain of small rules is costly in another way).
- **Terminals.** lark matches a terminal's regular expression with Python's backtracking `re`,
  where `/(a|aa)+c/` takes exponential time on `"aaa…ab"`, inside a C call that the parse's budget
  of Python calls cannot end. Every terminal is compiled with RE2 when the grammar is given (one
  RE2 cannot compile is refused, naming it), and the parser's terminal matcher is replaced by one
  that matches with RE2 (linear in the text, no backtracking). lark's common `ESCAPED_STRING` is
  written with a lookbehind; it is matched by its RE2 equivalent. A parse's matches are charged
  their program's size times the bytes they may scan, within `SCAN_BUDGET_FACTOR` times the
  budget of one match (`emulator/patterns.py`).
"""

from __future__ import annotations

import threading
from typing import Any

import re2

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.patterns import match_budget

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPANDED_SIZE",
    "SCAN_BUDGET_FACTOR",
    "ScanTooCostly",
    "Terminals",
    "expanded_size",
    "static_problem",
]

MAX_EXPANDED_SIZE = 250_000
"""The expanded size a grammar may have (`expanded_size`: each rule's alternatives, once lark has
expanded its optional items and repetitions, times the square of its longest alternative). A JSON
grammar is about 100; eleven optional items in one rule 2**11 × 11**2 = 247,808 (170,000 calls to
compile); thirty are 2**30 × 30**2."""

MAX_DEPTH = 200
"""How deep lark's reading of a grammar may be (a group, `( )` or `[ ]`, is two or three levels):
`expanded_size` and lark's compile recurse once per level or more, and 500 nested brackets were a
RecursionError, a 500."""

SCAN_BUDGET_FACTOR = 10
"""A parse's terminal matches may cost this many times one match's budget (`match_budget()`),
counted as each match's program size times the bytes from where it starts to the text's end."""

_ALLOWED_IMPORT = ("common",)
_REPEAT_BREAK = 50  # lark expands `x~n..m` in place below this m, into helper rules from it
_CAP = 1 << 62  # estimates saturate here: an exponent is never computed in full

_LOOKBEHIND_STRING = ".*?(?<!\\\\)(\\\\\\\\)*?"  # lark's common `_STRING_ESC_INNER`, as its regexp reads
_RE2_EQUIVALENTS = {
    quote + _LOOKBEHIND_STRING + quote: quote + "(?:[^" + quote + "\\\\\\n]|\\\\[^\\n])*" + quote
    for quote in ('"', "'")
}
"""Terminals lark's common grammar writes with a lookbehind, and the same language for RE2: a quote,
then characters other than a newline, up to the first quote not escaped by a backslash."""


class ScanTooCostly(Exception):
    """A parse whose terminal matches went past their budget (`SCAN_BUDGET_FACTOR`)."""

    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.budget = budget


def _mul(a: int, b: int) -> int:
    return min(a * b, _CAP)


def _pow(a: int, n: int) -> int:
    if a <= 1:
        return a
    return _CAP if n >= 62 else min(a**n, _CAP)


def _repeats(alternatives: int, length: int, low: int, high: int) -> tuple[int, int, int]:
    """`x~low..high` for an `x` of `alternatives` of at most `length` symbols: the occurrence's
    alternatives and length, and the size of the helper rules lark makes for it."""
    if high >= _REPEAT_BREAK:  # helper rules of at most 10 copies each, about 2 log2(high) of them
        helpers = 2 * high.bit_length()
        each = _mul(_mul(_pow(alternatives, 10), 10), _mul(10 * length, 10 * length))
        return 1, 1, _mul(helpers, each)
    if alternatives <= 1:
        return high - low + 1, high * length, 0
    total = 0
    for n in range(low, high + 1):
        total = min(total + _pow(alternatives, n), _CAP)
    return total, high * length, 0


def expanded_size(tree: Any) -> int:
    """An estimate of the size of the rules lark makes of a grammar's tree (lark's own parse of its
    text): for each rule, its alternatives times the square of its longest one. An expansion's
    alternatives multiply, a choice's add, an optional item adds the empty one, `x~n..m` sums the
    powers (from m = 50 lark makes helper rules of at most 10 copies); `*` and `+` make a new rule
    of their item. Saturates at 2**62."""
    from lark import Token, Tree

    extra = 0

    def walk(node: Any) -> tuple[int, int]:  # (alternatives, symbols in the longest)
        nonlocal extra
        if not isinstance(node, Tree):
            return 1, 1
        kind = node.data
        if kind == "expansions":
            alternatives, length = 0, 0
            for child in node.children:
                a, n = walk(child)
                alternatives, length = min(alternatives + a, _CAP), max(length, n)
            return alternatives, length
        if kind in ("expansion", "alias"):
            alternatives, length = 1, 0
            for child in node.children:
                if isinstance(child, Tree):
                    a, n = walk(child)
                    alternatives, length = _mul(alternatives, a), min(length + n, _CAP)
            return alternatives, max(length, 1)
        if kind == "maybe":
            a, n = walk(node.children[0])
            return min(a + 1, _CAP), n
        if kind == "expr":
            a, n = walk(node.children[0])
            op = [str(child) for child in node.children[1:] if isinstance(child, Token)]
            if op[:1] == ["?"]:
                return min(a + 1, _CAP), n
            if op[:1] in (["*"], ["+"]):
                extra = min(extra + _mul(_mul(a, 2), _mul(n + 1, n + 1)), _CAP)  # the new rule: x | rule x
                return (2 if op[0] == "*" else 1), 1
            if op[:1] == ["~"]:
                bounds = [int(x) for x in op[1:3] if x.isdigit()]
                low, high = (bounds + bounds)[:2] if bounds else (1, 1)
                a, n, helpers = _repeats(a, n, low, max(low, high))
                extra = min(extra + helpers, _CAP)
                return a, n
            return a, n
        return 1, 1

    total = 0
    for definition in tree.children:
        if isinstance(definition, Tree) and definition.data in ("rule", "term"):
            for part in definition.children:
                if isinstance(part, Tree) and part.data == "expansions":
                    a, n = walk(part)
                    total = min(total + _mul(a, _mul(n, n)), _CAP)
    return min(total + extra, _CAP)


def _import_problem(tree: Any) -> str | None:
    """The first `%import` other than lark's common terminals, as written, or None."""
    from lark import Token, Tree

    for statement in tree.find_data("import"):
        path_node = statement.children[0]
        names = [str(child) for child in path_node.children if isinstance(child, Token)]
        listed = any(isinstance(child, Tree) and child.data == "name_list" for child in statement.children[1:])
        module = tuple(names if listed else names[:-1])
        if path_node.data != "import_lib" or module != _ALLOWED_IMPORT:
            return ("." if path_node.data == "import_rel" else "") + ".".join(names)
    return None


def _depth(tree: Any) -> int:
    """How deep `tree` is, found without recursion (stopping once past `MAX_DEPTH`)."""
    from lark import Tree

    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        for child in node.children:  # a loop, not a generator: no call counted against the compile's budget
            if isinstance(child, Tree):
                stack.append((child, depth + 1))
    return deepest


def static_problem(definition: str) -> str | None:
    """Why the grammar is refused before lark compiles it (an import, or its expanded size), or
    None; a grammar lark cannot even read is left to lark's compile to report."""
    from lark.exceptions import LarkError
    from lark.load_grammar import _get_parser

    try:
        tree = _get_parser().parse(definition + "\n", "start")  # type: ignore[no-untyped-call]
    except LarkError:
        return None
    if _depth(tree) > MAX_DEPTH:
        return messages.lark_grammar_too_deep(MAX_DEPTH)
    refused = _import_problem(tree)
    if refused is not None:
        return messages.lark_import_refused(refused)
    size = expanded_size(tree)
    if size > MAX_EXPANDED_SIZE:
        return messages.lark_grammar_too_large(size, MAX_EXPANDED_SIZE)
    return None


class _Match:
    """What lark's Earley scanner reads of a match: its text and where it ends."""

    __slots__ = ("_end", "_text")

    def __init__(self, text: str, end: int) -> None:
        self._text = text
        self._end = end

    def group(self, index: int = 0) -> str:
        return self._text

    def end(self, index: int = 0) -> int:
        return self._end


class Terminals:
    """A compiled grammar's terminals matched with RE2, in place of lark's `re` matcher.

    The text is encoded once per parse (per thread: one compiled grammar may parse in several
    workers at once), and character positions are turned into byte offsets by walking from the
    last one (the scanner's positions only grow), so a match costs what RE2 scans, not the text."""

    def __init__(self, terminals: Any) -> None:
        self._regexps: dict[str, tuple[Any, int]] = {}
        for terminal in terminals:
            pattern = terminal.pattern.to_regexp()
            pattern = _RE2_EQUIVALENTS.get(pattern, pattern)
            options = re2.Options()
            options.log_errors = False
            options.max_mem = 8 * 2**20
            try:
                compiled = re2.compile(pattern, options=options)
            except re2.error as e:
                reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
                name = terminal.name if not terminal.name.startswith("__") else f"/{terminal.pattern.value}/"
                raise ValueError(messages.lark_terminal_not_re2(name, reason)) from e
            size = max(int(compiled.programsize), int(compiled.reverseprogramsize))
            self._regexps[terminal.name] = (compiled._regexp, size)
        self._local = threading.local()

    def begin(self, text: str) -> None:
        """Bind a parse's text: encoded once, nothing charged yet."""
        local = self._local
        local.text = text
        local.data = text.encode("utf-8", "surrogatepass")
        local.ascii = len(local.data) == len(text)
        local.char, local.byte = 0, 0
        local.left = SCAN_BUDGET_FACTOR * match_budget()

    def _offset(self, index: int) -> int:
        local = self._local
        if local.ascii:
            return index
        if index < local.char:
            local.char, local.byte = 0, 0
        local.byte += re2._re2.CharLenToBytes(local.data, local.byte, index - local.char)
        local.char = index
        return int(local.byte)

    def match(self, term: Any, text: str, index: int = 0) -> _Match | None:
        local = self._local
        if getattr(local, "text", None) is not text:
            self.begin(text)  # lark's complete lexer matches slices of a token: bound afresh
        regexp, size = self._regexps[term.name]
        start = self._offset(index)
        data = local.data
        local.left -= size * (len(data) - start)
        if local.left < 0:
            raise ScanTooCostly(SCAN_BUDGET_FACTOR * match_budget())
        span = regexp.Match(re2._Anchor.ANCHOR_START, data, start, len(data))[0]
        if span == re2._NULL_SPAN:
            return None
        end = span[1] if local.ascii else index + re2._re2.BytesToCharLen(data, start, span[1])
        return _Match(text[index:end], end)


def use_re2(parser: Any) -> Terminals:
    """Make a compiled `Lark` (Earley, dynamic lexer: the default) match its terminals with RE2.
    Raises ValueError naming a terminal RE2 cannot compile."""
    terminals = Terminals(parser.terminals)
    parser.parser.parser.term_matcher = terminals.match
    return terminals
