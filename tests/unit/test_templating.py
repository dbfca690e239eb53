"""The templating limits (emulator/model/scripted/templating.py): a scenario's template renders
under bounds on steps, time, output, ranges, repetition and exponents, whatever values the
request gives it; what always fails is refused by `check` before any request."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from jinja2 import TemplateError
from jinja2.exceptions import SecurityError

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.templating import BoundedEnvironment, RenderLimit

ENV = BoundedEnvironment()


def render(source: str, **context: Any) -> str:
    return templating.render(ENV.from_string(source), context)


def test_a_template_renders_its_variables() -> None:
    assert render("hi {{ who }}, {{ n * 2 }}", who="Ada", n=21) == "hi Ada, 42"


@pytest.mark.parametrize(
    ("source", "context", "why"),
    [
        ("{% for i in range(n) %}{% endfor %}", {"n": 100_000}, f"range() of more than {templating.MAX_RANGE} items"),
        ("{{ s * n }}", {"s": "ab", "n": 10**6}, f"repetition of more than {templating.MAX_REPEAT_CHARS} items"),
        ("{{ n * s }}", {"s": [1, 2], "n": 10**6}, "repetition of more than"),
        ("{{ 2 ** n }}", {"n": 100_000}, "exponent too large"),
        (
            "{% for i in range(9000) %}{% for j in range(9000) %}{% endfor %}{% endfor %}",
            {},
            f"the template ran more than {templating.MAX_STEPS} steps",
        ),
        (
            "{% for i in range(10000) %}{{ s }}{% endfor %}",
            {"s": "x" * 1000},
            f"the template rendered more than {templating.MAX_OUTPUT_CHARS} characters",
        ),
    ],
    ids=["range", "string-repetition", "list-repetition", "exponent", "steps", "output"],
)
def test_a_bound_exceeded_at_render_time_is_a_render_limit(
    source: str, context: dict[str, Any], why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The time bound out of the way: on a busy machine it could end a render before the bound tested.
    monkeypatch.setattr(templating, "MAX_SECONDS", 3600.0)
    with pytest.raises(RenderLimit) as caught:
        render(source, **context)
    assert why in str(caught.value)


NESTED = "{% set a = range(1000)|list %}{% set b = [a] * 100 %}{% set c = [b] * 100 %}"
"""A million numbers held by reference in a few hundred items: what prints them builds megabytes."""


@pytest.mark.parametrize(
    "source",
    [
        "{% set a = range(1000)|list %}{{ ([a] * 2000)|sum(start=[])|length }}",
        NESTED + "{{ c|string|length }}",
        NESTED + "{{ c|tojson|length }}",
        NESTED + "{{ c|pprint|length }}",
        NESTED + "{{ (c ~ '')|length }}",
        NESTED + "{{ [c]|join(',')|length }}",
        "{{ ('x' * 1000).translate({120: 'y' * 5000})|length }}",
        "{{ {'k': long}|urlencode|length }}",
        "{{ [1]|batch(10**8, 0)|list|length }}",
        "{{ [1]|slice(10**8)|list|length }}",
    ],
    ids=["sum", "string", "tojson", "pprint", "concat", "join", "translate", "urlencode", "batch", "slice"],
)
def test_a_filter_that_builds_more_than_its_input_is_bounded_before_it_runs(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of these built tens of millions of items in one call the step and time bounds cannot
    reach (issue 38); each is now refused before it builds."""
    monkeypatch.setattr(templating, "MAX_SECONDS", 3600.0)
    with pytest.raises(RenderLimit, match="builds more than|built more than|holds more than"):
        render(source, long="a" * 400_000)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ [[1, 2], [3]]|sum(start=[]) }}", "[1, 2, 3]"),
        ("{{ [{'v': [1]}, {'v': [2]}]|sum(attribute='v', start=[0]) }}", "[0, 1, 2]"),
        ("{{ [1, 2, 3]|sum }}", "6"),
        ("{{ range(3)|list|string }}", "[0, 1, 2]"),
        ("{{ {'a': 1}|tojson }}", '{"a": 1}'),
        ("{{ 'abc'.translate({97: 'xy'}) }}", "xybc"),
        ("{{ {'q': 'a b'}|urlencode }}", "q=a+b"),
        ("{{ [1, 2, 3]|batch(2, 0)|list }}", "[[1, 2], [3, 0]]"),
        ("{{ [1, 2, 3]|slice(2)|list }}", "[[1, 2], [3]]"),
        ("{{ 1 ~ [2] ~ 'x' }}", "1[2]x"),
    ],
)
def test_the_bounded_filters_render_as_jinja_does_within_their_bounds(source: str, expected: str) -> None:
    assert render(source) == expected


