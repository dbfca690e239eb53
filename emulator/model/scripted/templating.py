"""Jinja rendering for scenario templates, bounded in time, work and output.

Templates come from whoever can add a scenario. Jinja's sandbox stops attribute tricks but not
work: nested `range(100000)` loops, `'x' * 10**9`, or a loop over a long input. Here:

* a template is at most `MAX_TEMPLATE_CHARS` long (`MAX_TEMPLATE_SYNTAX_CHARS` if it has template
  syntax) with at most `MAX_TEMPLATE_TAGS` tags, and
  compiles to at most `MAX_TEMPLATE_CODE` characters of code (lexing and Python's `compile()` are
  single C calls that hold the interpreter, so every client, even from a worker thread); a text
  with no template syntax is a literal (`is_literal`), answered as it is, never lexed, and so is
  a text whose only syntax keeps a recorded text literal (raw blocks, `{{ '{' }}`: data, not tags);
* every other template is compiled when its scenario is added (`check`, `check_renders`), and kept
  compiled by weight for its requests (`compiled`), so a syntax error (Jinja's or Python's) is a
  400 naming the field then; `include`, `import` and `extends` are refused (there is no loader), and
  so is an expression of constants that can only fail (`{{ 1/0 }}`, `range(10**6)`,
  `'x' * 10**9`): it would fail on every request; so is a template that reads no name a request
  gives and fails when rendered then (`check_renders`: its render is the same at every request);
* rendering counts the lines the compiled template executes and stops at `MAX_STEPS` or after
  `MAX_SECONDS`, whichever comes first (`RenderLimit`); the accounting below, which runs in this
  module's frames where the trace does not look at the clock, looks at it every `_TICK` values it
  walks; a template nested past Python's recursion limit is refused as nested too deeply;
* `range` is capped, and string or list repetition and `**` are bounded before they run;
* no single operation may build more than `MAX_VALUE_CHARS`, and a render no more than
  `MAX_BUILT_CHARS` in all, checked before the operation runs: concatenation (`~`, `+`), `%`
  formatting and `str.format` (widths, and the values they print), the string methods and
  filters that build strings (`replace`, `join`, `translate`, `center`, `ljust`, `rjust`,
  `zfill`, `expandtabs`, `indent`, `format`, `wordwrap` with its `wrapstring`, `urlize` with its
  `target`, `escape`, `xmlattr`, the case filters), every printing of a value that is no string
  (`{{ value }}` through `finalize`, `~`, `string`, `tojson`, `pprint`, `urlencode`, the filters
  and tests that work on `str(value)`: its printed size is counted on the value, a list held
  twice counted twice, before it is printed), the join of what a block captures (`concat`),
  `batch` and `slice` by the items they fill in and the lists they make, `split` by a new
  string per piece, a list of a string's characters (`list`, `sort`, `batch`, ...) by an entry
  each (and an object each beyond Latin-1), `sum` of sequences (concatenated once, not copied at
  each item), and integer `*` and `**` by the bits of their result. A printed string counts its
  escapes where it is printed with them: `repr` inside a list, `%r`, `!a`, `tojson` (`\u00e9`),
  `urlencode` (`%C3%A9`); `pprint` is stopped as it writes. A line is one step, but one step
  could otherwise build gigabytes inside a single C call (`s.replace('x', 'y' * 3000)` on a
  long `s`), out of reach of the step and time bounds;
* the filters that work through a text inside one C call (`title`, `wordcount`, `striptags`,
  `urlize`, `wordwrap`, `pprint`) take at most `MAX_SCAN_CHARS`: the interpreter is held for
  the call, so the event loop too, even with the render in a worker thread; `wordwrap` makes at
  most `MAX_WRAP_LINES`;
* every method of a built-in value a template may call is on an audited list (`_METHODS`), its
  cost bounded before it runs; any other is refused. `encode` and `decode` take only linear codecs
  and error handlers (`_CODECS`, `_CODEC_ERRORS`: `punycode` is quadratic, 80,000 characters took
  18 s inside one C call), refused when the scenario is added if the codec is written in the
  template; `strip` given the characters to strip (and the `trim` filter) does at most
  `MAX_STRIP_WORK`, a reverse search (`rfind`, `rindex`, `rpartition`, `rsplit`) at most
  `MAX_SEARCH_WORK` (Python searches backwards by trying the needle at each place; forwards it
  searches in linear time); `dict.fromkeys` and `str.maketrans` (a static method, known by its
  name: it has no owner) count an entry per item they are given; what `encode`, the case methods
  and `bytes.hex` build is counted first; `round` rounds to at most `MAX_ROUND_DIGITS` either way
  (Python and Jinja compute `10**precision`), and the `sum` filter of numbers works through at most
  `MAX_SUM_WORK` digits;
* a comparison (`==`, `in`, the comparing tests and filters, `count`, `index`, `dict()`,
  `dict.fromkeys`, a dict's keys) of a list, tuple or dict holding more than `MAX_COMPARED`
  characters, counted as a tree, is refused: a string counts its length, an integer its 30-bit
  digits (`_int_size`: comparing or hashing one touches each), and an iterator a filter hands on
  is listed first so its items are counted;
* the output is capped at `MAX_OUTPUT_CHARS`;
* `render_off_loop` renders in a worker thread, so a template that runs to its bounds delays
  only its own request, never the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import pprint
import re
import string
import sys
import threading
import time
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from types import FrameType
from typing import Any

from jinja2 import Template, TemplateError, Undefined, meta, nodes
from jinja2.compiler import CodeGenerator, Frame, operators
from jinja2.defaults import DEFAULT_NAMESPACE
from jinja2.filters import FILTERS as DEFAULT_FILTERS
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import PROCESS, Memo, Weighed

__all__ = [
    "MAX_BUILT_CHARS",
    "MAX_OUTPUT_CHARS",
    "MAX_VALUE_CHARS",
    "MAX_SECONDS",
    "MAX_STEPS",
    "GLOBAL_NAMES",
    "BoundedEnvironment",
    "RenderLimit",
    "check",
    "check_renders",
    "checking",
    "compiled",
    "is_literal",
    "literal",
    "needs_thread",
    "render",
    "render_off_loop",
]

MAX_STEPS = 200_000
MAX_CALLS = 200_000
"""The Python calls a render may make (a filter's, a method's, each item a filter's generator
hands on): a filter chain on one line (`|map('upper')|select|list` on a million items) runs no
template line while it works, out of reach of `MAX_STEPS`."""
MAX_SECONDS = 0.5
MAX_OUTPUT_CHARS = 1_000_000
MAX_RANGE = 10_000
MAX_REPEAT_CHARS = 100_000
MAX_VALUE_CHARS = MAX_OUTPUT_CHARS
MAX_SCAN_CHARS = 50_000
"""The longest text (or printed value) a filter or method that works through it inside one C call
with the interpreter held may take (`title`, `wordcount`, `striptags`, `urlize`, `wordwrap`,
`pprint`): about 10 ms at most each, and no other request is answered meanwhile, even with the
render in a worker thread."""
"""The longest string (or list) one operation of a template may build."""
MAX_WRAP_LINES = 20_000
"""The most lines `wordwrap` may make (counted as twice the text's length over the width, and a
line per paragraph): Python wraps a line at a time in one loop, `wordwrap(1)` of 50,000 characters
took 0.4 s."""
MAX_BUILT_CHARS = 16 * MAX_OUTPUT_CHARS
"""What all of a render's bounded operations may build together."""
MAX_INT_BITS = 65_536
"""The largest integer `*` or `**` may make, or a filter or method (`int`, `from_bytes`)."""
MAX_TREE = MAX_VALUE_CHARS
"""The most values one list, tuple or dict a template builds may hold, counted as a tree (a list
held twice counts twice): comparing, hashing or printing a value walks it as a tree, inside one C
call, and a list of a list held twice, sixty times over, is a tree of 2**60 values."""
MAX_COMPARED = MAX_BUILT_CHARS
"""The most characters a list, tuple or dict compared (`==`, `<`, `in`, the tests and filters that
compare, `count`, `index`, `dict()`) may hold, counted as a tree: Python compares two containers in
one C call, so `l == m` of 100,000 entries each a distinct copy of the same 500,000 characters held
the interpreter (and so the event loop) for 4.5 s. An integer counts its 30-bit digits (`_int_size`):
`m.count(c)` of 900,000 integers of 61,440 bits held it 1.3 s."""

_TEXTS = (str, bytes, bytearray)
"""What the string methods' bounds cover: `str`, and `bytes` (`'x'.encode()`, `(1).to_bytes(n)`)."""


GLOBAL_NAMES = frozenset(DEFAULT_NAMESPACE)
"""Jinja's own globals (`range`, `dict`, `lipsum`, `cycler`, `joiner`, `namespace`), whether or not
`BoundedEnvironment` keeps them: no capture may be named as one (`scenario.RESERVED_NAMES`)."""


class RenderLimit(TemplateError):
    pass


class RenderTimeout(RenderLimit):
    """The time bound (`MAX_SECONDS`): unlike the others, it depends on how busy the machine is."""


def _clock() -> float:
    """The clock a render's deadline (`MAX_SECONDS`) is kept by (a test may put its own in place)."""
    return time.monotonic()


_TICK = 4096
"""How many values the accounting below (`_walked`, `_printed_size`, a sum's items) works through
between two looks at the render's deadline: it runs in this module's frames, which the trace does
not count, and a walk of a million values takes a second."""


def _on_time() -> None:
    """Refuse (`RenderLimit`) to go on once the running render is past its deadline."""
    budget = getattr(_built, "budget", None)
    if budget is not None and _clock() > budget.deadline:
        raise RenderTimeout(f"the template ran longer than {MAX_SECONDS:g} s")


def _int_size(value: int) -> int:
    """What comparing, hashing or adding an integer works through: its 30-bit digits (a 61,440-bit
    integer is 2,049 of them, touched one by one), counted as characters."""
    return value.bit_length() // 30 + 1


def _bounded_range(*args: Any) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise RenderLimit(f"range() of more than {MAX_RANGE} items")
    return r


_built = threading.local()
"""The running render's budget of built characters (renders run one per thread)."""


def _over(size: int) -> None:
    """Refuse an operation that would build `size` characters (or items), over `MAX_VALUE_CHARS`."""
    if size > MAX_VALUE_CHARS:
        raise RenderLimit(f"an operation that builds more than {MAX_VALUE_CHARS} characters")


def _building(size: int) -> None:
    """Account for an operation about to build `size` characters (or items); refuse it first if
    it is over a bound."""
    _over(size)
    budget = getattr(_built, "budget", None)
    if budget is not None:
        budget.built += max(size, 0)
        if budget.built > MAX_BUILT_CHARS:
            raise RenderLimit(f"the template built more than {MAX_BUILT_CHARS} characters")


