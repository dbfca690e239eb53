"""A template that reads no name a request gives renders the same at every request: it is rendered
when its scenario is added (`templating.check_renders`), and refused if that render fails, with
what the render at play would say. Before, each of these passed `validate` and the admin API's
add, then failed every request that played it."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError, load_scenario

TEN = " ".join("{{ ('a'*100000) ~ ('b'*100000) }}" for _ in range(10))


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{{ '{:>999999}'.format('a') }}", "builds more than 1000000 characters"),
        ("{{ '{:.999999f}'.format(1.5) }}", "builds more than 1000000 characters"),
        ("{{ '{:{}}'.format('a', 999999) }}", "a format width of more than 1000000 characters"),
        ("{{ ('a'*100000)[::-1] * 150 }}", "repetition of more than 100000 items"),
        ("{{ 'a'.center(999999) ~ 'a'.center(999999) }}", "builds more than 1000000 characters"),
        (TEN, "rendered more than 1000000 characters"),
        ("{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}", "more than 200000 steps"),
        ("hello {{ x }}", "template error: 'x' is undefined"),
        ("{% set n = 0 %}{{ 10 // n }}", "template error: ZeroDivisionError: integer division or modulo by zero"),
    ],
)
def test_a_template_that_always_fails_is_refused_when_added(
    template: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The render's clock held still: a busy machine (load 17) had the 0.5 s time bound pre-empt the
    # bound on steps these cases are about (the time bound's own tests move the clock themselves).
    monkeypatch.setattr(templating, "_clock", lambda: 0.0)
    with pytest.raises(ScenarioError) as refused:
        load_scenario({"name": "t", "match": {"input": "^go (?P<who>\\w+)$"}, "turns": [{"message": template}]})
    assert "turns.0.message: invalid template: template error: " in str(refused.value)
    assert said in str(refused.value)


@pytest.mark.parametrize(
    "template",
    [
        "hello {{ input }}",  # the request's
        "hello {{ who }}",  # a capture
        "{{ who * 200000 }}",  # fails only for some captures: not rendered
        "{{ output.nowhere.deeper }}",  # a name of the render's context
        "{% if x is defined %}{{ x }}{% endif %}ok",  # renders, though x is no name
        "{{ 1 // [0, 1]|random }}",  # may differ from one render to the next
        # random asked for by name: it was rendered, and refused at random (here always: [0])
        "{{ 10 // ([[0]]|map('random')|first) }}",
        # longer than 16,384 characters: not compiled when added (one call of Python's compile
        # held every client 0.56 s for a 1.5 MB template); it was rendered, and refused
        "{% set n = 0 %}{{ 10 // n }}" + " " * 16_384,
        "{{ 'a' * 10 }} plain",
    ],
)
def test_a_template_a_request_may_change_or_that_renders_is_kept(template: str) -> None:
    scenario = load_scenario({"name": "t", "match": {"input": "^go (?P<who>\\w+)$"}, "turns": [{"message": template}]})
    assert scenario.turns[0].message == template


def test_program_code_is_rendered_as_it_plays_and_the_admin_api_refuses_it(unit_http: TestClient) -> None:
    reply = unit_http.post("/_emulator/scenarios", json={"name": "p", "turns": [{"program": "return {{ x }};"}]})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert (
        error["code"] == "invalid_scenario" and "turns.0.program: invalid template: template error" in error["message"]
    )
    ok = unit_http.post("/_emulator/scenarios", json={"name": "q", "turns": [{"program": "return {{ 'a' ~ 'b' }};"}]})
    assert ok.status_code == 201, ok.text
    unit_http.delete("/_emulator/scenarios/q")


def test_the_names_a_check_takes_as_given_are_those_a_render_sees() -> None:
    """A name the render's context has and the check did not take as given would make the check
    render, and refuse, a template a request may change."""
    from ptc_emulator.emulator.model.scripted.player import _template_context
    from ptc_emulator.emulator.model.scripted.scenario import TEMPLATE_NAMES

    class _Empty:
        def after_anchor(self) -> list[object]:
            return []

    assert set(_template_context(_Empty(), [])) | {"input"} == TEMPLATE_NAMES  # type: ignore[arg-type]
