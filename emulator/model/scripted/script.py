"""The scripted model: decides what the "model" says for the latest user message.

Two ways, tried in this order:

1. Scenarios (`scenario.py`): the first registered scenario that matches plays its turns.
2. Inline: a user message with a fenced code block tagged `js` or `javascript` is answered with a
   program whose code is exactly that block, then a final message whose text is the program's
   result (or, if the program ends `incomplete`, says why). A block tagged `tool_search` before
   it makes the model search for deferred tools first: its text is the query, or `load: a, b`
   names the tools to load (docs/tool-search.md). A message with only that block is answered with
   the search and a message naming what it loaded.

Templates (Jinja2, sandboxed, undefined names are errors) see:

    <capture>   each named group of the scenario's `match.input`
    input       the latest user message
    result      the latest program's result (a string); `data` is it parsed as JSON, or None
    program     {"status", "result", "call_id"} of the latest program_output, or None
    output      the latest direct function call's output, parsed as JSON when it is JSON
    outputs     {tool name: output} for the direct calls since the user message
    loaded      the qualified names of the tools the latest tool search loaded, or []

In `program` code and `call` arguments every `{{ ... }}` is inserted JSON-encoded.

A turn's templates are rendered in a worker thread before the turn plays (`Script.prerender`):
a template may run up to its bounds (`templating.py`), and that must not hold up the event loop.
The context is made in that thread too (or in one of its own when its tool outputs are long):
parsing megabytes of outputs as JSON must not hold it up either.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from jinja2 import ChainableUndefined, Template, TemplateError, Undefined

from ptc_emulator.emulator import jsontext, messages
from ptc_emulator.emulator.caches import PROCESS, Memo
from ptc_emulator.emulator.errors import ScenarioTurnError
from ptc_emulator.emulator.model.core import Delivery, Prepared
from ptc_emulator.emulator.model.runtime import ProgramPlan
from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.scenario import CODE_ENV, TEXT_ENV, Fault, Scenario, SearchSpec, Turn

__all__ = ["INLINE", "Script", "ScriptedPlan", "inline_code", "inline_search", "placeholder_code", "scripted_plan"]

INLINE = "inline"
# Both fences on lines of their own: a ``` inside a line (in a string or a comment) does not end
# the block.
_FENCE = re.compile(r"^```(?:js|javascript)[ \t]*\r?\n(.*?)^```[ \t]*\r?$", re.S | re.I | re.M)
_SEARCH_FENCE = re.compile(r"```tool_search[ \t]*\r?\n(.*?)\r?\n?```", re.S | re.I)
LOADED_MESSAGE = (
    "{% if loaded %}Tool search loaded {{ loaded | join(', ') }}.{% else %}Tool search loaded no tools.{% endif %}"
)


def inline_code(text: str) -> str | None:
    """The first fenced `js`/`javascript` block of a message, exactly as written."""
    found = _FENCE.search(text)
    if not found:
        return None
    code = found.group(1)
    return code[:-2] if code.endswith("\r\n") else code[:-1] if code.endswith("\n") else code


def inline_search(text: str) -> SearchSpec | None:
    """The first fenced `tool_search` block: a query, or `load: name, name`."""
    found = _SEARCH_FENCE.search(text)
    if found is None:
        return None
    body = found.group(1).strip()
    if body.lower().startswith("load:"):
        names = [n for n in re.split(r"[\s,]+", body[5:]) if n]
        return SearchSpec(load=names)
    return SearchSpec(query=body)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


_text_env = TEXT_ENV  # the scenario's check renders in these too (`scenario.TEXT_ENV`)
_code_env = CODE_ENV


def _placeholder_json(value: Any) -> str:
    """A value inserted into program code; what no request has given yet (an undefined name) is `null`."""
    if isinstance(value, Undefined):
        return "null"
    try:
        return _json(value)
    except (TypeError, ValueError):
        return "null"


_placeholder_env = templating.BoundedEnvironment(
    undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=True, finalize=_placeholder_json
)


def placeholder_code(template: str) -> str | None:
    """A program turn's code with every name a request would give (captures, `result`, `data`,
    ...) inserted as `null`, where the JavaScript around it can be parsed; None when the template
    does not render without a request."""
    try:
        if templating.is_literal(template, _placeholder_env):
            return templating.literal(_placeholder_env, template)
        return templating.render(templating.compiled(_placeholder_env, template), {})
    except Exception:  # a template that needs real values (a filter on one): nothing to parse
        return None


_SHARED_CODE_CHARS = 16_384
"""An inline block up to this long has its turns made once (at most 256 of them are kept)."""


@functools.lru_cache(maxsize=256)
def _inline_turns(code: str) -> tuple[Turn, Turn]:
    """An inline block's turns, shared as a scenario's are (nothing changes a turn once made)."""
    return Turn(program=code), Turn(message="{{ result }}")


def _compiled(env: templating.BoundedEnvironment, template: str) -> Template:
    """Compiled once, kept by weight (`templating.compiled`): a scenario's templates are compiled
    when it is added, and its requests render them."""
    return templating.compiled(env, template)


PROCESS.add("inline blocks' turns", Memo(_inline_turns))


_Rendered = dict[tuple[int, str], "str | Exception"]

_prerendered: ContextVar[tuple[dict[str, Any], _Rendered] | None] = ContextVar("_prerendered", default=None)
"""The current turn's templates, rendered off the event loop for this context (by identity)."""