def _charge(size: int) -> None:
    """Count `size` more characters (or bytes of objects) against the render's budget."""
    budget = getattr(_built, "budget", None)
    if budget is not None:
        budget.built += max(size, 0)
        if budget.built > MAX_BUILT_CHARS:
            raise RenderLimit(f"the template built more than {MAX_BUILT_CHARS} characters")


_OBJECT = 64
"""What a new object a filter or method makes costs (a short string, a list): its header."""


def _objects(entries: int, objects: int = 0, chars: int = 0) -> None:
    """Account for an operation about to build `entries` list entries (eight each), `objects` new
    objects (`_OBJECT` each) and `chars` characters; refuse it first if it is over a bound."""
    _building(8 * entries + chars)
    _charge(_OBJECT * objects)


def _string_items(text: str) -> None:
    """Account for a list of `text`'s characters (`list`, `sort`, `batch` of a string): an entry
    each, and a new object for each character beyond Latin-1 (those up to it are shared)."""
    others = 0 if text.isascii() else len(text) - len(text.encode("latin-1", "ignore"))
    _objects(len(text), others)


def _scanned(operation: str, size: int) -> None:
    """Refuse an operation that works through more than `MAX_SCAN_CHARS` inside one C call
    (a regular expression over a text, a new object per item): it holds the interpreter for as
    long, and so every other request, even from its worker thread."""
    if size > MAX_SCAN_CHARS:
        raise RenderLimit(f"{operation} on more than {MAX_SCAN_CHARS} characters")


_CONTROLS = bytes(range(32)) + b"\x7f"
"""The ASCII characters `repr` writes as an escape (`\\n`, `\\x01`), and JSON too (but `\\x7f`)."""
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _ascii_part(text: str) -> tuple[bytes, int]:
    """`text`'s ASCII characters (a transient copy, made in one fast pass), and how many others it has."""
    if text.isascii():
        return text.encode("ascii"), 0
    kept = text.encode("ascii", "ignore")
    return kept, len(text) - len(kept)


def _repr_size(text: str, ascii_only: bool = False) -> int:
    """At most how long `repr(text)` is (`ascii(text)` if `ascii_only`), counted without making it:
    a quote or a backslash takes two characters, a control character four, a character that is
    not printable (or, for `ascii`, any one that is not ASCII) up to ten (`\\U000e0001`)."""
    if (text.isascii() or not ascii_only) and text.isprintable():
        return len(text) + 2 + text.count("\\") + text.count("'")
    kept, others = _ascii_part(text)
    controls = len(kept) - len(kept.translate(None, _CONTROLS))
    wide = others
    if others and not ascii_only and len(text) <= MAX_SCAN_CHARS and _ASCII_CONTROL.sub("", text).isprintable():
        wide = 0  # only ASCII control characters are escaped (looked for in a text up to `MAX_SCAN_CHARS`)
    return len(text) + 2 + kept.count(b"\\") + kept.count(b"'") + 3 * controls + 9 * wide


def _json_text_size(text: str, ascii_only: bool = True, html: bool = False) -> int:
    """At most how long `json.dumps(text)` is: a quote or backslash takes two characters, a control
    character six (`\\u0001`), a character that is not ASCII six (`\\u00e9`), twelve beyond the
    first plane (a surrogate pair), when `ascii_only`; with `html` (`tojson`), `<`, `>`, `&` and
    `'` six each (`\\u003c`)."""
    kept, others = _ascii_part(text)
    size = len(text) + 2 + kept.count(b'"') + kept.count(b"\\")
    size += 5 * (len(kept) - len(kept.translate(None, _CONTROLS[:32])))
    if html:
        size += 5 * (kept.count(b"<") + kept.count(b">") + kept.count(b"&") + kept.count(b"'"))
    if ascii_only and others:
        units = len(text.encode("utf-16-le", "surrogatepass")) // 2
        size += 5 * others + 6 * (units - len(text))
    return size


def _url_text_size(text: str) -> int:
    """At most how long `urlencode` makes `text`: each of its UTF-8 bytes may become `%XX`."""
    return 3 * (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))


def _printed_size(
    value: Any,
    limit: int = MAX_VALUE_CHARS,
    text: Callable[[str], int] | None = None,
    per_entry: int = 2,
    pad: int = 0,
) -> int:
    """About how many characters `str`, `tojson` or `pprint` of `value` take, counted as a tree
    (a list held twice counts twice, as it prints twice), refused (`RenderLimit`) as soon as the
    count passes `limit`: the walk costs no more than the bound, whatever `value` holds. A string
    inside prints as `text` counts it (its `repr` by default: escapes counted); `per_entry` is
    what each entry adds (a separator), and `pad` more for each level it is nested at (an indent
    of that width on a line of its own: `tojson(indent=...)`)."""
    size_of = _repr_size if text is None else text
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        current, depth = stack.pop()
        seen += 1
        if not seen % _TICK:
            _on_time()
        entry = per_entry + pad * (depth + 1)
        if isinstance(current, str):
            total += size_of(current)
        elif isinstance(current, bool) or current is None:
            total += 5
        elif isinstance(current, int):
            total += current.bit_length() // 3 + 2
        elif isinstance(current, float):
            total += 24  # `-2.2250738585072014e-308`
        elif isinstance(current, bytes | bytearray):
            total += 4 * len(current) + 14  # `bytearray(b'\x01')`
        elif isinstance(current, list | tuple | set | frozenset):
            total += 2 + pad * depth + entry * len(current)
            if total <= limit:
                stack.extend([(v, depth + 1) for v in current])  # one call, not one per item
        elif isinstance(current, dict | Mapping):
            total += 2 + pad * depth + (entry + 2) * len(current)
            if total <= limit:
                stack.extend([(k, depth + 1) for k in current.keys()])
                stack.extend([(v, depth + 1) for v in current.values()])
        elif isinstance(current, Namespace):  # prints `<Namespace {...}>`, its attributes in full
            stack.append((object.__getattribute__(current, "_Namespace__attrs"), depth))
            total += 12
        elif isinstance(current, KeysView | ValuesView | ItemsView):  # prints `dict_items([...])`
            total += 12 + entry * len(current)
            if total <= limit:
                stack.extend([(v, depth + 1) for v in current])
        else:
            total += 8
        if total > limit:
            raise RenderLimit(f"an operation that builds more than {limit} characters")
    return total


_CONTAINERS = (list, tuple, dict, KeysView, ValuesView, ItemsView)
_LEAVES = (str, int, float, bytes, type(None))
"""Values that are surely no container, told apart without the views' `isinstance` (a Python call
each, counted as one by the render's bound on calls): checked inline, a function would be one too."""


