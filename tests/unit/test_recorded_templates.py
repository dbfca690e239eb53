"""A recorded message becomes a template that renders to exactly the text the model answered,
whatever the text says: Jinja's own syntax, a raw block's end, an unbalanced raw block."""

from __future__ import annotations

import pytest
from jinja2 import StrictUndefined

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.recording import template_for

ENV = templating.BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


@pytest.mark.parametrize(
    "text",
    [
        "plain text, 42 units",
        "use {{ name }} and {% if x %}",
        "a raw block ends with {% endraw %} and then {{ 7 * 6 }} runs",
        "{% raw %} never closed",
        "closed {% endraw %} never opened {%- endraw -%} {#",
        "ends with a brace {",
        "{{ '{' }} already escaped {% endraw %}",
    ],
)
def test_a_recorded_text_renders_back_to_itself(text: str) -> None:
    assert templating.render(ENV.from_string(template_for(text, [])), {}) == text


def test_a_quoted_value_stays_an_expression_beside_an_endraw() -> None:
    text = "sku_123 has 42 units {% endraw %} {{ x }}"
    template = template_for(text, [("output.units", "42")])
    assert "{{ output.units }}" in template
    assert templating.render(ENV.from_string(template), {"output": {"units": 42}}) == text