_MISS = object()

_NAME_ONLY = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PLAIN_NAMES = frozenset({"result", "output"})
"""Names the player puts in a turn's context that hold text (jinja gives some other names, such
as `self`, a meaning of its own)."""


def _name_only(template: str, context: dict[str, Any], variables: dict[str, Any]) -> str | None:
    """A text template that is exactly `{{ name }}` with a string value (an inline script's final
    message, `{{ result }}`): what rendering it gives, without a render. None: render it."""
    found = _NAME_ONLY.fullmatch(template)
    if found is None or found.group(1) not in _PLAIN_NAMES:
        return None
    name = found.group(1)
    value = context[name] if name in context else variables.get(name)
    if type(value) is not str:
        return None  # another type prints as `str()` of it
    if len(value) > templating.MAX_OUTPUT_CHARS and name != "result":
        return None  # a longer text is refused by the render
    # A program's result is bounded by --max-output-bytes, not by a render's output: one of more
    # than 1,000,000 characters within it (an inline block's final message quotes it whole) was
    # a 400 naming a template the client never wrote, on every retry of the request.
    return value


def _not_json(constant: str) -> Any:
    """`json.loads` reads NaN, Infinity and -Infinity, which JSON has not: call arguments that
    hold one would reach the client as text no JSON parser reads."""
    raise ValueError(f"{constant} is not JSON")


def _render_all(jobs: list[tuple[templating.BoundedEnvironment, str]], context: dict[str, Any]) -> _Rendered:
    done: _Rendered = {}
    for env, template in jobs:
        try:
            done[(id(env), template)] = templating.render(_compiled(env, template), context)
        except Exception as e:  # raised again, as it would have been, when the turn asks for it
            done[(id(env), template)] = e
    return done