def _children(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        return (*value.keys(), *value.values())
    if isinstance(value, KeysView | ValuesView | ItemsView):
        mapping = getattr(value, "mapping", None)
        return (mapping,) if mapping is not None else ()
    return value  # type: ignore[no-any-return]


def _tree(value: Any) -> Any:
    """`value`, refused (`RenderLimit`) if it holds more than `MAX_TREE` values counted as a tree.
    The count of each list, tuple and dict is kept for the render (with the value, so its id is
    not reused), so a value built from counted ones costs its own length to count, whatever they
    hold; one met for the first time is walked once, as a DAG."""
    if isinstance(value, _LEAVES) or not isinstance(value, _CONTAINERS):
        return value
    _walked(value)
    return value


def _walked(value: Any) -> tuple[Any, int, int]:
    """`value`'s entry in the render's memo (`_tree`): the value, its count of values and its count
    of characters (a string's or bytes' length, an integer's digits (`_int_size`), one for any
    other value), each counted as a tree. The walk looks at the render's deadline as it goes."""
    budget = getattr(_built, "budget", None)
    memo: dict[int, tuple[Any, int, int]] = budget.trees if budget is not None else {}
    if id(value) in memo:
        return memo[id(value)]
    stack: list[tuple[Any, bool]] = [(value, False)]
    seen = 0
    while stack:
        node, children_done = stack.pop()
        if children_done:
            total = chars = 1
            for child in _children(node):
                seen += 1
                if not seen % _TICK:
                    _on_time()
                if not isinstance(child, _LEAVES) and isinstance(child, _CONTAINERS):
                    _, values, held = memo[id(child)]
                    total, chars = total + values, chars + held
                elif isinstance(child, _TEXTS):
                    total, chars = total + 1, chars + len(child)
                elif isinstance(child, int):  # inline: a function called is a call the render counts
                    total, chars = total + 1, chars + child.bit_length() // 30 + 1
                else:
                    total, chars = total + 1, chars + 1
                if total > MAX_TREE:
                    raise RenderLimit(f"a value that holds more than {MAX_TREE} values (counted as a tree)")
            memo[id(node)] = (node, total, chars)
            continue
        if id(node) in memo:
            continue
        stack.append((node, True))
        stack.extend([(c, False) for c in _children(node) if not isinstance(c, _LEAVES) and isinstance(c, _CONTAINERS)])
        if len(stack) > MAX_TREE:
            raise RenderLimit(f"a value that holds more than {MAX_TREE} values (counted as a tree)")
    return memo[id(value)]


def _compared(*values: Any) -> None:
    """Refuses (`RenderLimit`) to compare a list, tuple or dict that holds more than `MAX_COMPARED`
    characters: a comparison's cost is at most the smaller operand's, `in`'s the container's, and
    Python makes either in one C call. Strings compare at the speed of memory (their own bound keeps
    them short), an integer by its digits (`_walked`); anything else compares in constant time or
    through Python calls the render counts."""
    for value in values:
        if not isinstance(value, _LEAVES) and isinstance(value, _CONTAINERS):
            if _walked(value)[2] > MAX_COMPARED:
                raise RenderLimit(f"a comparison of a value that holds more than {MAX_COMPARED} characters")


_HASHED = (int, float, complex, tuple, frozenset)
"""The keys whose hash is not randomised, or is made of ones that are not: every `k * (2**61 - 1)`
has the same hash, and a float's is its integer's."""


def _distinct(key: Any) -> Any:
    """What tells `key` from the others sharing its hash, itself hashed with a randomised hash (an
    equal key stops the probes at the first it meets: only distinct ones are compared one with
    another): an integer's bytes (a float equal to one's too), a float's hex, else the object."""
    if isinstance(key, float) and key.is_integer():
        key = int(key)
    if isinstance(key, int):
        return key.to_bytes(key.bit_length() // 8 + 1, "little", signed=True)
    if isinstance(key, float):
        return key.hex()
    return ("object", id(key))


def _keyed(keys: Iterable[Any]) -> None:
    """Refuse (`RenderLimit`) to hash `keys` into one dict or set when distinct keys sharing a hash
    would make Python compare more than `MAX_COMPARED` digits: each follows the probes of every one
    before it with its hash, and compares with it, inside one C call (`dict.fromkeys` of 3,000
    integers of 61,440 bits sharing one hash held the server 9 s). Counted as the sum, over each
    hash, of its distinct keys squared times the widest one's digits (`_int_size`, a tuple by what
    it holds)."""
    groups: dict[int, tuple[set[Any], list[int]]] = {}
    seen = 0
    for key in keys:
        seen += 1
        if not seen % _TICK:
            _on_time()
        if not isinstance(key, _HASHED):
            continue
        try:
            code = hash(key)
        except TypeError:  # unhashable: Python refuses it itself
            continue
        if isinstance(key, int):  # inline (`_int_size`): not a call counted
            size = key.bit_length() // 30 + 1
        elif isinstance(key, tuple):
            size = _walked(key)[2]
        elif isinstance(key, frozenset):
            size = len(key) + 1
        else:
            size = 1
        group = groups.setdefault(code, (set(), [0]))
        group[0].add(_distinct(key))
        group[1][0] = max(group[1][0], size)
    work = sum(len(distinct) ** 2 * widest[0] for distinct, widest in groups.values())
    if work > MAX_COMPARED:
        most = max(len(distinct) for distinct, _ in groups.values())
        raise RenderLimit(
            f"a dict or set of integer keys that share a hash (up to {most} share one; "
            f"over {MAX_COMPARED} digits compared)"
        )


def _pair_keys(value: Any) -> Iterable[Any]:
    """The keys `dict(value)` hashes: a mapping's keys, or the first of each pair."""
    if isinstance(value, Mapping):
        return value.keys()
    if isinstance(value, _TEXTS):
        return ()
    return (item[0] for item in value if isinstance(item, list | tuple) and len(item) == 2)


def _keyed_dict(pairs: tuple[tuple[Any, Any], ...]) -> dict[Any, Any]:
    """A dict literal's dict, its keys checked first (`_keyed`)."""
    _keyed(key for key, _ in pairs)
    return dict(pairs)


def _comparand(value: Any) -> Any:
    """`value`, once it is known to be cheap enough to compare (`_compared`)."""
    _compared(value)
    return value


def _text_size(value: Any, conversion: str | None = None) -> int:
    """The length of `str(value)` (of `repr(value)` for the conversion `r`, `ascii(value)` for
    `a`), found without making it when `value` is not a string (or is converted)."""
    if conversion in ("r", "a"):
        ascii_only = conversion == "a"
        return _printed_size(value, text=lambda s: _repr_size(s, ascii_only))
    return len(value) if isinstance(value, str) else _printed_size(value)


def _held_size(value: Any) -> int:
    """What a new value holds, counted as characters: a string's (or bytes') length, and eight for
    each entry of a list, tuple, set or dict (a reference, and often a new object behind it)."""
    if isinstance(value, _TEXTS):
        return len(value)
    if isinstance(value, list | tuple | set | frozenset | dict):
        return 8 * len(value)
    return 0


def _held(value: Any) -> Any:
    """Count `value`, just made by a method, a filter or a slice, against the render's budget of
    built characters: a copy (`s[1:]`, `s.upper()`, `s|reverse`, `l.copy()`) held in a list or a
    namespace stays in memory until the render ends, however cheap each one was to make. An
    integer over `MAX_INT_BITS` is refused (`(0).from_bytes(b)`): arithmetic on it is quadratic."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise RenderLimit(f"an integer of more than {MAX_INT_BITS} bits")
    size = _held_size(value)
    budget = getattr(_built, "budget", None)
    if size and budget is not None:
        budget.built += size
        if budget.built > MAX_BUILT_CHARS:
            raise RenderLimit(f"the template built more than {MAX_BUILT_CHARS} characters")
    return _tree(value)


def _printable(value: Any) -> str:
    """`str(value)`, refused first (`RenderLimit`) if it would build more than `MAX_VALUE_CHARS`
    (a string is no new text: it is not counted)."""
    if isinstance(value, str):
        return value
    _building(_text_size(value))
    return str(value)


def _total_size(values: Iterable[Any], conversion: str | None = None) -> int:
    """The printed sizes of `values` together (as `_text_size` counts them), refused as soon as
    they pass `MAX_VALUE_CHARS`."""
    total = 0
    for value in values:
        if conversion in ("r", "a"):
            total += _text_size(value, conversion)
        else:
            total += len(value) if isinstance(value, str) else _printed_size(value, MAX_VALUE_CHARS - total)
        if total > MAX_VALUE_CHARS:
            raise RenderLimit(f"an operation that builds more than {MAX_VALUE_CHARS} characters")
    return total


def _escaped_size(text: str) -> int:
    """The length of `text` HTML-escaped: `&`, `"` and `'` take five characters, `<` and `>` four."""
    five = text.count("&") + text.count('"') + text.count("'")
    return len(text) + 4 * five + 3 * (text.count("<") + text.count(">"))


def _cased_size(text: str) -> int:
    """At most how long `upper`, `lower`, `title` or `capitalize` make `text` (a non-ASCII
    character may become three: `'ΐ'.upper()`)."""
    return len(text) if text.isascii() else 3 * len(text)


def _bounded_join(values: Iterable[Any], sep: str = "") -> str:
    items = list(values)
    _building(_total_size(items) + len(sep) * max(len(items) - 1, 0))
    return sep.join(v if isinstance(v, str) else str(v) for v in items)


def _replaced_size(text: Any, old: Any, new: Any, count: int | None = None) -> int:
    found = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


_WIDTH = re.compile(r"%(?:\(([^)]*)\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])?")


def _check_percent(fmt: str) -> None:
    """A `%` format whose widths and precisions build at most `MAX_VALUE_CHARS`."""
    for m in _WIDTH.finditer(fmt):
        for group in m.groups()[1:3]:
            if group == "*" or (group is not None and int(group) > MAX_VALUE_CHARS):
                raise RenderLimit(f"a format width of more than {MAX_VALUE_CHARS} characters")


def _percent_size(fmt: str, values: Any) -> int:
    """About what `fmt % values` builds: the format, its widths and precisions, and each value it
    prints (a tuple's items once each, a mapping's by the names the format gives, as often as it
    gives them; another value once), counted before anything is printed."""
    _check_percent(fmt)
    found = list(_WIDTH.finditer(fmt))
    size = len(fmt) + sum(int(g) for m in found for g in m.groups()[1:3] if g is not None and g.isdigit())
    # `%r` and `%a` print `repr` (`ascii`) of a value: its escapes are counted (for every value
    # the format prints, if it has one of them).
    conversions = {m.group(4) for m in found}
    conversion = "a" if "a" in conversions else "r" if "r" in conversions else None
    if isinstance(values, tuple):
        return size + _total_size(values, conversion)
    if isinstance(values, Mapping) and any(m.group(1) is not None for m in found):
        sizes: dict[str, int] = {}
        for m in found:
            name = m.group(1)
            if name is not None and name in values:
                if name not in sizes:
                    sizes[name] = _text_size(values[name], conversion)
                size += sizes[name]
                _over(size)
        return size
    return size + _text_size(values, conversion)


def _check_format(fmt: str) -> None:
    """A `str.format` string whose field widths build at most `MAX_VALUE_CHARS`."""
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if spec and ("{" in spec or any(int(n) > MAX_VALUE_CHARS for n in re.findall(r"\d+", spec))):
            raise RenderLimit(f"a format width of more than {MAX_VALUE_CHARS} characters")


_FIELD_BASE = re.compile(r"[^.\[]*")


def _format_size(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """About what `fmt.format(*args, **kwargs)` builds: the format, its widths, and for each field
    the value it names printed in full (an attribute or an item of it counted as the whole),
    counted before anything is printed (`repr` or `ascii` of it for `!r`, `!a`)."""
    _check_format(fmt)
    size = len(fmt)
    sizes: dict[tuple[str, str | None], int] = {}
    automatic = 0
    for _, field, spec, conversion in string.Formatter().parse(fmt):
        if spec:
            size += sum(int(n) for n in re.findall(r"\d+", spec))
        if field is None:
            continue
        found = _FIELD_BASE.match(field)
        base = found.group(0) if found else field
        if not base:
            base, automatic = str(automatic), automatic + 1
        if (base, conversion) not in sizes:
            if base.isdigit():
                value = args[int(base)] if int(base) < len(args) else ""
            else:
                value = kwargs.get(base, "")
            sizes[base, conversion] = _text_size(value, conversion)
        size += sizes[base, conversion]
        _over(size)
    return size


def _translated_size(text: str | bytes | bytearray, table: Any) -> int:
    """At most what `text.translate(table)` builds: each character becomes the longest string the
    table gives (a dict's values, a list's or tuple's items: `str.translate` takes any table it
    can index); a table of another kind is refused."""
    if isinstance(text, bytes | bytearray) or table is None or isinstance(table, str | bytes | bytearray):
        return len(text)  # a bytes table maps a byte to a byte
    if isinstance(table, Mapping):
        entries: Iterable[Any] = table.values()
    elif isinstance(table, list | tuple):
        entries = table
    else:
        raise RenderLimit(f"translate() with a table of type {type(table).__name__}")
    longest = max((len(v) if isinstance(v, str) else 1 for v in entries), default=1)
    return len(text) * max(longest, 1)


def _str_method_size(
    method: str, text: str | bytes | bytearray, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> int | None:
    """What a string (or bytes) method will build, for those that can build more than their input."""
    if method == "replace" and len(args) >= 2 and isinstance(args[0], _TEXTS) and isinstance(args[1], _TEXTS):
        count = args[2] if len(args) > 2 else kwargs.get("count")
        return _replaced_size(text, args[0], args[1], count if isinstance(count, int) else None)
    if method in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        return max(args[0], len(text))
    if method == "translate" and args:
        return _translated_size(text, args[0])
    if method == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
        return len(text) + tabs * (size if isinstance(size, int) else 8)
    if method in ("encode", "decode"):
        return _coded_size(method, text, args, kwargs)
    if method in ("strip", "lstrip", "rstrip"):
        _check_strip(text, args[0] if args else kwargs.get("chars"))
        return None
    if method in ("upper", "lower", "casefold", "swapcase", "title", "capitalize"):
        return _cased_size(text) if isinstance(text, str) else len(text)
    if method == "hex":
        return 3 * len(text)
    return None


_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _split_pieces(method: str, text: str | bytes | bytearray, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Account for `split`, `rsplit` or `splitlines` of `text` before it runs: at most a piece
    per separator (per line break; per two characters when splitting on whitespace), each a new
    object with an entry in the list, and the text's characters."""
    if method == "splitlines":
        if isinstance(text, str):
            pieces = sum(text.count(b) for b in _LINE_BREAKS) + 1
        else:
            pieces = text.count(b"\n") + text.count(b"\r") + 1
    else:
        sep = args[0] if args else kwargs.get("sep")
        limit = args[1] if len(args) > 1 else kwargs.get("maxsplit", -1)
        pieces = len(text) // 2 + 1 if sep is None or not sep else text.count(sep) + 1
        if isinstance(limit, int) and limit >= 0:
            pieces = min(pieces, limit + 1)
    _objects(pieces, pieces, len(text))


_SPLITS = frozenset({"split", "rsplit", "splitlines"})


_CODECS = frozenset(
    {"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"}
    | {"ascii", "iso8859-1", "iso8859-15", "cp1252"}
)
"""The codecs `str.encode` and `bytes.decode` may use (by the name Python's codec registry gives
them, so any alias of one is taken): each works through its text once, in C. Every other codec is
refused: `punycode` is quadratic in its text (80,000 characters took 18 s inside one C call, out of
reach of the step and time bounds, and the event loop waited), `idna` runs it for each label, and a
codec not looked at may do anything."""

_CODEC_ERRORS = {"strict": 0, "ignore": 0, "replace": 1, "surrogateescape": 1, "surrogatepass": 4}
_CODEC_ERRORS |= {"backslashreplace": 10, "xmlcharrefreplace": 10}
"""The error handlers `encode` and `decode` may use, with the most characters (bytes) each puts in
place of one it cannot encode (`\\U0010ffff`, `&#1114111;`). `namereplace` (a Unicode name
looked up for each character) and any other is refused."""

_CODEC_NAME = re.compile(r"[A-Za-z0-9_ .-]{1,40}")


class CodecRefused(RenderLimit):
    """A codec or error handler a template may not use (`_CODECS`, `_CODEC_ERRORS`)."""


def _codec(name: Any) -> str:
    """The registry's name for the codec `name`, refused (`CodecRefused`) unless it is one of `_CODECS`."""
    import codecs

    if isinstance(name, Undefined):  # `encode(nope)`: the undefined name is the error, not a codec
        name._fail_with_undefined_error()
    canonical = None
    if isinstance(name, str) and _CODEC_NAME.fullmatch(name):
        try:
            canonical = codecs.lookup(name).name
        except LookupError:
            canonical = None
    if canonical not in _CODECS:
        shown = name[:40] if isinstance(name, str) else type(name).__name__
        raise CodecRefused(
            f"the codec {shown!r} is not available in templates (only utf-8, utf-16, utf-32, ascii, latin-1, "
            "iso8859-15 and cp1252: the others may take time out of proportion to their text)"
        )
    return canonical


def _codec_errors(errors: Any) -> int:
    """The most characters the error handler `errors` puts for one; refused (`CodecRefused`) unless
    it is one of `_CODEC_ERRORS`."""
    if isinstance(errors, Undefined):
        errors._fail_with_undefined_error()
    if not isinstance(errors, str) or errors not in _CODEC_ERRORS:
        shown = errors[:40] if isinstance(errors, str) else type(errors).__name__
        raise CodecRefused(f"the error handler {shown!r} is not available in templates ({', '.join(_CODEC_ERRORS)})")
    return _CODEC_ERRORS[errors]


def _codec_arguments(method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, int]:
    """The codec and the error handler's size of a call of `encode` or `decode`, both checked."""
    name = args[0] if args else kwargs.get("encoding", "utf-8")
    errors = args[1] if len(args) > 1 else kwargs.get("errors", "strict")
    return _codec(name), _codec_errors(errors)


def _coded_size(method: str, text: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """At most what `text.encode(...)` (bytes) or `text.decode(...)` (characters) builds, once its
    codec and error handler are known to be allowed (`_codec_arguments`)."""
    codec, replaced = _codec_arguments(method, args, kwargs)
    if method == "decode":  # a character per byte at most, or the handler's escape of a byte
        return len(text) * max(1, replaced)
    unit = 4 if codec.startswith("utf-32") else 2 if codec.startswith("utf-16") else 1
    bom = {"utf-8-sig": 3, "utf-16": 2, "utf-32": 4}.get(codec, 0)
    if text.isascii():
        return len(text) * unit + bom  # every allowed codec encodes ASCII
    if codec.startswith("utf-8"):
        top = ord(max(text))
        unit = 1 if top < 0x80 else 2 if top < 0x800 else 3 if top < 0x10000 else 4
    elif codec.startswith("utf-16"):
        unit = 4
    return len(text) * max(unit, replaced) + bom


MAX_STRIP_WORK = 20_000_000
"""The most `strip`, `lstrip`, `rstrip` (and the `trim` filter) given the characters to strip may
work through: the length of the text times the number of those characters. Python looks each
character it strips up in those characters in turn, inside one C call: 100,000 characters stripped
of 500,000 took 2.8 s."""


def _check_strip(text: Any, chars: Any) -> None:
    if isinstance(chars, _TEXTS) and len(chars) > 1 and len(text) * len(chars) > MAX_STRIP_WORK:
        raise RenderLimit(
            f"a strip of a text of {len(text)} characters by {len(chars)} characters (over {MAX_STRIP_WORK} in all)"
        )


MAX_SEARCH_WORK = 50_000_000
"""The most `rfind`, `rindex`, `rpartition` and `rsplit` (of a string or bytes) given a needle of
more than one character may work through: the length of the text times the needle's. Python
searches backwards by trying the needle at each place in turn, inside one C call: `rfind` of
`'ab' + 'a' * 3000` in 8,000,000 `'a'` took 5.5 s, at this bound it takes some 50 ms. (Python
searches forwards in linear time: `find`, `index`, `count`, `partition`, `split`, `replace`, `in`
are not bounded this way.)"""

_REVERSE_SEARCHES = frozenset({"rfind", "rindex", "rpartition", "rsplit"})


def _check_search(method: str, text: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    needle = args[0] if args else kwargs.get("sep")
    if isinstance(needle, _TEXTS) and len(needle) > 1 and len(text) * len(needle) > MAX_SEARCH_WORK:
        raise RenderLimit(
            f"a reverse search ({method}) in a text of {len(text)} characters for {len(needle)} characters "
            f"(over {MAX_SEARCH_WORK} in all)"
        )


def _check_table(target: Any, owner: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """`dict.fromkeys` and `str.maketrans` make a dict entry (and maybe an object) for each item or
    character they are given, inside one C call (`dict.fromkeys` of 16,000,000 characters took
    0.8 s, `''.maketrans` of them 1 s): counted first, as a list of them is (an entry each, eight
    characters). (`maketrans` is a static method: it is known by its qualified name, having no owner.)"""
    name = getattr(target, "__qualname__", None)
    if name == "dict.fromkeys" and (owner is dict or isinstance(owner, dict)):
        given = args[:1] or tuple(v for k, v in kwargs.items() if k == "iterable")
    elif name == "str.maketrans" and owner is None:
        given = (*args[:1], *args[2:3])
    else:
        return
    for items in given:
        if isinstance(items, str):
            _string_items(items)
        elif hasattr(items, "__len__"):
            _objects(len(items), len(items))


_READING = frozenset(
    {"count", "endswith", "find", "index", "rfind", "rindex", "startswith", "partition", "rpartition"}
    | {"isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric"}
    | {"isprintable", "isspace", "istitle", "isupper", "removeprefix", "removesuffix", "maketrans"}
)
"""String methods that read their text once (Python searches forwards with a linear algorithm for
a long needle), or copy part of it (counted as held once made): nothing to bound before they run
but the reverse searches (`MAX_SEARCH_WORK`) and `maketrans` (`_check_table`)."""

_METHODS: dict[type, frozenset[str]] = {
    str: _READING
    | {"capitalize", "casefold", "lower", "upper", "swapcase", "title", "center", "ljust", "rjust", "zfill"}
    | {"expandtabs", "format", "format_map", "join", "replace", "translate", "split", "rsplit", "splitlines"}
    | {"strip", "lstrip", "rstrip", "encode"},
    bytes: _READING
    | {"capitalize", "lower", "upper", "swapcase", "title", "center", "ljust", "rjust", "zfill", "expandtabs"}
    | {"join", "replace", "translate", "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip"}
    | {"decode", "hex", "fromhex"},
    list: frozenset({"count", "index", "copy"}),
    tuple: frozenset({"count", "index"}),
    dict: frozenset({"copy", "fromkeys", "get", "items", "keys", "values"}),
    int: frozenset({"as_integer_ratio", "bit_count", "bit_length", "conjugate", "from_bytes", "to_bytes"}),
    float: frozenset({"as_integer_ratio", "conjugate", "fromhex", "hex", "is_integer"}),
}
"""The methods of the built-in values a template may call, each looked at for what one call of it
may cost (the bounds in `BoundedEnvironment.call`): a method not listed here (one a later Python
adds, or one of another type) is refused before it runs, so none is reached unbounded by default.
(The methods that change their value are refused by Jinja's immutable sandbox first.)"""
_METHODS[bytearray] = _METHODS[bytes]


def _check_method(owner: Any, name: str) -> None:
    """Refuse (`RenderLimit`) a method of a built-in value that is not in `_METHODS`."""
    kind = owner if isinstance(owner, type) else type(owner)
    for base in kind.__mro__:
        allowed = _METHODS.get(base)
        if allowed is not None:
            if name not in allowed:
                raise RenderLimit(f"the method {base.__name__}.{name}() is not available in templates")
            return


def _sequence_sum(environment: Any, value: Iterable[Any], attribute: Any, start: list[Any] | tuple[Any, ...]) -> Any:
    """`sum(start=[])`: the concatenation of the items, built once (Python's `sum` copies what
    it has built at every item: quadratic), after its size is checked."""
    from jinja2.filters import make_attrgetter

    getter = make_attrgetter(environment, attribute) if attribute is not None else (lambda item: item)
    items = [getter(item) for item in value]
    kind = type(start)
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(f'can only concatenate {kind.__name__} (not "{type(item).__name__}") to {kind.__name__}')
    _building(len(start) + sum(len(item) for item in items))
    built = list(start)
    for item in items:
        built.extend(item)
    return built if kind is list else tuple(built)


MAX_SUM_WORK = MAX_COMPARED
"""The most digits `sum` (the filter) of numbers may work through: the count of its items times the
largest one's 30-bit digits (`_int_size`). Python adds each item to the running total inside one C
call, and adding copies the larger: the sum of 900,000 integers of 61,440 bits each took 1.3 s."""


def _numeric_sum(environment: Any, value: Iterable[Any], attribute: Any, start: Any) -> Any:
    """`sum(start=...)` of anything but sequences: the items are listed first (counted as held), and
    refused if the sum would work through more than `MAX_SUM_WORK` digits."""
    from jinja2.filters import make_attrgetter

    getter = make_attrgetter(environment, attribute) if attribute is not None else None
    items = _held([getter(item) for item in value] if getter is not None else list(value))
    widest = _int_size(start) if isinstance(start, int) else 1
    for seen, item in enumerate(items, 1):
        if isinstance(item, int):
            widest = max(widest, item.bit_length() // 30 + 1)  # inline (`_int_size`): not a call counted
        if not seen % _TICK:
            _on_time()
    if (len(items) + 1) * widest > MAX_SUM_WORK:
        raise RenderLimit(
            f"a sum of {len(items)} numbers of up to {widest} digits each (over {MAX_SUM_WORK} digits in all)"
        )
    return sum(items, start)


MAX_ROUND_DIGITS = 400
"""The largest precision (either way) `round` may round to: Python's `round(5, -n)` computes
`10**n` inside one C call (`-10,000,000` took 11 s), and Jinja's `round(..., 'floor')` and
`'ceil'` compute `10**precision` themselves. A double has no digits beyond 324 places after the
point and none before 309 (an integer of `MAX_INT_BITS` has 19,729: its rounding to tens of
thousands of places is not available)."""


def _materialized(value: Any) -> Any:
    """`value`, or the list of what it yields if it is an iterator (`map`, `select` and the like
    hand on a generator), counted as held: a list's items can be counted before they are compared
    or hashed in C (`_compared`)."""
    if isinstance(value, Iterator) and not isinstance(value, _LEAVES):
        return _held(list(value))
    return value


def _listed(value: Any) -> list[Any]:
    """`list(value)`, counted first when `value` is a string (an entry, and maybe an object, per
    character); a list made of another iterable is counted as held once made."""
    if isinstance(value, str):
        _string_items(value)
        return list(value)
    return value if isinstance(value, list) else _held(list(value))


def _html_json_size(text: str) -> int:
    return _json_text_size(text, ascii_only=True, html=True)


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _url_size(text: str) -> int:
    """A string printed inside a value `urlencode` prints: its `repr`'s escapes, and its UTF-8 bytes."""
    return _utf8_size(text) + _repr_size(text) - len(text)


class _BoundedWriter:
    """A stream `pprint` writes to, counting what it writes against the render's bounds as it goes:
    what `pprint` makes of a nested value (each line indented by the keys before it) is not known
    before it is made, so it is stopped at the bound instead."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.size = 0

    def write(self, piece: str) -> None:
        self.size += len(piece)
        _over(self.size)
        _charge(len(piece))
        self.pieces.append(piece)


def _bounded_pprint(value: Any) -> str:
    """Jinja's `pprint` (`pprint.pformat`), written to a `_BoundedWriter`; what it prints is first
    bounded by `MAX_SCAN_CHARS` (a string is split into lines and words by regular expressions)."""
    _scanned("the filter 'pprint'", _printed_size(value))
    out = _BoundedWriter()
    pprint.PrettyPrinter(stream=out).pprint(value)  # type: ignore[arg-type]
    return "".join(out.pieces).removesuffix("\n")


def _bounded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A string-building filter that checks what it will build before it builds it."""

    passed = 1 if hasattr(original, "jinja_pass_arg") else 0  # the context or environment, first

    def bounded(*args: Any, **kwargs: Any) -> Any:
        values = args[passed:]
        value, rest = (values[0], values[1:]) if values else ("", ())
        # A filter that works on `str(value)` prints the value first: bounded before it is printed.
        text = _printable(value) if name in _PRINTING_FILTERS else ""
        if name in _SCANNING_FILTERS:  # first: a check below may split the text itself (`urlize`)
            _scanned(f"the filter '{name}'", len(text))
        if name in _ITERATING_FILTERS and isinstance(value, str):
            _string_items(value)  # a list of its characters, made in one C call
        if name == "replace" and len(rest) >= 2:
            count = rest[2] if len(rest) > 2 else kwargs.get("count")
            old, new = _printable(rest[0]), _printable(rest[1])
            _building(_replaced_size(text, old, new, count if isinstance(count, int) else None))
        elif name == "join":
            items = _listed(value)
            sep = rest[0] if rest else kwargs.get("d", "")
            _building(sum(_text_size(i) for i in items) + _text_size(sep) * max(len(items) - 1, 0))
            args = (*args[:passed], items, *rest)
        elif name == "string":
            _building(_text_size(value))
        elif name == "tojson":
            indent = rest[0] if rest else kwargs.get("indent")
            width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
            pad = width + 1 if indent is not None else 0  # each entry on a line of its own, indented
            _building(_printed_size(value, text=_html_json_size, pad=max(pad, 0)))
        elif name == "pprint":
            return _bounded_pprint(value)
        elif name == "urlencode":
            # Each UTF-8 byte of what is printed (`str` of a key or value) may become `%XX`.
            _building(3 * (_utf8_size(value) if isinstance(value, str) else _printed_size(value, text=_url_size)))
        elif name in ("batch", "slice"):
            items = _listed(value)
            count = rest[0] if rest else kwargs.get("linecount" if name == "batch" else "slices", 0)
            fill = rest[1] if len(rest) > 1 else kwargs.get("fill_with")
            if isinstance(count, int) and count > 0:
                # `batch`: a list per `count` items, the last filled up to `count`; `slice`:
                # `count` lists, each but the full ones filled with one more.
                lists = -(-len(items) // count) if name == "batch" else count
                filled = (lists * count - len(items) if name == "batch" else count) if fill is not None else 0
                _objects(len(items) + filled + lists, lists)
            args = (*args[:passed], items, *rest)
        elif name == "sum":
            start = rest[1] if len(rest) > 1 else kwargs.get("start", 0)
            attribute = rest[0] if rest else kwargs.get("attribute")
            if isinstance(start, list | tuple):
                return _sequence_sum(args[0], value, attribute, start)
            return _numeric_sum(args[0], value, attribute, start)
        elif name == "round":
            precision = rest[0] if rest else kwargs.get("precision", 0)
            if isinstance(precision, int) and abs(precision) > MAX_ROUND_DIGITS:
                raise RenderLimit(f"round() to a precision of more than {MAX_ROUND_DIGITS} digits (given {precision})")
            try:
                return original(*args, **kwargs)
            except OverflowError:  # a float times `10**precision` past a double's range
                raise RenderLimit(f"round() to a precision of {precision} digits, past a float's range") from None
        elif name == "center":
            width = rest[0] if rest else kwargs.get("width", 80)
            _building(max(width if isinstance(width, int) else 0, len(text)))
        elif name == "indent":
            width = rest[0] if rest else kwargs.get("width", 4)
            pad = _text_size(width) if isinstance(width, str) else width if isinstance(width, int) else 0
            _building(len(text) + (text.count("\n") + 1) * pad)
        elif name == "format":
            _building(_percent_size(text, kwargs or tuple(rest)))
        elif name == "wordwrap":
            width = rest[0] if rest else kwargs.get("width", 79)
            wrap = rest[2] if len(rest) > 2 else kwargs.get("wrapstring")
            joint = _text_size(wrap) if wrap is not None else 2
            # Each wrapped line but the last, with the one after it, passes `width`: at most twice
            # the text's length over the width, and a line per paragraph.
            lines = 2 * len(text) // max(width if isinstance(width, int) else 79, 1) + text.count("\n") + 1
            _building(len(text) + lines * joint)
            if lines > MAX_WRAP_LINES:
                raise RenderLimit(f"the filter 'wordwrap' making more than {MAX_WRAP_LINES} lines")
        elif name == "urlize":
            target = rest[2] if len(rest) > 2 else kwargs.get("target")
            rel = rest[3] if len(rest) > 3 else kwargs.get("rel")
            # Each word may become a link: its text escaped twice (the href and the link's text)
            # and a tag around it naming the target and rel.
            tag = 64 + _text_size(target or "") + _text_size(rel or "")
            _building(2 * _escaped_size(text) + len(text.split()) * tag)
        elif name == "trim":
            _check_strip(text, rest[0] if rest else kwargs.get("chars"))
        elif name in ("escape", "e", "forceescape"):
            _building(_escaped_size(text))
        elif name == "xmlattr":
            _building(5 * _text_size(value) + 16)
        elif name in ("upper", "lower", "title", "capitalize"):
            _building(_cased_size(text))
        found = original(*args, **kwargs)
        return _held(found) if name in _ITERATING_FILTERS else found

    return bounded


_PRINTING_FILTERS = frozenset(
    {
        *("replace", "center", "indent", "format", "wordwrap", "urlize", "escape", "e", "forceescape"),
        *("upper", "lower", "title", "capitalize", "trim", "striptags", "wordcount", "truncate", "safe"),
    }
)
"""The filters that work on `str(value)` (Jinja's `soft_str`): the value is printed first."""

_SCANNING_FILTERS = frozenset({"title", "wordcount", "striptags", "urlize", "wordwrap"})
"""The filters that work through their text in one C call (a regular expression) or one character
at a time in Python (`wordwrap` breaking a long word): bounded by `MAX_SCAN_CHARS`."""

_ITERATING_FILTERS = frozenset({"sort", "groupby", "unique", "map", "select", "reject", "selectattr", "rejectattr"})
"""Filters that make a list of a string's characters (or one object for each) when given a string."""

_BOUNDED_FILTERS = (
    *("replace", "join", "center", "indent", "format", "wordwrap", "urlize", "escape", "e", "forceescape"),
    *("upper", "lower", "title", "capitalize", "trim", "striptags", "wordcount", "truncate", "safe", "xmlattr"),
    *("string", "tojson", "pprint", "urlencode", "batch", "slice", "sum", "round"),
    *_ITERATING_FILTERS,
)


_LIST = DEFAULT_FILTERS["list"]
_RETURNING_WHAT_THEY_GET = frozenset({"first", "last", "random", "default", "d", "attr", "max", "min"})
"""Filters that hand back one of the values they were given, not a new one: nothing to count."""


def _held_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose result is counted as held (`_held`) once it is made: `reverse`, `list`,
    `sort`, `trim`, `int` and the others that copy their input, or parse it."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        if original is _LIST and args and isinstance(args[-1], str):
            _string_items(args[-1])
        return _held(original(*args, **kwargs))

    return counted


def _bounded_test(original: Callable[..., Any]) -> Callable[..., Any]:
    """The `lower` and `upper` tests, which look at `str(value)`: the value's printed size checked first."""

    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(value, str):
            _building(_text_size(value))
        return original(value, *args, **kwargs)

    return bounded


def _comparing_test(original: Callable[..., Any]) -> Callable[..., Any]:
    """A test that compares its value with its argument (`eq`, `lt`, `in`, ...): both checked first."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        _compared(*args, *kwargs.values())
        return original(*args, **kwargs)

    return bounded


_COMPARING_TESTS = frozenset(
    {"==", "eq", "equalto", "!=", "ne", ">", "gt", "greaterthan", ">=", "ge", "<", "lt", "lessthan", "<=", "le", "in"}
)

_COMPARING_FILTERS = frozenset({"sort", "dictsort", "groupby", "unique", "max", "min"})
"""Filters that compare the items of their value with one another, or hash them into a set: the
value checked first (`_compared`), so no one comparison of items costs more than it holds."""


def _unique_keys(args: tuple[Any, ...], kwargs: Mapping[str, Any], passed: int) -> Iterable[Any]:
    """What `unique` hashes into its set: each item, or its `attribute` (strings are lowered, but
    their hashes are randomised: not counted)."""
    from jinja2.filters import make_attrgetter

    value: Iterable[Any] = args[passed]
    if isinstance(value, _TEXTS):
        return ()
    attribute = args[passed + 2] if len(args) > passed + 2 else kwargs.get("attribute")
    if attribute is None or not passed:
        return value
    getter = make_attrgetter(args[0], attribute)
    return (getter(item) for item in value)


def _comparing_filter(original: Callable[..., Any], name: str = "") -> Callable[..., Any]:
    passed = 1 if hasattr(original, "jinja_pass_arg") else 0

    def bounded(*args: Any, **kwargs: Any) -> Any:
        if len(args) > passed:
            args = (*args[:passed], _materialized(args[passed]), *args[passed + 1 :])
            _compared(args[passed])
            if name == "unique":
                _keyed(_unique_keys(args, kwargs, passed))
        return original(*args, **kwargs)

    return bounded


def _is_sequence(value: Any) -> bool:
    """Jinja's `sequence` test, which takes any error of `len(value)` for a no: a bound met in a
    call it makes (`len(loop)`) ends the render instead (the bound's error has unset the trace
    that keeps every other bound)."""
    try:
        len(value)
        value.__getitem__  # noqa: B018
    except RenderLimit:
        raise
    except Exception:
        return False
    return True


_SEQUENCES = (str, list, tuple, bytes, bytearray)


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles `~` to a concatenation that checks what it builds, and a slice (which Jinja
    compiles to Python's own, past the environment's `getitem`) to one counted as held."""

    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if not isinstance(node.arg, nodes.Slice):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.held(")
        super().visit_Getitem(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self.write("environment.tree(")
        super().visit_List(node, frame)
        self.write(")")

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        # Each key checked as an operand of a comparison (`_compared`): equal keys are compared.
        # And the keys' hashes counted before the dict is made (`_keyed`).
        self.write("environment.tree(environment.keyed_dict((")
        for item in node.items:
            self.write("(environment.comparand(")
            self.visit(item.key, frame)
            self.write("), ")
            self.visit(item.value, frame)
            self.write("), ")
        self.write(")))")

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx != "load":  # a target (`{% for a, b in ... %}`), not a value
            super().visit_Tuple(node, frame)
            return
        self.write("environment.tree(")
        super().visit_Tuple(node, frame)
        self.write(")")

    def visit_Compare(self, node: nodes.Compare, frame: Frame) -> None:
        # Each operand checked before Python compares it (`_compared`); never folded when compiled.
        self.write("(environment.comparand(")
        self.visit(node.expr, frame)
        self.write(")")
        for op in node.ops:
            self.write(f" {operators[op.op]} environment.comparand(")
            self.visit(op.expr, frame)
            self.write(")")
        self.write(")")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**", "+", "-", "/", "//", "%"])
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _bounded_range
        self.globals.pop("lipsum", None)  # lipsum(n=10**6) builds whatever it is asked to
        # `{{ value }}` prints `str(value)` (or what the environment's own `finalize` makes of the
        # value, JSON for program code): its size is checked before it is printed.
        self.finalize = _finalize if self.finalize is None else _then(self.finalize)
        for test in ("lower", "upper"):
            self.tests[test] = _bounded_test(self.tests[test])  # type: ignore[arg-type]
        self.tests["sequence"] = _is_sequence
        for test in _COMPARING_TESTS & set(self.tests):
            self.tests[test] = _comparing_test(self.tests[test])  # type: ignore[arg-type]
        self.filters["random"] = _random_filter(self.filters["random"])
        for name, filt in list(self.filters.items()):
            if name in _COMPARING_FILTERS:
                filt = _comparing_filter(filt, name)
                if hasattr(self.filters[name], "jinja_pass_arg"):
                    filt.jinja_pass_arg = self.filters[name].jinja_pass_arg  # type: ignore[attr-defined]
                self.filters[name] = filt
            if name in _BOUNDED_FILTERS:
                bounded = _bounded_filter(name, filt)
            elif name in _RETURNING_WHAT_THEY_GET:
                continue
            else:
                bounded = _held_filter(filt)
            for attr in ("jinja_pass_arg",):  # keep how Jinja passes the context
                if hasattr(filt, attr):
                    setattr(bounded, attr, getattr(filt, attr))
            self.filters[name] = bounded

    @staticmethod
    def bounded_concat(values: Iterable[Any]) -> str:
        return _bounded_join(values)

    @staticmethod
    def concat(values: Iterable[Any]) -> str:
        """Joins what a block captures (`{% set x %}`, a macro, `{% filter %}`): a loop of a
        few steps may output one long string many times, so the join is checked first."""
        return _bounded_join(values)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        for number in (left, right):
            # Division and multiplication of integers are quadratic in their size, inside one C
            # call: `a // b` on two integers of millions of bits held the server for seconds.
            if isinstance(number, int) and number.bit_length() > MAX_INT_BITS:
                raise RenderLimit(f"arithmetic on an integer of more than {MAX_INT_BITS} bits")
        if operator == "**":
            if isinstance(right, int | float) and abs(right) > 64:
                raise RenderLimit("exponent too large")
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                if abs(left).bit_length() * right > MAX_INT_BITS:
                    raise RenderLimit(f"an integer of more than {MAX_INT_BITS} bits")
        elif operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, _SEQUENCES) and isinstance(n, int) and len(seq) * n > MAX_REPEAT_CHARS:
                    raise RenderLimit(f"repetition of more than {MAX_REPEAT_CHARS} items")
                if isinstance(seq, _SEQUENCES) and isinstance(n, int):
                    _building(len(seq) * max(n, 0))
            if type(left) is int and type(right) is int:
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise RenderLimit(f"an integer of more than {MAX_INT_BITS} bits")
        elif operator == "+":
            if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
                _building(len(left) + len(right))
        elif operator == "%" and isinstance(left, str):
            _building(_percent_size(left, right))
        elif operator == "%" and isinstance(left, bytes | bytearray):
            _building(_percent_size(left.decode("latin-1"), right))
        return _tree(super().call_binop(context, operator, left, right))

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, dict):
            _compared(argument)  # a key that equals one held is compared with it
        return super().getitem(obj, argument)

    held = staticmethod(_held)
    tree = staticmethod(_tree)
    comparand = staticmethod(_comparand)
    keyed_dict = staticmethod(_keyed_dict)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox hands out str.format wrapped
        owner = getattr(target, "__self__", None)
        name = getattr(target, "__name__", "")
        if target is dict or owner is dict or isinstance(owner, dict) and name == "fromkeys":
            # `dict(...)`, `dict.fromkeys(...)` of what a filter yields: listed, so counted (`_compared`)
            args = tuple(_materialized(a) for a in args)
        _check_table(target, owner, args, kwargs)
        if owner is not None:
            _check_method(owner, name)
            if isinstance(owner, _TEXTS) and name in _REVERSE_SEARCHES:
                _check_search(name, owner, args, kwargs)
        if isinstance(owner, bytes | bytearray) and name == "join" and args:
            items = list(args[0])
            _building(sum(len(i) if isinstance(i, _TEXTS) else 0 for i in items) + len(owner) * max(len(items) - 1, 0))
            args = (items, *args[1:])
        elif isinstance(owner, _TEXTS) and name in _SPLITS:
            _split_pieces(name, owner, args, kwargs)
        elif isinstance(owner, bytes | bytearray):
            size = _str_method_size(name, owner, args, kwargs)
            if size is not None:
                _building(size)
        elif isinstance(owner, int) and name == "to_bytes":
            length = args[0] if args else kwargs.get("length", 1)
            if isinstance(length, int):
                _building(length)
        elif isinstance(owner, str):
            if name == "join" and args:
                return _bounded_join(args[0], owner)
            if name == "format":
                _building(_format_size(owner, args, kwargs))
            elif name == "format_map" and args and isinstance(args[0], Mapping):
                _building(_format_size(owner, (), args[0]))
            elif name == "format_map":
                _check_format(owner)
            size = _str_method_size(name, owner, args, kwargs)
            if size is not None:
                _building(size)
        _tree(args)  # a macro's `varargs`, `loop.cycle`'s items: values the call holds
        _tree(kwargs)
        if (isinstance(owner, list | tuple) and name in ("count", "index")) or target is dict or owner is dict:
            _compared(owner, *args, *kwargs.values())  # each entry compared, or hashed into a dict, in C
            if name == "fromkeys" and args:
                _keyed(args[0] if not isinstance(args[0], _TEXTS) else ())
            elif target is dict and args:
                _keyed(_pair_keys(args[0]))
        elif isinstance(owner, dict) or name == "changed":  # a key looked up (`get`), `loop.changed`
            _compared(*args, *kwargs.values())
        elif isinstance(owner, _TEXTS) and name in ("startswith", "endswith"):
            _compared(*args)  # a tuple of prefixes, each compared in C
        found = super().call(__context, __obj, *args, **kwargs)
        return _held(found) if owner is not None else _tree(found)  # a method's result: often a copy


class NotConstant(Exception):
    """Raised by `random` (the filter, however it is reached: `|random`, `map('ran' ~ 'dom')`, a
    name set to it) in a render of `check_renders`: that render is not the same at every request,
    so it is given up (the template is accepted), never taken as a failure."""


def _random_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def random(*args: Any, **kwargs: Any) -> Any:
        budget = getattr(_built, "budget", None)
        if budget is not None and budget.constant:
            raise NotConstant("random")
        return original(*args, **kwargs)

    return random


def _finalize(value: Any) -> Any:
    """Every `{{ value }}`, before it is printed: a value that is not a string may print as far
    more than its own size (one list held many times), so its printed size is checked on the value."""
    if not isinstance(value, str):
        _building(_text_size(value))
    return value


def _json_printed_size(text: str) -> int:
    return _json_text_size(text, ascii_only=False)


def _then(own: Callable[..., Any]) -> Callable[..., Any]:
    """The environment's own `finalize` (called as Jinja calls it: with the context or
    environment first if it asks for one), after what it makes is counted: JSON here (program
    code, call arguments), a new text even for a string (`"\\u0001"` for each control character),
    counted as `json.dumps` writes it."""

    def finalize(*args: Any) -> Any:
        _building(_printed_size(args[-1], text=_json_printed_size))
        return own(*args)

    if hasattr(own, "jinja_pass_arg"):
        finalize.jinja_pass_arg = own.jinja_pass_arg  # type: ignore[attr-defined]
    return finalize


_UNSUPPORTED = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


class _NotConstant(Exception):
    pass


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}
_UNOPS: dict[str, Callable[[Any], Any]] = {"+": operator.pos, "-": operator.neg, "not": operator.not_}


def _constant(env: BoundedEnvironment, node: nodes.Node) -> Any:
    """The value of an expression made of constants only, computed under the render bounds;
    `_NotConstant` if it depends on anything else."""
    if isinstance(node, nodes.Const):
        return node.value
    if isinstance(node, nodes.List | nodes.Tuple):
        values = [_constant(env, n) for n in node.items]
        return values if isinstance(node, nodes.List) else tuple(values)
    if isinstance(node, nodes.BinExpr) and node.operator in _BINOPS:
        left, right = _constant(env, node.left), _constant(env, node.right)
        if node.operator in env.intercepted_binops:
            return env.call_binop(None, node.operator, left, right)
        return _BINOPS[node.operator](left, right)
    if isinstance(node, nodes.UnaryExpr) and node.operator in _UNOPS:
        return _UNOPS[node.operator](_constant(env, node.node))
    if (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "range"
        and not (node.kwargs or node.dyn_args or node.dyn_kwargs)
    ):
        return _bounded_range(*(_constant(env, n) for n in node.args))
    raise _NotConstant


def check(env: BoundedEnvironment, source: str) -> None:
    """Refuse a template over the bounds of its source (`bound_source`); then, unless it is a
    literal (`is_literal`: nothing to parse), parse `source` now (a `TemplateError` if it cannot
    be), refuse what has no loader, and refuse an expression of constants that fails (it would
    fail on every request). A template up to `_CHECKED_CHARS` long that passed is not checked
    again (at most 1024 are kept): a suite adds the same scenario for test after test. (It is
    compiled, in the environment it renders in, by `check_renders`.)"""
    bound_source(source)
    if is_literal(source, env):
        return
    if len(source) <= _CHECKED_CHARS:
        _checked_once(env, source)
    else:
        _check(env, source)


MAX_TEMPLATE_CHARS = MAX_OUTPUT_CHARS
"""The longest template a scenario may hold: a literal one longer renders more than
`MAX_OUTPUT_CHARS` (refused at every request), and lexing one holds the interpreter in one C call
(a 6 MB text held every client 0.5 s)."""
MAX_TEMPLATE_SYNTAX_CHARS = 100_000
"""The longest text with template syntax (`{{`, `{%`, `{#`): Jinja's lexer finds the next tag with
one regular expression, one C call that holds the interpreter (so every client) through the text
before it: 0.11-0.16 s per MB measured on a busy machine, so at most about 15 ms. (A literal is
never lexed: it may be `MAX_TEMPLATE_CHARS` long.)"""
MAX_TEMPLATE_TAGS = 2_000
"""The most `{{`, `{%` and `{#` a template may hold (counted in its source, before it is parsed)."""
MAX_TEMPLATE_CODE = 100_000
"""The most characters of Python code a template may compile to, beyond its literal text: Python's
`compile()` of it is one C call that holds the interpreter (so the event loop, even from a worker
thread): 106,000 characters (2,400 `{% if %}` blocks) took 44-105 ms on a busy machine, so about
0.2-1 ms per 1,000 (a `{{ name }}` is about 100); a 1.5 MB template of 120,000 tags took 1.3 s."""
MAX_COMPILED_WEIGHT = 64 * 1024 * 1024
"""What the compiled templates kept (`compiled`) may weigh together, estimated (`_weight`)."""


_OPENER = re.compile(r"\{[{%#]")
_RAW_BEGIN = "{% raw %}"
_RAW_END = "{% endraw %}"
_ESCAPE = "{{ '{' }}"
"""How a recorded text keeps Jinja's openers literal (`{% raw %}...{% endraw %}`, or, in a text
that says `endraw`, each `{` written as `{{ '{' }}`): data, not syntax, so not counted as tags."""


class _Scan:
    """What a template's source holds, found with a few C calls per opener: its tags outside raw
    blocks (`tags`; the `{{ '{' }}` escapes too when there is any other), and, if it holds nothing
    else (`pieces` not None), the text it renders as (raw blocks' contents, a `{` for each escape,
    the text between)."""

    __slots__ = ("pieces", "tags")

    def __init__(self, source: str) -> None:
        self.tags = 0
        self.pieces: list[str] | None = []
        if "{" not in source:
            self.pieces = [source]
            return
        if _RAW_BEGIN not in source:
            bare = source.replace(_ESCAPE, "")
            if "{" not in bare:  # only escapes and text without a brace: each escape is a `{`
                self.pieces = [source.replace(_ESCAPE, "{")]
                return
            if _ESCAPE not in source:
                self.tags = _count_tags(source)
                self.pieces = None if self.tags else [source]
                return
        self._walk(source)

    def _walk(self, source: str) -> None:
        """Go opener by opener as Jinja's lexer does (the first `{{`, `{%` or `{#` decides); a raw
        block is taken as data only in its exact form with no other `endraw` inside (the lexer
        ends it at the first one of any form). Past `MAX_TEMPLATE_TAGS` the rest is counted."""
        pieces: list[str] = []
        at = 0
        steps = escapes = 0
        while True:
            found = _OPENER.search(source, at)
            if found is None:
                pieces.append(source[at:])
                break
            start = found.start()
            pieces.append(source[at:start])
            steps += 1
            if steps > 4 * MAX_TEMPLATE_TAGS or self.tags > MAX_TEMPLATE_TAGS:
                self.tags += _count_tags(source[start:])
                self.pieces = None
                return
            if source.startswith(_RAW_BEGIN, start):
                end = source.find(_RAW_END, start + len(_RAW_BEGIN))
                content = source[start + len(_RAW_BEGIN) : end] if end >= 0 else ""
                if end >= 0 and "endraw" not in content:
                    pieces.append(content)
                    at = end + len(_RAW_END)
                    continue
            elif source.startswith(_ESCAPE, start):
                pieces.append("{")
                escapes += 1
                at = start + len(_ESCAPE)
                continue
            self.tags += 1
            at = start + 2
        if self.tags:  # beside other syntax each escape is a tag compiled as one: counted
            self.tags += escapes
        self.pieces = None if self.tags else pieces


def _count_tags(source: str) -> int:
    return source.count("{{") + source.count("{%") + source.count("{#")


def _tags(source: str) -> int:
    """The tags of `source` that are syntax (not those that keep a recorded text literal)."""
    return _Scan(source).tags


def is_literal(source: str, env: BoundedEnvironment | None = None) -> bool:
    """Whether `source` renders as a text known without lexing it (`literal`): it holds no
    template syntax (no `{{`, `{%`, `{#`), or only what keeps a recorded text literal: raw
    blocks, and, in an environment that prints a string as it is (no `finalize` of its own, no trimming of
    blocks), `{{ '{' }}`."""
    if "{" not in source:
        return True
    if env is not None and (env.trim_blocks or env.lstrip_blocks):
        return False
    scan = _Scan(source)
    if scan.pieces is None:
        return False
    return _ESCAPE not in source or (env is not None and env.finalize is _finalize)


def bound_source(source: str) -> None:
    """Refuse (`TemplateError`) a template longer than `MAX_TEMPLATE_CHARS`, one with template
    syntax longer than `MAX_TEMPLATE_SYNTAX_CHARS`, or one with more than `MAX_TEMPLATE_TAGS` tags.
    What keeps a recorded text literal (raw blocks, `{{ '{' }}`) is data, not tags: a text that
    holds nothing else may be `MAX_TEMPLATE_CHARS` long (it is never lexed)."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(messages.template_too_long(MAX_TEMPLATE_CHARS))
    if "{" not in source:
        return
    tags = _tags(source)
    if tags and len(source) > MAX_TEMPLATE_SYNTAX_CHARS:
        raise TemplateError(messages.template_syntax_too_long(MAX_TEMPLATE_SYNTAX_CHARS))
    if tags > MAX_TEMPLATE_TAGS:
        raise TemplateError(messages.template_too_many_tags(MAX_TEMPLATE_TAGS, tags))


_NEWLINE = re.compile(r"\r\n|\r|\n")


def literal(env: BoundedEnvironment, source: str) -> str:
    """What a literal template (`is_literal`) renders as, without a render: Jinja's lexer writes
    every line break as the environment's `newline_sequence` and drops a trailing one unless it
    keeps them; the output's bounds hold as for a render."""
    text = source
    if not env.keep_trailing_newline:
        text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith(("\n", "\r")) else text
    if "{" in text:
        pieces = _Scan(text).pieces
        if pieces is None:
            raise TemplateError("not a literal template")
        text = "".join(pieces)
    if "\r" in text or env.newline_sequence != "\n":
        text = _NEWLINE.sub(env.newline_sequence, text)
    if len(text) > MAX_OUTPUT_CHARS:
        raise RenderLimit(f"the template rendered more than {MAX_OUTPUT_CHARS} characters")
    _refuse_surrogates(text)
    return text


_COMPILED = PROCESS.add("compiled templates", Weighed(MAX_COMPILED_WEIGHT))


def compiled(env: BoundedEnvironment, source: str) -> Template:
    """`source` compiled in `env`, once: kept (`MAX_COMPILED_WEIGHT` in all) for every request that
    renders it. Refused (`TemplateError`) over the bounds of its source (`bound_source`) or of its
    code (`MAX_TEMPLATE_CODE`), so no compile holds the interpreter long; a template Python cannot
    compile (`SyntaxError: too many statically nested blocks`) raises that error, as at a render."""
    key = (env, source)
    found = _COMPILED.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    bound_source(source)
    try:
        tree = env.parse(source)
        code = env._generate(tree, None, "<template>")  # noqa: SLF001 (what `from_string` does, in steps)
        text = sum(len(node.data) for node in tree.find_all(nodes.TemplateData))
        if len(code) - text > MAX_TEMPLATE_CODE:
            raise TemplateError(messages.template_code_too_large(MAX_TEMPLATE_CODE))
        template = env.template_class.from_code(env, env._compile(code, "<template>"), env.make_globals(None), None)  # noqa: SLF001
    except RecursionError as e:
        raise TemplateError(NESTED_TOO_DEEPLY) from e
    _COMPILED.put(key, template, _weight(source, code))
    return template


def _weight(source: str, code: str) -> int:
    """About what a compiled template takes in memory: measured (tracemalloc) at 1.5 to 3 bytes per
    character of its Python code (a `{{ input }}` about 100 characters), plus its source."""
    return 3 * len(code) + len(source) + 2048


_CHECKED_CHARS = 16_384


NESTED_TOO_DEEPLY = "the template is nested too deeply"
"""A template whose expressions (`((((1))))`, `[[[[]]]]`, `- - - 1`) nest past Python's recursion
limit, met when it is parsed or rendered."""


@contextlib.contextmanager
def checking() -> Iterator[None]:
    """The templates `check`ed inside share one render's bounds (`checking` a scenario's): what
    their constant expressions build together (`MAX_BUILT_CHARS`), and the time folding them takes
    together (`MAX_SECONDS`, parsing not counted)."""
    if getattr(_built, "budget", None) is not None:
        yield
        return
    _built.budget = _Budget()
    try:
        yield
    finally:
        _built.budget = None


def _folded(env: BoundedEnvironment, node: nodes.Node) -> Any:
    """`_constant` under the running check's bounds (`checking`)."""
    budget: _Budget = _built.budget
    started = _clock()
    budget.deadline = started + budget.left
    try:
        return _constant(env, node)
    finally:
        budget.left -= _clock() - started
        budget.trees.clear()  # what one expression built is not kept for the next


def _check(env: BoundedEnvironment, source: str) -> None:
    try:
        tree = env.parse(source)
    except RecursionError as e:
        raise TemplateError(NESTED_TOO_DEEPLY) from e
    for node in tree.find_all(_UNSUPPORTED):
        raise TemplateError(f"'{type(node).__name__.lower()}' is not supported in scenario templates")
    for call in tree.find_all(nodes.Call):
        _check_codec_literals(call)
    with checking():
        _fold_all(env, tree)


def _fold_all(env: BoundedEnvironment, tree: nodes.Template) -> None:
    """Refuse an expression of constants that fails, or runs past the check's bounds."""
    for expr in tree.find_all((nodes.BinExpr, nodes.UnaryExpr, nodes.Call)):
        zero = isinstance(expr, nodes.BinExpr) and isinstance(expr.right, nodes.Const) and expr.right.value == 0
        if zero and isinstance(expr, nodes.Div | nodes.FloorDiv):
            raise TemplateError(f"line {expr.lineno}: a division by zero always fails")
        try:
            _folded(env, expr)
        except _NotConstant:
            continue
        except RenderLimit as e:
            raise TemplateError(f"line {expr.lineno}: {e}") from e
        except Exception as e:  # the constants' own arithmetic: 1/0, -'a', 10 % 0
            raise TemplateError(f"line {expr.lineno}: an expression that always fails: {type(e).__name__}: {e}") from e


def _check_codec_literals(call: nodes.Call) -> None:
    """Refuse a call of `encode` or `decode` whose codec (or error handler) is written in the
    template and is not allowed (`_codec`): it would fail on every request. One computed at render
    time is checked then."""
    if not (isinstance(call.node, nodes.Getattr) and call.node.attr in ("encode", "decode")):
        return
    given = {kw.key: kw.value for kw in call.kwargs}
    for position, key, check in ((0, "encoding", _codec), (1, "errors", _codec_errors)):
        value = call.args[position] if len(call.args) > position else given.get(key)
        if isinstance(value, nodes.Const):
            try:
                check(value.value)
            except CodecRefused as e:
                raise TemplateError(f"line {call.lineno}: {e}") from e


def check_renders(env: BoundedEnvironment, source: str, given: frozenset[str]) -> None:
    """Render now, under a render's bounds and with no request's values, a template that reads
    none of the names a request may give (`given`: captures, `input`, `result`, ...): each name
    it reads is one it sets itself, an environment global (`range`), or one no request gives
    (undefined at every render). Its render is then the same at every request, and what fails now
    (a bound, an undefined name, its own arithmetic) fails at each: the render's exception is
    raised. Every template but a literal is compiled in `env` first (`compiled`): a template Python
    cannot compile fails so at every request. Not rendered: one longer than `_CHECKED_CHARS`; a
    render that reaches `random` (`NotConstant`) is given up. A render that runs out of time is let
    through (the time bound depends on the machine's load); the renders of one check (`checking`)
    share `MAX_SECONDS`, and once it is spent the others are not rendered."""
    if is_literal(source, env):
        return
    compiled(env, source)  # compiled now (and kept for its requests): what cannot be fails now
    if len(source) > _CHECKED_CHARS:
        return  # not rendered: its render may be long (each under `MAX_SECONDS`)
    _renders_once(env, source, given)


def _renders(env: BoundedEnvironment, source: str, given: frozenset[str]) -> None:
    try:
        tree = env.parse(source)
    except RecursionError as e:
        raise TemplateError(NESTED_TOO_DEEPLY) from e
    if meta.find_undeclared_variables(tree) & given:
        return  # a request may give one of them: its render may differ
    outer: _Budget | None = getattr(_built, "budget", None)
    seconds = outer.renders_left if outer is not None else MAX_SECONDS
    if seconds <= 0:
        return
    started = _clock()
    try:
        _render(compiled(env, source), {}, seconds, constant=True)
    except (RenderTimeout, NotConstant):
        return
    finally:
        _built.budget = outer  # `render` leaves none: the check's own goes on
        if outer is not None:
            outer.renders_left -= _clock() - started


_checked_once = functools.lru_cache(maxsize=1024)(_check)  # a failure raises, so only passes are kept
PROCESS.add("checked templates", Memo(_checked_once))
_renders_once = functools.lru_cache(maxsize=1024)(_renders)  # as `_checked_once`: passes only
PROCESS.add("templates rendered at their check", Memo(_renders_once))


class _Budget:
    def __init__(self) -> None:
        self.steps = 0
        self.calls = 0
        self.built = 0
        self.trees: dict[int, tuple[Any, int, int]] = {}
        """The tree sizes (values, characters) of the containers the render has met, by id (`_walked`)."""
        self.deadline = _clock() + MAX_SECONDS
        self.left = MAX_SECONDS
        """What is left of `MAX_SECONDS` for the constant expressions of a check (`checking`)."""
        self.renders_left = MAX_SECONDS
        """What is left of `MAX_SECONDS` for the renders of a check's templates (`check_renders`)."""
        self.constant = False
        """A render of `check_renders`: `random` raises `NotConstant`."""

    def tracer(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != "<template>":
            # A call the template makes, or a generator it resumes: counted, as a line is. (An
            # error raised here unsets the trace; the render ends with it, as `render` checks.)
            self.calls += 1
            if self.calls > MAX_CALLS:
                raise RenderLimit(f"the template made more than {MAX_CALLS} calls")
            if not self.calls % 1000 and _clock() > self.deadline:
                raise RenderTimeout(f"the template ran longer than {MAX_SECONDS:g} s")
            return None
        return self.local

    def local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise RenderLimit(f"the template ran more than {MAX_STEPS} steps")
            if not self.steps % 100 and _clock() > self.deadline:
                raise RenderTimeout(f"the template ran longer than {MAX_SECONDS:g} s")
        return self.local


def render(template: Template, context: dict[str, Any]) -> str:
    """Render under the bounds above; a bound exceeded raises `RenderLimit`."""
    return _render(template, context, MAX_SECONDS)


def _render(template: Template, context: dict[str, Any], seconds: float, constant: bool = False) -> str:
    """`render` within `seconds` (less for `check_renders`, whose renders share `MAX_SECONDS`)."""
    budget = _Budget()
    budget.constant = constant
    budget.deadline = _clock() + seconds
    previous = sys.gettrace()
    sys.settrace(budget.tracer)
    _built.budget = budget
    try:
        pieces: list[str] = []
        size = 0
        for piece in template.generate(context):
            size += len(piece)
            if size > MAX_OUTPUT_CHARS:
                raise RenderLimit(f"the template rendered more than {MAX_OUTPUT_CHARS} characters")
            pieces.append(piece)
        text = "".join(pieces)
    except RecursionError as e:
        raise RenderLimit(NESTED_TOO_DEEPLY) from e
    finally:
        sys.settrace(previous)
        _built.budget = None
    _refuse_surrogates(text)
    return text


def _refuse_surrogates(text: str) -> None:
    if not text.isascii():
        lone = _LONE_SURROGATE.search(text)
        if lone is not None:
            raise TemplateError(
                f"the template rendered a lone surrogate ({lone.group()!a}), which is not valid Unicode"
            )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A template can make one (a `\\ud800` escape in a string, `'%c'|format(55296)`, half of a pair
joined to something else): no response can carry it, so the render is refused (a 400), where it
was a 500 and a stream cut without an event. (A Python string holds a character beyond the first
plane as one code point, so any surrogate in it stands alone.)"""


def needs_thread(source: str, env: BoundedEnvironment | None = None) -> bool:
    """False for a template that does next to no work (plain text with at most
    `_TRIVIAL_PLACES` placeholders `{{ name }}` or `{{ name.attr }}`, no filter, expression or
    tag): rendering it on the event loop is cheaper than a thread hop. A literal (`is_literal`)
    is not rendered at all; one longer than `_TRIVIAL_CHARS` is not looked at (the pattern runs
    in one C call with the interpreter held: 0.19 s per MB)."""
    if is_literal(source, env):
        return False
    if len(source) > _TRIVIAL_CHARS:
        return True
    return _TRIVIAL.fullmatch(source) is None


_TRIVIAL_CHARS = 4096


_TRIVIAL_PLACES = 8
_TEXT = r"(?:[^{]|\{(?![{%#]))*"  # text, single braces included (a program's object literals)
_TRIVIAL = re.compile(rf"{_TEXT}(?:\{{\{{\s*[A-Za-z_][\w.]*\s*\}}\}}{_TEXT}){{0,{_TRIVIAL_PLACES}}}")


async def render_off_loop(template: Template, context: dict[str, Any]) -> str:
    """`render` in a worker thread (the trace that bounds it is per thread)."""
    return await asyncio.to_thread(render, template, context)
