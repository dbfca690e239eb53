"""A template's method calls are bounded before they run, in proportion to their input.

The step and time bounds are checked between template steps: one C call inside a step is never
cut off. `output.encode('punycode')` on a tool output of 80,000 CJK characters ran 18-26 s (the
codec is quadratic) before the render met its 0.5 s bound, and held the interpreter, so every
other request, meanwhile. `encode` and `decode` now take only linear codecs (refused when the
scenario is added if the codec is written in the template, at render otherwise), `strip` with the
characters to strip is bounded by the work it does, and a method of a built-in value that is not
on the template's list of methods is refused.
"""

from __future__ import annotations

import openai
import pytest

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.template_support import answered, scenario

# bounds on work, not time: the render's clock is held still (tests/scenarios/conftest.py)
pytestmark = pytest.mark.usefixtures("still_clock")

CJK = "中文字符" * 20_000
"""80,000 CJK characters: what a tool output brought back."""


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ output.encode('punycode')|length }}", "the codec 'punycode' is not available"),
        ("{{ output.encode(encoding='idna')|length }}", "the codec 'idna' is not available"),
        ("{{ output.encode('utf-7')|length }}", "the codec 'utf-7' is not available"),
        ("{{ output.encode().decode('unicode_escape')|length }}", "the codec 'unicode_escape' is not available"),
        ("{{ output.encode('ascii', 'namereplace')|length }}", "the error handler 'namereplace' is not available"),
    ],
)
def test_a_codec_written_in_the_template_that_is_not_linear_is_refused_when_added(
    ptc_emulator: PTCEmulator, template: str, why: str
) -> None:
    with pytest.raises(ValueError, match=r"turns\.1\.message: invalid template: line 1: ") as caught:
        ptc_emulator.add_scenario(scenario(template))
    assert why in str(caught.value)


def test_a_codec_computed_at_render_is_refused_before_it_runs(ptc_emulator: PTCEmulator) -> None:
    """The hostile scenario with its codec out of reach of the check when added: the continuation
    answering 80,000 CJK characters gets the 400 naming the codec, not the one of a render that ran
    too long (punycode never ran: it would have), and the server goes on answering."""
    ptc_emulator.add_scenario(scenario("{{ output.encode('puny' ~ 'code')|length }}"))
    refused = answered(ptc_emulator, CJK)
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "the codec 'punycode' is not available in templates" in refused.message


def test_a_linear_codec_still_renders(ptc_emulator: PTCEmulator) -> None:
    template = (
        "{{ output.encode('utf-8')|length }} {{ output.encode('UTF8').decode('utf-8')|length }}"
        " {{ output.encode('latin-1', 'xmlcharrefreplace')[:8].decode('ascii') }}"
        " {{ output.encode('utf-16-le')|length }} {{ output.encode('ascii', 'ignore')|length }}"
    )
    ptc_emulator.add_scenario(scenario(template))
    assert answered(ptc_emulator, CJK) == "240000 80000 &#20013; 160000 0"


@pytest.mark.parametrize(
    "template",
    [
        "{{ (output[:1] * 20000).strip('a' * 2000 ~ output[:1])|length }}",
        "{{ (output[:1] * 20000)|trim('a' * 2000 ~ output[:1])|length }}",
        "{{ (output[:1] * 20000).encode().rstrip(('a' * 2000 ~ output[:1]).encode())|length }}",
    ],
    ids=["strip", "trim-filter", "bytes-rstrip"],
)
def test_a_strip_by_many_characters_is_refused_before_it_runs(ptc_emulator: PTCEmulator, template: str) -> None:
    """Python looks each character it strips up in the characters given, one after the other, in one
    C call: 100,000 characters stripped by 500,000 took 2.8 s. The work is bounded first."""
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, "z")
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "a strip of a text of 20000 characters by 2001 characters" in refused.message


def test_a_strip_by_a_few_characters_still_renders(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(scenario("{{ output.strip(' z')|length }}|{{ output|trim('z ') }}|{{ output|trim }}"))
    assert answered(ptc_emulator, "  zz ab zz ") == "2|ab|zz ab zz"


@pytest.mark.parametrize(
    "template",
    [
        "{{ (output * 100 ~ output * 100 ~ output * 100).encode('utf-32')|length }}",
        "{{ (output * 100 ~ output * 100 ~ output * 100 ~ output * 100).upper()|length }}",
    ],
    ids=["encode-utf-32", "upper-method"],
)
def test_what_a_method_builds_is_bounded_before_it_runs(ptc_emulator: PTCEmulator, template: str) -> None:
    """`encode` (four bytes a character in UTF-32) and the case methods (`'ß'.upper()` is `'SS'`)
    build more than their text: counted before they run, as the filters that do are. Both used to
    build it first (under the render's total) and print its length."""
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, "ß" * 1000)
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert "an operation that builds more than 1000000 characters" in refused.message


def test_a_method_not_on_the_templates_list_is_refused(
    ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every method of a built-in value a template may call is listed with its bound; one that is
    not (here `casefold`, taken off the list, as a method a later Python adds would be) is refused
    before it runs, never reached unbounded."""
    ptc_emulator.add_scenario(scenario("{{ output.casefold() }}"))
    assert answered(ptc_emulator, "AB") == "ab"
    monkeypatch.setitem(templating._METHODS, str, templating._METHODS[str] - {"casefold"})
    refused = answered(ptc_emulator, "AB")
    assert isinstance(refused, openai.BadRequestError)
    assert "the method str.casefold() is not available in templates" in refused.message
