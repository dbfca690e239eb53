"""A template's reverse searches, its tables of characters and `wordwrap` are bounded before they run.

Each of these ran inside one C call (or one loop of Python's own) with the interpreter held, out
of reach of the step and time bounds, however long: Python searches backwards by trying the needle
at each place in turn (`output.rfind('ab' ~ 'a' * 3000)` on 8,000,000 characters took 5.5 s),
`dict.fromkeys` and `''.maketrans` of a long output make an entry per character (0.5-1 s on
16,000,000), and `wordwrap(1)` of 50,000 characters made 100,000 lines in 0.4 s. Each is now
refused before it runs with a 400 `scenario_error` naming the bound, and the server goes on
answering; the same calls within their bounds still render.
"""

from __future__ import annotations

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.template_support import answered, scenario

# bounds on work, not time: the render's clock is held still (tests/scenarios/conftest.py)
pytestmark = pytest.mark.usefixtures("still_clock")

NEEDLE = "('ab' ~ 'a' * 98)"
"""100 characters, found nowhere in 1,000,000 `'a'`: a reverse search tries it at every place."""
REVERSE = "a reverse search ({}) in a text of 1000000 characters for 100 characters (over 50000000 in all)"
BUILDS = "an operation that builds more than 1000000 characters"


@pytest.mark.parametrize(
    ("template", "output", "why"),
    [
        ("{{ output.rfind(" + NEEDLE + ") }}", "a" * 1_000_000, REVERSE.format("rfind")),
        ("{{ output.rindex(" + NEEDLE + ") }}", "a" * 1_000_000, REVERSE.format("rindex")),
        ("{{ output.rpartition(" + NEEDLE + ")|length }}", "a" * 1_000_000, REVERSE.format("rpartition")),
        ("{{ output.rsplit(" + NEEDLE + ")|length }}", "a" * 1_000_000, REVERSE.format("rsplit")),
        ("{{ output.rsplit(sep=" + NEEDLE + ")|length }}", "a" * 1_000_000, REVERSE.format("rsplit")),
        ("{{ output.encode().rfind(" + NEEDLE + ".encode()) }}", "a" * 1_000_000, REVERSE.format("rfind")),
        ("{{ dict.fromkeys(output)|length }}", "x" * 200_000, BUILDS),
        ("{{ {}.fromkeys(output)|length }}", "x" * 200_000, BUILDS),
        ("{{ ''.maketrans(output, output)|length }}", "x" * 200_000, BUILDS),
        ("{{ ''.maketrans('', '', output)|length }}", "x" * 200_000, BUILDS),
        ("{{ output|wordwrap(1)|length }}", "a-" * 25_000, "the filter 'wordwrap' making more than 20000 lines"),
    ],
    ids=[
        *("rfind", "rindex", "rpartition", "rsplit", "rsplit-sep", "bytes-rfind"),
        *("dict-fromkeys", "instance-fromkeys", "maketrans", "maketrans-deleting", "wordwrap-1"),
    ],
)
def test_a_call_that_would_hold_the_interpreter_is_refused_before_it_runs(
    ptc_emulator: PTCEmulator, template: str, output: str, why: str
) -> None:
    ptc_emulator.add_scenario(scenario(template))
    refused = answered(ptc_emulator, output)
    assert isinstance(refused, openai.BadRequestError)
    assert refused.code == "scenario_error"
    assert why in refused.message
    ptc_emulator.add_scenario({"name": "after", "match": {"input": "^after$"}, "turns": [{"message": "still here"}]})
    assert ptc_emulator.client().responses.create(model="gpt-test", input="after").output_text == "still here"


def test_the_same_calls_within_their_bounds_still_render(ptc_emulator: PTCEmulator) -> None:
    """A reverse search for one character is never bounded (Python looks for it at memory speed),
    a longer needle within the bound is; short tables and a wrap of a few lines render."""
    template = (
        "{{ output.rfind('-') }} {{ output.rfind('a-b') }} {{ output.rindex('b-') }} {{ output.rpartition('-')[2] }}"
        " {{ output.rsplit('-', 1)|length }} {{ output.encode().rfind('a-'.encode()) }}"
        " {{ dict.fromkeys(output)|length }} {{ {}.fromkeys('ab', 0) }}"
        " {{ output.translate(''.maketrans('ab', 'ba', '-')) }} {{ (output * 3)|wordwrap(4, wrapstring='|') }}"
    )
    ptc_emulator.add_scenario(scenario(template))
    assert answered(ptc_emulator, "a-b-a") == "3 0 2 a 2 0 3 {'a': 0, 'b': 0} bab a-b-|aa-|b-|aa-|b-a"
