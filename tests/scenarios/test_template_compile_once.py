"""A scenario's templates are bounded in source and compiled once, when the scenario is added.

Lexing a template and Python's `compile()` of its code are single C calls that hold the
interpreter, so every client waits on them even from a worker thread: a text with no template
syntax is never lexed (it renders as itself), a template is bounded in length and in tags, and
each is compiled at add and kept (by weight) for the requests that render it. The tests count
lexer and compile calls, never time.
"""

from __future__ import annotations

import contextlib
import gc
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.caches import Weighed
from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.recording import _raw
from ptc_emulator.emulator.model.scripted.scenario import TEXT_ENV
from tests.api.api_support import assert_envelope

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def app_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path, pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, marker: str) -> list[int]:
    """Count the calls of the environments' `name` (`_tokenize`, `_compile`) on a source holding `marker`."""
    calls: list[int] = []
    real = getattr(templating.BoundedEnvironment, name)

    def counted(self: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        if marker in str(source):
            calls.append(1)
        return real(self, source, *args, **kwargs)

    monkeypatch.setattr(templating.BoundedEnvironment, name, counted)
    return calls


async def _add(http: httpx.AsyncClient, name: str, message: str) -> httpx.Response:
    scenario = {"name": name, "match": {"input": f"^{name}$"}, "turns": [{"message": message}]}
    return await http.post("/_emulator/scenarios", json=scenario, headers=JSON)


async def _play(http: httpx.AsyncClient, name: str) -> httpx.Response:
    return await http.post("/v1/responses", json={"model": "m", "input": name, "store": False}, headers=JSON)


async def test_a_text_with_no_template_syntax_is_never_lexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a 6 MB plain text was lexed at add and at every play (0.4 s with every client held).
    text = "plain {braces} " + "ab" * 100_000 + "\r\nend\n"
    lexed = _counting(monkeypatch, "_tokenize", "plain {braces}")
    async with app_client(tmp_path) as http:
        assert (await _add(http, "plain", text)).status_code == 201
        for _ in range(2):
            reply = await _play(http, "plain")
            assert reply.status_code == 200, reply.text
            assert reply.json()["output"][0]["content"][0]["text"] == text.replace("\r\n", "\n")
    assert lexed == []


@pytest.mark.parametrize(
    "text",
    [
        "r" * 121_000 + " {{ not a tag }} " + "s" * 100,  # kept in `{% raw %}...{% endraw %}`
        "e" * 24_000 + " {% endraw %} " + "{" * 2_100 + "\r\nend",  # each `{` as `{{ '{' }}`
    ],
)
async def test_a_recorded_text_kept_literal_is_added_and_played_unlexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # Before: the raw block's and the escapes' contents counted as template syntax: 121 KB with one
    # `{{` was refused as over 100,000 characters (a recording silently not kept), 24 KB saying
    # `{% endraw %}` with 2,100 `{` as "2102 tags" (a 400).
    kept = _raw(text)
    assert kept != text
    lexed = _counting(monkeypatch, "_tokenize", text[:50])
    async with app_client(tmp_path) as http:
        reply = await _add(http, "recorded", kept)
        assert reply.status_code == 201, reply.text
        for _ in range(2):
            reply = await _play(http, "recorded")
            assert reply.status_code == 200, reply.text
            assert reply.json()["output"][0]["content"][0]["text"] == text.replace("\r\n", "\n")
    assert lexed == []


async def test_syntax_beside_a_raw_block_is_still_bounded(tmp_path: Path) -> None:
    # Raw blocks are data, but a tag outside them is syntax: the text is lexed, so bounded.
    async with app_client(tmp_path) as http:
        raw = "{% raw %}" + "{{" * 10 + "{% endraw %}"
        reply = await _add(http, "tags", raw + "{{ input }}" * (templating.MAX_TEMPLATE_TAGS + 1))
        assert_envelope(reply, 400, f"more than {templating.MAX_TEMPLATE_TAGS} tags ({{{{, {{%, {{#): 2001")
        reply = await _add(http, "long", _raw("x" * templating.MAX_TEMPLATE_SYNTAX_CHARS + "{{") + "{{ input }}")
        assert_envelope(reply, 400, f"of more than {templating.MAX_TEMPLATE_SYNTAX_CHARS} characters")
        reply = await _add(http, "fine", raw + "{{ input }}")
        assert reply.status_code == 201, reply.text
        reply = await _play(http, "fine")
        assert reply.json()["output"][0]["content"][0]["text"] == "{{" * 10 + "fine"


async def test_a_template_longer_than_a_render_may_output_is_refused_at_add(tmp_path: Path) -> None:
    # Before: accepted (201), and every play a 400 ("rendered more than 1000000 characters").
    async with app_client(tmp_path) as http:
        reply = await _add(http, "long", "a" * (templating.MAX_OUTPUT_CHARS + 1))
        assert_envelope(reply, 400, "a template of more than 1000000 characters")
        reply = await _add(http, "syntax", "{{ input }}" + "a" * templating.MAX_TEMPLATE_SYNTAX_CHARS)
        assert_envelope(reply, 400, f"of more than {templating.MAX_TEMPLATE_SYNTAX_CHARS} characters")
        reply = await _add(http, "tags", "{{ input }}" * (templating.MAX_TEMPLATE_TAGS + 1))
        assert_envelope(reply, 400, f"more than {templating.MAX_TEMPLATE_TAGS} tags")


async def test_a_long_template_is_compiled_once_at_add(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a template over 16 KiB was compiled at every play (1.5 MB: 1.1-2.2 s with every client held).
    marker = "long-one"
    template = "{{ input[:0] }}" + "{% if true %}x{% endif %}" * 800 + marker
    assert len(template) > 16_384
    compiles = _counting(monkeypatch, "_compile", marker)
    async with app_client(tmp_path) as http:
        assert (await _add(http, "long", template)).status_code == 201
        assert len(compiles) == 1
        for _ in range(3):
            reply = await _play(http, "long")
            assert reply.status_code == 200, reply.text
    assert len(compiles) == 1


async def test_a_template_python_cannot_compile_is_refused_at_add_with_plays_words(tmp_path: Path) -> None:
    # Before: accepted (201, and `validate` said valid); every play a 400 "SyntaxError: too many
    # statically nested blocks".
    template = "{% for a in [1] %}" * 25 + "{{ input }}" + "{% endfor %}" * 25
    async with app_client(tmp_path) as http:
        reply = await _add(http, "nested", template)
        assert_envelope(reply, 400, "template error: SyntaxError: too many statically nested blocks")


@pytest.mark.parametrize(
    "template",
    [
        "{{ 10 // ([[0]]|map('ran' ~ 'dom')|first) }}",
        "{% set f = 'ran' ~ 'dom' %}{{ 10 // ([[0]]|map(f)|first) }}",
    ],
)
async def test_random_reached_by_a_computed_name_is_not_rendered_at_add(tmp_path: Path, template: str) -> None:
    # Before: rendered at add (the source does not name `random`), and refused: ZeroDivisionError.
    async with app_client(tmp_path) as http:
        assert (await _add(http, "rnd", template)).status_code == 201


def test_the_compiled_templates_are_kept_by_weight_no_lighter_than_they_are() -> None:
    # Before: a count of 1024 templates of 16 KiB each, each 0.6-0.9 MB compiled (800 MB resident).
    # The weight given is no less than what the compiled template holds (measured here).
    template = "{{input}}" * 900
    templating._COMPILED.clear()
    gc.collect()
    tracemalloc.start()
    try:
        templating.compiled(TEXT_ENV, template)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < held <= templating._COMPILED.weight
    assert templating._COMPILED.bound == templating.MAX_COMPILED_WEIGHT


def test_a_weighed_cache_holds_no_more_than_its_bound() -> None:
    cache = Weighed(100)
    for key in range(10):
        cache.put(key, str(key), 30)
        assert cache.weight <= 100
    assert len(cache) == 3 and cache.get(9) == "9" and cache.get(0) is None
    cache.put("heavy", "x", 101)
    assert cache.get("heavy") is None
    cache.clear()
    assert len(cache) == 0 and cache.weight == 0


def test_a_long_template_is_not_matched_against_the_trivial_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: `needs_thread` ran its pattern over the whole text on the event loop (0.19 s per MB).
    looked: list[int] = []
    real = templating._TRIVIAL

    class Spy:
        def fullmatch(self, source: str) -> Any:
            looked.append(len(source))
            return real.fullmatch(source)

    monkeypatch.setattr(templating, "_TRIVIAL", Spy())
    assert templating.needs_thread("{a" * 450_000 + "{{ input }}")
    assert not templating.needs_thread("{a" * 450_000)
    assert looked == []
