"""A template's `round`, its big integers compared, hashed or summed, and the render's deadline.

`{{ 5|round(-(n|int)) }}` made Python compute `10**n` inside one C call (n = 10,000,000 held the
server for 11 s), and `round(n, 'floor')` or `'ceil'` made Jinja compute it; the precision is now
bounded before the call. A list of integers of 61,440 bits each (within the bounds on `**`) was
counted as one character an integer when compared, hashed or summed, though each comparison works
through 2,049 digits: `m.count(c)`, `c in m`, `m|sum` of 900,000 of them held the server for over a
second; an integer now counts its digits. And the accounting that walks a value ran in frames the
trace does not look at, so a render doing it passed the 0.5 s bound (`m|length` took 2.3 s); it
now looks at the deadline as it goes (shown with the module's clock made to jump: no timing here).
"""

from __future__ import annotations

import itertools

import openai
import pytest

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.template_support import answered, scenario

# bounds on work, not time: the render's clock is held still (tests/scenarios/conftest.py)
pytestmark = pytest.mark.usefixtures("still_clock")

BIG = "{% set b = ((2**64)**64)**15 %}{% set c = b + 1 %}{% set l = [b] * 10000 %}"
"""10,000 integers of 61,440 bits (2,049 digits) each: 20,490,000 digits compared, over 16,000,000."""
COMPARED = "a comparison of a value that holds more than 16000000 characters"
ROUND = "round() to a precision of more than 400 digits (given {})"


@pytest.mark.parametrize(
    ("template", "output", "why"),
    [
        ("{{ 5|round(-(output|int)) }}", "10000000", ROUND.format(-10000000)),
        ("{{ 5|round(precision=-(output|int)) }}", "100000000", ROUND.format(-100000000)),
        ("{{ 1.5|round(output|int, 'ceil') }}", "1000000", ROUND.format(1000000)),
        ("{{ 1.5|round(output|int, method='floor') }}", "10000000", ROUND.format(10000000)),
        ("{{ 1.5|round(-(output|int), 'floor') }}", "401", ROUND.format(-401)),
        (BIG + "{{ l.count(c) }}", "", COMPARED),
        (BIG + "{{ l.index(b) }}", "", COMPARED),
        (BIG + "{{ c in l }}", "", COMPARED),
        (BIG + "{{ l == l }}", "", COMPARED),
        (BIG + "{{ l is eq(l) }}", "", COMPARED),
        (BIG + "{{ l|max }}", "", COMPARED),
        (BIG + "{{ l|sort|length }}", "", COMPARED),
        (BIG + "{{ l|unique|list|length }}", "", COMPARED),
        (BIG + "{{ l|map('abs')|unique|list|length }}", "", COMPARED),
        (BIG + "{{ dict.fromkeys(l)|length }}", "", COMPARED),
        (BIG + "{{ dict.fromkeys(l|map('abs'))|length }}", "", COMPARED),
        (BIG + "{{ l|sum }}", "", "a sum of 10000 numbers of up to 2049 digits each (over 16000000 digits in all)"),
        (BIG + "{{ l|sum(start=c) }}", "", "a sum of 10000 numbers of up to 2049 digits each"),
        ("{% set b = ((2**64)**64)**15 %}{{ ([1] * 9000 + [b])|sum }}", "", "a sum of 9001 numbers of up to 2049"),
    ],
    ids=[
        *("round-negative", "round-precision-kw", "round-ceil", "round-floor-kw", "round-floor-negative"),
        *("count", "index", "in", "eq", "eq-test", "max", "sort", "unique", "unique-of-map"),
        *("fromkeys", "fromkeys-of-map", "sum", "sum-start", "sum-one-big"),
    ],
)
def test_a_call_on_numbers_too_costly_is_refused_before_it_runs(
    ptc_emulator: PTCEmulator, template: str, output: str, why: str
) -> None:
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, output)
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert why in refused.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert ptc_emulator.client().responses.create(model="gpt-test", input="after").output_text == "still here"


def test_the_same_calls_within_their_bounds_still_render(ptc_emulator: PTCEmulator, still_clock: None) -> None:
    template = (
        "{{ 1234|round(-(output|int)) }} {{ 1.25|round(1, 'floor') }} {{ 1.25|round(1, 'ceil') }}"
        " {{ 2.5|round(400) }} {{ 7|round(-400) }}"
        "{% set b = ((2**64)**64)**15 %}{% set l = [b] * 1000 %}"
        " {{ l.count(b + 1) }} {{ (b + 1) in l }} {{ l == l }} {{ (l|max) == b }} {{ dict.fromkeys(l)|length }}"
        " {{ (l|sum) == b * 1000 }} {{ [1, 2, 3]|sum(start=4) }} {{ [[1], [2]]|sum(start=[]) }}"
        " {{ (range(5)|map('abs'))|max }} {{ dict(['ab', 'cd']|map('list')) }}"
    )
    ptc_emulator.add_scenario(scenario(template))
    assert answered(ptc_emulator, "2") == (
        "1200 1.2 1.3 2.5 0 0 False True True 1 True 10 [1, 2] 4 {'a': 'b', 'c': 'd'}"
    )