@dataclass
class Script:
    name: str
    turns: list[Turn]
    variables: dict[str, Any] = field(default_factory=dict)
    scenario: Scenario | None = None

    @classmethod
    def inline(cls, code: str | None, search: SearchSpec | None = None) -> Script:
        if search is None and code is not None and len(code) <= _SHARED_CODE_CHARS:
            return cls(INLINE, list(_inline_turns(code)))
        turns = [Turn(search=search)] if search is not None else []
        if code is not None:
            turns += [Turn(program=code), Turn(message="{{ result }}")]
        else:
            turns.append(Turn(message=LOADED_MESSAGE))
        return cls(INLINE, turns)

    @property
    def is_inline(self) -> bool:
        return self.scenario is None

    def code(self, index: int, context: dict[str, Any]) -> str:
        turn = self.turns[index]
        assert turn.program is not None
        if self.is_inline:
            return turn.program  # exactly the block, never templated
        return self._render(_code_env, turn.program, context, index)

    def text(self, index: int, template: str, context: dict[str, Any]) -> str:
        return self._render(_text_env, template, context, index)

    def arguments(self, index: int, arguments: dict[str, Any] | str, context: dict[str, Any]) -> str:
        if isinstance(arguments, str):
            rendered = self._render(_code_env, arguments, context, index)
            try:
                value = jsontext.loads(rendered, parse_constant=_not_json)
            except ValueError as e:  # not JSON, NaN or Infinity, or an integer past Python's 4300 digits
                raise self.error(index, messages.arguments_not_json(str(e))) from e
        else:
            value = self._render_values(arguments, context, index)
        if not isinstance(value, dict):
            raise self.error(index, messages.arguments_not_object())
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    def _render_values(self, value: Any, context: dict[str, Any], index: int) -> Any:
        if isinstance(value, str):
            return self._render(_text_env, value, context, index)
        if isinstance(value, list):
            return [self._render_values(v, context, index) for v in value]
        if isinstance(value, dict):
            return {k: self._render_values(v, context, index) for k, v in value.items()}
        return value

    def _templates(self, index: int) -> list[tuple[templating.BoundedEnvironment, str]]:
        """The templates turn `index` renders, with the environment each one renders in."""
        turn = self.turns[index]
        found: list[tuple[templating.BoundedEnvironment, str]] = []

        def values(value: Any) -> None:
            if isinstance(value, str):
                found.append((_text_env, value))
            elif isinstance(value, list):
                for v in value:
                    values(v)
            elif isinstance(value, dict):
                for v in value.values():
                    values(v)

        def arguments(value: dict[str, Any] | str | None) -> None:
            if isinstance(value, str):
                found.append((_code_env, value))
            else:
                values(value)

        if turn.program is not None and not self.is_inline:
            found.append((_code_env, turn.program))
        for spec in turn.calls:
            if spec.input is not None:
                found.append((_text_env, spec.input))
            arguments(spec.arguments)
        if turn.mcp is not None:
            arguments(turn.mcp.arguments)
        if turn.code_interpreter is not None:
            found.append((_text_env, turn.code_interpreter.code))
        if turn.shell is not None:
            found += [(_text_env, command) for command in turn.shell.commands]
        if turn.search is not None:
            if turn.search.query is not None:
                found.append((_text_env, turn.search.query))
            arguments(turn.search.arguments)
        for text in (turn.preamble, turn.message, turn.refusal, turn.on_program_error):
            if text is not None:
                found.append((_text_env, text))
        return [(env, t) for env, t in found if templating.needs_thread(t, env)]

    async def prerender(self, index: int, make: Callable[[], dict[str, Any]], *, heavy: bool) -> dict[str, Any]:
        """Turn `index`'s context, `make()`, with the turn's templates rendered for it in a worker
        thread; the turn's `code`, `text` and `arguments` with the context returned then take the
        results (errors included). The context is made in that thread too, and in one even with
        no template to render when it is `heavy` (long tool outputs to parse as JSON: 13 MB of
        them held the event loop for seconds)."""
        jobs = self._templates(index)
        if not jobs and not heavy:
            return make()

        def work() -> tuple[dict[str, Any], _Rendered | None]:
            context = make()
            return context, _render_all(jobs, {**self.variables, **context}) if jobs else None

        context, done = await asyncio.to_thread(work)
        if done is not None:
            _prerendered.set((context, done))
        return context

    def _render(self, env: templating.BoundedEnvironment, template: str, context: dict[str, Any], index: int) -> str:
        try:
            if templating.is_literal(template, env):
                return templating.literal(env, template)  # no syntax: never lexed nor rendered
            if env is _text_env:
                plain = _name_only(template, context, self.variables)
                if plain is not None:
                    return plain
            entry = _prerendered.get()
            if entry is not None and entry[0] is context:
                hit = entry[1].get((id(env), template), _MISS)
                if isinstance(hit, Exception):
                    raise hit
                if isinstance(hit, str):
                    return hit
            return templating.render(_compiled(env, template), {**self.variables, **context})
        except TemplateError as e:
            raise self.error(index, messages.template_error(str(e))) from e
        except Exception as e:  # a template's own arithmetic or a filter on the wrong type: never a 500
            raise self.error(index, messages.template_failed(type(e).__name__, str(e))) from e

    def error(self, index: int, reason: str) -> ScenarioTurnError:
        """A 400 that names this script's turn (`reason`: a catalogue text)."""
        return messages.scenario_turn(self.name, index, reason)


@dataclass(frozen=True, kw_only=True)
class ScriptedPlan(ProgramPlan):
    """The scripted model's plan for one response (a `model.core.Plan`): what the runtime reads
    (`ProgramPlan`: the tools, the server-side tools, the open program's call positions), the
    script, where this conversation stands in it, and the fault of the turn it starts."""

    script: Script
    turn: int = 0
    """The next turn of the script to play (after resuming the open program, if any)."""
    emitted: int = 0
    """Direct calls of that turn already emitted (it is a `call` turn played one call at a time)."""
    fault: Fault | None = None
    """The fault of the turn this response starts (not of a program it resumes)."""

    @property
    def delivery(self) -> Delivery | None:
        fault = self.fault
        if fault is None:
            return None
        return Delivery(
            latency_ms=fault.latency_ms,
            response_incomplete=fault.response_incomplete,
            cut_stream_after=fault.cut_stream_after,
        )


def scripted_plan(prepared: Prepared) -> ScriptedPlan:
    """The scripted model's plan of a response it plays."""
    plan = prepared.plan
    assert isinstance(plan, ScriptedPlan), "a response the scripted model plays has its plan"
    return plan