def test_a_render_past_its_time_bound_is_a_render_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is the test's: each reading is a second later than the one before."""
    now = iter(range(10**6))
    monkeypatch.setattr(templating, "time", SimpleNamespace(monotonic=lambda: float(next(now))))
    with pytest.raises(RenderLimit, match=rf"^the template ran longer than {templating.MAX_SECONDS:g} s$"):
        render("{% for i in range(1000) %}{% endfor %}")


def test_within_the_bounds_it_renders() -> None:
    assert len(render("{{ s * n }}", s="ab", n=50_000)) == 100_000
    assert render("{{ 2 ** 64 }}") == str(2**64)
    assert render("{% for i in range(3) %}{{ i }}{% endfor %}") == "012"


def test_the_sandbox_refuses_unsafe_attributes() -> None:
    with pytest.raises(SecurityError):
        render("{{ s.__class__.__mro__ }}", s="x")


def test_the_tracer_is_restored_after_a_render() -> None:
    import sys

    before = sys.gettrace()
    with pytest.raises(RenderLimit):
        render("{{ 2 ** n }}", n=1000)
    assert sys.gettrace() is before


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("{{ 1/0 }}", "a division by zero always fails"),
        ("{{ x // 0 }}", "a division by zero always fails"),
        ("{{ 10 % 0 }}", "an expression that always fails: ZeroDivisionError"),
        ("{{ -'a' }}", "an expression that always fails: TypeError"),
        ("{{ 'x' * 1000000000 }}", "repetition of more than"),
        ("{{ 2 ** 100000 }}", "exponent too large"),
        ("{{ range(100000) }}", "range() of more than"),
        ("{% include 'x' %}", "'include' is not supported in scenario templates"),
        ("{% from 'm' import f %}", "'fromimport' is not supported in scenario templates"),
    ],
)
def test_check_refuses_what_always_fails(source: str, why: str) -> None:
    with pytest.raises(TemplateError) as caught:
        templating.check(ENV, source)
    assert why in str(caught.value)


@pytest.mark.parametrize("source", ["{{ 1 / (input|length - 4) }}", "{{ x * 3 }}", "plain", "{{ range(5)|list }}"])
def test_check_accepts_what_may_render(source: str) -> None:
    templating.check(ENV, source)


@pytest.mark.parametrize(
    ("source", "needs"),
    [
        ("plain text", False),
        ("hi {{ who }}!", False),
        ("{{ a.b }}", False),
        ("{{ a + 1 }}", True),
        ("{% if a %}x{% endif %}", True),
        ("{{ data.sku }} is short by {{ data.shortage }} units.", False),
        ("tools.get({ sku: {{ sku }} }); text(JSON.stringify({ n: 1 }))", False),
        ("{{ a }}" * 9, True),
        ("{ {{ a|upper }} }", True),
        ("{{ a }} {# note #}", True),
    ],
)
def test_only_templates_that_do_work_render_off_the_loop(source: str, needs: bool) -> None:
    assert templating.needs_thread(source) is needs


def test_render_off_loop_keeps_the_bounds() -> None:
    template = ENV.from_string("{{ 2 ** n }}")
    assert asyncio.run(templating.render_off_loop(template, {"n": 10})) == "1024"
    with pytest.raises(RenderLimit):
        asyncio.run(templating.render_off_loop(template, {"n": 1000}))
