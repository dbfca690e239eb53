"""A scenario template is bounded by the work it does, whatever one line of it does.

The step and time bounds count lines; each of these lines used to build hundreds of megabytes
(or gigabytes) inside one C call, out of their reach: `replace` with a long replacement on a long
string (300 MB in 0.2 s), a chain of them on one line (4.1 s against the 0.5 s bound), `%` and
`str.format` widths, `center`, `indent`. Each is now refused before it runs, with a 400
`scenario_error` saying so, and the server goes on answering.
"""

from __future__ import annotations

import re

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.template_support import AT_PLAY

# bounds on work, not time: the render's clock is held still (tests/scenarios/conftest.py)
pytestmark = pytest.mark.usefixtures("still_clock")

BUILDS = "an operation that builds more than"
DOUBLE = "{% set ns = namespace(s=input * 20000) %}{% for i in range(40) %}{% set ns.s = ns.s OP ns.s %}{% endfor %}"
CHAIN = "{% set s = 'x' * 1000 %}" + "".join("{% set s = s.replace('x', 'xx') %}" for _ in range(17)) + "{{ s|length }}"


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ (input * 20000).replace('x', 'y' * 3000)|length }}", BUILDS),
        ("{{ (input * 20000)|replace('x', 'y' * 3000)|length }}", BUILDS),
        (CHAIN.replace("'x' * 1000", "input * 200"), BUILDS),
        (DOUBLE.replace("OP", "~"), BUILDS),
        (DOUBLE.replace("OP", "+"), BUILDS),
        ("{{ ('%' ~ input|length ~ '99999999d') % 1 }}", "a format width of more than"),
        ("{{ ('{:>' ~ input|length ~ '99999999}').format(1) }}", "a format width of more than"),
        ("{{ input.center(input|length * 10**9) }}", BUILDS),
        ("{{ ((input ~ '\\n') * 50000)|indent(1000) }}", BUILDS),
        (
            "{% set ns = namespace(n=10 ** (input|length * 60)) %}{% for i in range(12) %}{% set ns.n = ns.n * ns.n %}"
            "{% endfor %}{{ ns.n }}",
            "bits",
        ),
    ],
)
def test_a_template_line_that_would_build_too_much_is_refused(
    ptc_emulator: PTCEmulator, template: str, why: str
) -> None:
    ptc_emulator.add_scenario({"name": "work", "match": {"input": "^x"}, "turns": [{"message": template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert why in caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


HELD = "{% set a = [input * 100000] %}{% set b = [a, a, a, a, a, a, a, a, a, a] * 10 %}"
"""`b` holds one list of a string of 100,000 characters a hundred times: ten million characters
once printed, in a tree of a few hundred values."""


@pytest.mark.parametrize(
    "template",
    [
        HELD + "{{ b }}",
        HELD + "{% set c = [b, b, b] %}{{ c }}",
        HELD + "{% set ns = namespace(v=b) %}{{ ns }}",
        HELD + "{% set d = {input: b} %}{{ d.values() }}",
        HELD + "{{ b|upper }}",
        HELD + "{{ b|e|length }}",
        HELD + "{{ b is lower }}",
        HELD + "{{ '%s'|format(b) }}",
        HELD + "{{ ('%s' % [b])|length }}",
        HELD + "{{ '{}'.format(b)|length }}",
        "{% set s = input * 100000 %}{% set x %}{% for i in range(300) %}{{ s }}{% endfor %}{% endset %}{{ x|length }}",
        "{{ (input * 40000)|wordwrap(1, wrapstring=input * 100) }}",
        "{{ (('https://' ~ input ~ '.co ') * 3000)|urlize(target=input * 1000) }}",
        "{% set s = '&' * 100000 %}{{ (s ~ s ~ s ~ s ~ s ~ s)|e|length }}",
        "{{ ('%(a)s' * 20000) % {'a': input * 1000} }}",
        "{{ ('{0}' * 20000).format(input * 1000) }}",
    ],
    ids=[
        *("print", "print-nested", "namespace", "dict-view", "upper", "escape-list", "lower-test"),
        *("format-filter", "percent", "str-format", "captured-block", "wordwrap-wrapstring", "urlize-target"),
        *("escape-text", "percent-repeated-name", "str-format-repeated-field"),
    ],
)
def test_what_a_value_prints_is_bounded_before_it_is_printed(ptc_emulator: PTCEmulator, template: str) -> None:
    """Printing a value (`{{ b }}`, a filter or test that works on `str(value)`, `%` and
    `str.format` of it), joining what a block captured, and the filters that build more than their
    input (`escape`, `wordwrap` with its `wrapstring`, `urlize` with its `target`) are checked
    before they build. Each of these used to build its millions of characters first (and then
    met the output cap, or printed a length): the refusal now names the operation."""
    ptc_emulator.add_scenario({"name": "prints", "match": {"input": "^x"}, "turns": [{"message": AT_PLAY + template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert BUILDS in caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


def test_printing_within_bounds_still_renders(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{{ [1, input] }} {{ {'k': 1}.items() }} {{ '{:>3}|{}|{q}'.format(1, [2], q=3) }} {{ '%s-%(q)s' % {'q': 1} }}"
        " {{ '%s %d'|format(input, 2) }} {{ [1]|upper }} {{ 'see https://a.co'|urlize }} {{ 'a b c'|wordwrap(3) }}"
        " {{ '<&>'|e }} {% set y %}hi {{ 3 }}{% endset %}{{ y }} {{ input is lower }}"
    )
    ptc_emulator.add_scenario({"name": "prints_fine", "match": {"input": "^x$"}, "turns": [{"message": template}]})
    text = ptc_emulator.client().responses.create(model="gpt-test", input="x").output_text
    assert text == (
        "[1, 'x'] dict_items([('k', 1)])   1|[2]|3 {'q': 1}-1 x 2 [1] "
        'see <a href="https://a.co" rel="noopener">https://a.co</a> a b\nc &lt;&amp;&gt; hi 3 True'
    )


def test_the_same_operations_within_bounds_still_render(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{{ input.replace('x', 'y') }} {{ input|replace('x', 'z') }} {{ [input, 'b']|join(',') }} {{ input ~ 1 }}"
        " {{ '%3d' % 7 }} {{ '{:>3}'.format(8) }} {{ input|center(3) }} {{ 'a\\nb'|indent(2) }} {{ 2 ** 10 }}"
    )
    ptc_emulator.add_scenario({"name": "fine", "match": {"input": "^x$"}, "turns": [{"message": template}]})
    text = ptc_emulator.client().responses.create(model="gpt-test", input="x").output_text
    assert text == "y z x,b x1   7   8  x  a\n  b 1024"


TEN = "{% set s = input * 100000 %}{% set s = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}"
"""`s`: a million characters, built once within the bounds."""
HOLD = "{% set ns = namespace(l=[]) %}{% for i in range(2000) %}{% set ns.l = ns.l + [COPY] %}{% endfor %}"
"""Two thousand copies of `s`, each cheap to make, all held in one list."""


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{% set n = 10 ** 9 %}{{ (1).to_bytes(n, 'big')|length }}", BUILDS),
        ("{% set n = 10 ** 9 %}{{ (input.encode() * n)|length }}", "repetition of more than"),
        ("{% set n = 10 ** 9 %}{{ input.encode().center(n)|length }}", BUILDS),
        (TEN + "{% set b = s.encode() %}{{ b.join([b] * 100)|length }}", BUILDS),
        (TEN + "{{ s.translate([''] * 120 + [input * 1000])|length }}", BUILDS),
        (TEN + "{{ ((s|replace(input, 'f')|int(base=16)) // 7) % 5 }}", "bits"),
        (TEN + "{{ ((0).from_bytes(s.encode(), 'big') // 7) % 5 }}", "bits"),
        (TEN + HOLD.replace("COPY", "s[i:]"), "built more than"),
        (TEN + HOLD.replace("COPY", "s.upper()"), "built more than"),
        (TEN + HOLD.replace("COPY", "s|reverse"), "built more than"),
        ("{% set s = '\u0101' * 100000 %}{{ (s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s)|list|length }}", BUILDS),
    ],
    ids=[
        *("to-bytes", "bytes-repeat", "bytes-center", "bytes-join", "translate-list-table"),
        *("int-filter-division", "from-bytes-division", "held-slices", "held-method-copies", "held-filter-copies"),
        "list-of-characters",
    ],
)
def test_bytes_big_integers_and_held_copies_are_bounded(ptc_emulator: PTCEmulator, template: str, why: str) -> None:
    """`bytes` (from `encode` or `to_bytes`) went past every bound that `str` has: `to_bytes(10**9)`,
    `b * 10**9` and `b.center(10**9)` each built a gigabyte; `translate` with a list for its table
    built a gigabyte from a string of a million characters; the `int` filter (base 16) and
    `from_bytes` made integers of millions of bits, and one division of them held the server for
    seconds; and a slice, a method or a filter that copies its input was counted nowhere, so a
    loop holding thousands of copies grew the server by gigabytes. Each is now refused."""
    ptc_emulator.add_scenario({"name": "bytes", "match": {"input": "^x"}, "turns": [{"message": AT_PLAY + template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert why in caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


def test_bytes_integers_and_copies_within_bounds_still_render(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{{ input.encode().center(5)|length }} {{ (1).to_bytes(2, 'big')|length }} {{ input[1:] }}{{ 'abc'[1:] }}"
        " {{ 'abc'.translate({97: 'xy'}) }} {{ 'abc'.translate(['q'] * 98) }} {{ ('ff'|int(base=16)) // 5 }}"
        " {{ 'ab'|reverse }} {{ 'ab'|list }} {{ [3, 1, 2]|sort|list }} {{ (2 ** 64) // 3 - 1 }} {{ 7 / 2 }}"
    )
    ptc_emulator.add_scenario({"name": "bytes_fine", "match": {"input": "^x$"}, "turns": [{"message": template}]})
    text = ptc_emulator.client().responses.create(model="gpt-test", input="x").output_text
    assert text == "5 2 bc xybc qbc 51 ba ['a', 'b'] [1, 2, 3] 6148914691236517204 3.5"


MILLION = "{% set s = input * 100000 %}{% set m = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}"
"""`m`: 900,000 characters, built within the bounds."""
LISTED = "{% set l = (range(10000)|list) * 10 %}{% set m = l + l %}"
"""`m`: 200,000 numbers, built within the bounds."""
RAN = re.compile(r"the template (made more than \d+ calls|ran longer than)")


@pytest.mark.parametrize(
    "template",
    [
        LISTED + "{{ m|map('string')|map('upper')|map('lower')|select|reject('none')|list|length }}",
        LISTED + "{{ m|select('odd')|list|length }}",
        LISTED + "{{ m|map('string')|unique|list|length }}",
        LISTED + "{{ m|map('abs')|sum }}",
        "{% set l = range(10000)|list %}{{ (l * 10)|groupby('real')|length }}",
    ],
    ids=["map-chain", "select", "unique", "map-sum", "groupby"],
)
def test_a_filter_chain_on_one_line_is_bounded_by_its_calls(ptc_emulator: PTCEmulator, template: str) -> None:
    """A filter works in Python, past the template's lines: one line of `map`, `select`,
    `unique`, `batch`, `slice` or `groupby` over a million items ran for 5 to more than 40
    seconds under a 0.5 s bound that only the next line checked. The calls a render makes are
    now counted as its lines are, and bounded."""
    ptc_emulator.add_scenario({"name": "calls", "match": {"input": "^x"}, "turns": [{"message": AT_PLAY + template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert RAN.search(caught.value.message), caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


DOUBLED = (
    "{% set ns = namespace(a=0, b=0) %}{% for i in range(200) %}"
    "{% set ns.a = STEP.replace('X', 'a') %}{% set ns.b = STEP.replace('X', 'b') %}{% endfor %}"
)


def doubled(step: str) -> str:
    """Two values built alike and apart, each `step` applied to itself two hundred times."""
    return DOUBLED.replace("STEP.replace('X', 'a')", step.replace("X", "ns.a")).replace(
        "STEP.replace('X', 'b')", step.replace("X", "ns.b")
    )


@pytest.mark.parametrize(
    "template",
    [
        doubled("[X, X]") + "{{ ns.a == ns.b }}",
        doubled("(X, X)") + "{{ [ns.a]|unique|list|length }}",
        doubled("{'k': X, 'v': X}") + "{{ ns.a == ns.b }}",
        "{% macro f() %}{% set ns.a = varargs %}{% endmacro %}{% macro g() %}{% set ns.b = varargs %}{% endmacro %}"
        + doubled("X")
        .replace("{% set ns.a = ns.a %}", "{{ f(ns.a, ns.a) }}")
        .replace("{% set ns.b = ns.b %}", "{{ g(ns.b, ns.b) }}")
        + "{{ ns.a in [ns.b] }}",
    ],
    ids=["list-equality", "tuple-hash", "dict-equality", "macro-varargs"],
)
def test_a_value_that_holds_itself_twice_over_is_bounded_as_a_tree(ptc_emulator: PTCEmulator, template: str) -> None:
    """A list of one list held twice, two hundred times over, is small in memory and a tree of
    2**200 values: comparing two such (`==`, `in`) or hashing one (`unique`) walks the tree
    inside one C call, and held the server (every request, not only this one) for good. A list,
    tuple or dict a template builds (a literal, `+`, `*`, a filter's, a call's arguments) now
    holds at most a million values counted as a tree."""
    ptc_emulator.add_scenario({"name": "tree", "match": {"input": "^x"}, "turns": [{"message": AT_PLAY + template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert "counted as a tree" in caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


def test_values_and_filters_within_the_tree_and_call_bounds_still_render(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{% macro f() %}{{ varargs|length }}{% endmacro %}{% set a = [1, 2] %}{{ [a, a] == [a, a][0:] }}"
        " {% for k, v in {'b': (1, a)}|dictsort %}{{ k }}{{ v }}{% endfor %} {{ f(a, a) }}"
        " {{ (input * 1000)|map('upper')|unique|list|length }} {{ [(1, 2), (1, 2)]|unique|list }} {{ a is sequence }}"
    )
    ptc_emulator.add_scenario({"name": "trees_fine", "match": {"input": "^x$"}, "turns": [{"message": template}]})
    text = ptc_emulator.client().responses.create(model="gpt-test", input="x").output_text
    assert text == "True b(1, [1, 2]) 2 1 [(1, 2)] True"


WORDS = "{% set s = (input ~ ' ') * 50000 %}{% set m = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}"
"""`m`: 900,000 characters of one-letter words, built within the bounds."""
SCAN = "on more than"
LONG = "{% set l = (range(10000)|list) * 10 %}"
"""`l`: 100,000 numbers."""


@pytest.mark.parametrize(
    ("template", "why"),
    [
        (WORDS + "{{ m|title|length }}", SCAN),
        (WORDS + "{{ m|wordcount }}", SCAN),
        (WORDS + "{{ m|striptags|length }}", SCAN),
        (WORDS + "{{ m|pprint|length }}", SCAN),
        ("{% set s = ('<' ~ input) * 50000 %}{{ (s ~ s ~ s ~ s)|tojson|length }}", BUILDS),
        ("{% set s = '\u0101' * 100000 %}{{ (s ~ s ~ s)|urlencode|length }}", BUILDS),
        ("{% set s = '\\x01' * 100000 %}{{ ('%r' % (s ~ s ~ s))|length }}", BUILDS),
        ("{% set s = '\u0101' * 100000 %}{{ '{!a}'.format(s ~ s)|length }}", BUILDS),
        ("{% set s = '\\x01' * 100000 %}{{ [s ~ s ~ s]|string|length }}", BUILDS),
        (LONG + "{{ l|batch(1)|list|length }}", BUILDS),
        (LONG + "{{ l|slice(100000)|list|length }}", BUILDS),
        (WORDS + "{{ m.split()|length }}", BUILDS),
        (
            "{% set s = '\u0101' * 100000 %}{% set a = s|list %}{% set b = s|list %}{% set c = s|list %}"
            "{{ a|length + b|length + c|length }}",
            "built more than",
        ),
        ("{% set s = '\u0101' * 100000 %}{{ (s ~ s)|sort|length }}", BUILDS),
    ],
    ids=[
        *("title", "wordcount", "striptags", "pprint", "tojson-escapes", "urlencode-utf8", "percent-r-escapes"),
        *("format-ascii", "repr-in-list", "batch-lists", "slice-lists", "split-pieces", "list-of-wide-characters"),
        "sort-of-a-string",
    ],
)
def test_what_a_filter_builds_is_counted_as_built_and_long_scans_are_refused(
    ptc_emulator: PTCEmulator, template: str, why: str
) -> None:
    """Each of these was within its bound as counted and built more, or worked through a long
    text inside one C call: `title` of 900,000 characters peaked at 61 MB and 1.9 s; `tojson`
    and `%r` printed each escape as one character (3.3 MB built for 900,000 counted); `urlencode`
    counted characters, not UTF-8 bytes; `batch(1)` and `slice` counted the items and not the
    lists they fill (100,000 lists); `split` counted entries, not the strings; a list of
    characters beyond Latin-1 counted eight bytes for a 76-byte object. A filter that scans a text
    with the interpreter held (`title`, `wordcount`, `striptags`, `pprint`) stalled every other
    request from its worker thread (up to 190 ms here). Each is now refused before it runs."""
    ptc_emulator.add_scenario({"name": "built", "match": {"input": "^x"}, "turns": [{"message": AT_PLAY + template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert why in caught.value.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert client.responses.create(model="gpt-test", input="after").output_text == "still here"


def test_the_counted_filters_within_bounds_still_render(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{{ 'a b'|title }} {{ 'a b'|wordcount }} {{ '<i>a</i>'|striptags }} {{ {'k': [1, 'é']}|pprint }}"
        " {{ ['<é'] | tojson }} {{ {'a': 1}|tojson(indent=1) }} {{ 'é/'|urlencode }} {{ {'q': 'a b'}|urlencode }}"
        " {{ '%r' % 'é\\n' }} {{ '{!a}'.format('é') }} {{ ['\\x01']|string }} {{ [1, 2, 3]|batch(2, 0)|list }}"
        " {{ [1, 2, 3]|slice(2, 0)|list }} {{ 'a,b'.split(',') }} {{ 'a\\nb'.splitlines() }} {{ 'ab'|sort|join }}"
        " {{ '\u0101b'|list }} {{ 'ba'|unique|list }} {{ 'ab'|map('upper')|join }}"
    )
    ptc_emulator.add_scenario({"name": "counted_fine", "match": {"input": "^x$"}, "turns": [{"message": template}]})
    text = ptc_emulator.client().responses.create(model="gpt-test", input="x").output_text
    assert text == (
        "A B 2 a {'k': [1, 'é']} [\"\\u003c\\u00e9\"] {\n \"a\": 1\n} %C3%A9/ q=a+b 'é\\n' '\\xe9' ['\\x01']"
        " [[1, 2], [3, 0]] [[1, 2], [3, 0]] ['a', 'b'] ['a', 'b'] ab ['\u0101', 'b'] ['b', 'a'] AB"
    )


def test_what_program_code_prints_as_json_is_counted_as_built(ptc_emulator: PTCEmulator) -> None:
    """In program code every `{{ value }}` prints as JSON: a string of control characters takes
    six times its length (`\\u0001`), a new text each time it is printed, and was counted as
    nothing. A block capturing a hundred printings of 100,000 of them held 60 MB before the join
    was refused; the render's budget now counts each printing as JSON and refuses at 16 million."""
    program = (
        "{% set s = '\\x01' * 100000 %}{% set x %}{% for i in range(100) %}{{ s }}{% endfor %}{% endset %}"
        "text({{ x|length }});"
        "// {{ input[:0] }}"  # read from the request: rendered at play, not refused when added
    )
    ptc_emulator.add_scenario({"name": "json", "match": {"input": "^x$"}, "turns": [{"program": program}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x", tools=[{"type": "programmatic_tool_calling"}])
    assert caught.value.code == "scenario_error"
    assert "the template built more than" in caught.value.message
    fine = "{% set s = '\\x01' %}text({{ s ~ '\\u00e9' }}.length + {{ [1, 'a'] }}.length);"
    ptc_emulator.add_scenario(
        {"name": "json_fine", "match": {"input": "^y$"}, "turns": [{"program": fine}, {"message": "{{ result }}"}]}
    )
    reply = client.responses.create(model="gpt-test", input="y", tools=[{"type": "programmatic_tool_calling"}])
    assert reply.output_text == "4"


COMPARED = "{% set a = input * 100000 %}{% set b = input * 100000 %}{% set l = [a, b] * N %}{% set m = [b, a] * N %}"
"""`l` and `m` hold two distinct strings of 100,000 equal characters, 2 N times: Python compares
them entry by entry, each a full pass over the characters, in one C call. With N a hundred that
is 20 million characters, past the bound (16 million); at 50,000 entries of 500,000 characters,
one `l == m` held the server (every other client) for 4.5 s, `(a,) * 100000 == (b,) * 100000`
1.5 s, `l.count(b)` 1 s, `dict.fromkeys(l)` 0.5 s, a bytes `startswith` of a tuple 0.9 s, a dict
of two such tuple keys 1.1 s, `loop.changed` 1.8 s."""


@pytest.mark.parametrize(
    "operation",
    [
        "{{ l == m }}",
        "{{ l < m }}",
        "{{ ((a, b) * N) != ((b, a) * N) }}",
        "{{ b ~ '' in l }}",
        "{{ b is in l }}",
        "{{ l is eq m }}",
        "{{ l|sort|length }}",
        "{{ l|unique|list|length }}",
        "{{ l|max|length }}",
        "{{ l.count(b) }}",
        "{{ l.index(b) }}",
        "{{ dict.fromkeys(l)|length }}",
        "{{ dict([(a, 1), (b, 1)] * N)|length }}",
        "{{ [l, m]|select('eq', m)|list|length }}",
        "{{ b.encode().startswith((a.encode(), b.encode()) * N) }}",
        "{{ {(a, b) * N: 1, (b, a) * N: 2}|length }}",
        "{% for x in [l, m] %}{{ loop.changed(x) }}{% endfor %}",
    ],
)
def test_comparing_values_that_hold_too_many_characters_is_refused(ptc_emulator: PTCEmulator, operation: str) -> None:
    template = (COMPARED + operation).replace("N", "100")
    ptc_emulator.add_scenario({"name": "compare", "match": {"input": "^x"}, "turns": [{"message": template}]})
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="x")
    assert caught.value.code == "scenario_error"
    assert "a comparison of a value that holds more than 16000000 characters" in caught.value.message


def test_comparisons_within_the_bound_still_render(ptc_emulator: PTCEmulator) -> None:
    template = COMPARED + "{{ l == m }} {{ b in l }} {{ l.count(b) }} {{ l|unique|list|length }} {{ 'x' in ['x'] }}"
    ptc_emulator.add_scenario(
        {"name": "compare", "match": {"input": "^x"}, "turns": [{"message": template.replace("N", "50")}]}
    )
    client = ptc_emulator.client(max_retries=0)
    assert client.responses.create(model="gpt-test", input="x").output_text == "True True 100 1 True"