def test_a_render_doing_its_accounting_is_stopped_by_the_time_bound(
    ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk that counts a value (`l + l` of 10,000 items: 20,000 looked at) runs in the
    templating module's own frames, on a template of a few lines and calls, where the trace never
    looks at the clock: with the clock moving a second each time it is read, only a look at the
    deadline from inside that walk ends the render."""
    template = "{% set l = range(10000)|list %}{% set m = l + l %}{{ m|length }}"
    ptc_emulator.add_scenario(scenario(template))
    ticks = itertools.count()
    monkeypatch.setattr(templating, "_clock", lambda: float(next(ticks)))
    refused = answered(ptc_emulator, "")
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "the template ran longer than 0.5 s" in refused.message


@pytest.mark.parametrize("template", ["{{ output.encode(nope) }}", "{{ output.encode('utf-8', errors=nope) }}"])
def test_an_undefined_codec_is_named_as_undefined(ptc_emulator: PTCEmulator, template: str) -> None:
    """It said "the codec 'StrictUndefined' is not available", naming the type, not the variable."""
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, "x")
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "'nope' is undefined" in refused.message
    assert "StrictUndefined" not in refused.message


@pytest.mark.parametrize(
    "expression",
    ["(" * 3000 + "1" + ")" * 3000, "[" * 3000 + "]" * 3000, "- " * 5000 + "1"],
    ids=["parens", "lists", "minus"],
)
def test_a_template_nested_too_deeply_says_so_when_added(ptc_emulator: PTCEmulator, expression: str) -> None:
    """It said "maximum recursion depth exceeded" (Python's words, not the author's problem)."""
    with pytest.raises(ValueError, match=r"turns\.1\.message: invalid template: the template is nested too deeply"):
        ptc_emulator.add_scenario(scenario("{{ " + expression + " }}"))


SHARED = "{% set P = 2**61 - 1 %}{% set b = (((output|int - 3)**64)**64)**15 %}"
"""`P` is Python's hash modulus: every `k * P` has the hash 0, and `b + k * P` all share `b`'s."""
SHARING = "a dict or set of integer keys that share a hash"
LITERAL = "{{ {" + ", ".join(f"b + P * {k}: 0" for k in range(100)) + "}|length }}"


@pytest.mark.parametrize(
    "template",
    [
        SHARED + "{{ dict.fromkeys(range(b, b + P * 3000, P)|list)|length }}",
        SHARED + "{{ dict(range(b, b + P * 4000, P)|batch(2))|length }}",
        SHARED + "{{ dict.fromkeys(range(0, P * 10000, P)|list)|length }}",
        SHARED + "{{ range(0, P * 10000, P)|unique|list|length }}",
        SHARED + "{{ range(0, P * 10000, P)|batch(1)|unique(attribute=0)|list|length }}",
        SHARED + LITERAL,
    ],
    ids=["fromkeys-big", "dict-of-pairs", "fromkeys-small", "unique", "unique-attribute", "literal"],
)
def test_a_dict_or_set_of_integers_sharing_a_hash_is_refused(
    ptc_emulator: PTCEmulator, template: str, still_clock: None
) -> None:
    """Python's hash of an integer is not randomised: keys sharing one are each compared with every
    one before them, inside one C call (`dict.fromkeys` of 3,000 integers of 61,440 bits held the
    server 9 s, of 10,000 small ones 0.7 s). The keys' hashes are now counted before it is made."""
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, "5")
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert SHARING in refused.message
    assert "over 16000000 digits compared" in refused.message


def test_dicts_and_sets_of_integers_within_the_bound_still_render(ptc_emulator: PTCEmulator, still_clock: None) -> None:
    template = (
        SHARED + "{{ dict.fromkeys(range(0, P * 2000, P)|list)|length }} {{ dict.fromkeys(range(10000))|length }}"
        " {{ range(10000)|unique|list|length }} {{ {0: 1, P: 2, 2 * P: 3}|length }} {{ {'a': 1, 'a': 2} }}"
        " {{ dict([(1, 2), (3, 4)]) }} {{ [{'a': 1}, {'a': 1}]|unique(attribute='a')|list }} {{ {} }}"
    )
    ptc_emulator.add_scenario(scenario(template))
    assert answered(ptc_emulator, "5") == "2000 10000 10000 3 {'a': 2} {1: 2, 3: 4} [{'a': 1}] {}"


def test_round_past_a_float_s_range_says_so(ptc_emulator: PTCEmulator) -> None:
    """It said "OverflowError: int too large to convert to float" (Python's words)."""
    ptc_emulator.add_scenario(scenario("{{ 1.5|round(output|int, 'ceil') }}"))
    refused = answered(ptc_emulator, "400")
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "round() to a precision of 400 digits, past a float's range" in refused.message
