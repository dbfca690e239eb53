"""Jinja rendering for scenario templates, bounded in time, work and output.

Templates come from whoever can add a scenario. Jinja's sandbox stops attribute tricks but not
work: nested `range(100000)` loops, `'x' * 10**9`, or a loop over a long input. Here:

* every template is compiled when its scenario is added (`check`), so a syntax error is a 400
  naming the field then; `include`, `import` and `extends` are refused (there is no loader), and
  so is an expression of constants that can only fail (`{{ 1/0 }}`, `range(10**6)`,
  `'x' * 10**9`): it would fail on every request;
* rendering counts the lines the compiled template executes and stops at `MAX_STEPS` or after
  `MAX_SECONDS`, whichever comes first (`RenderLimit`);
* `range` is capped, and string or list repetition and `**` are bounded before they run;
* the output is capped at `MAX_OUTPUT_CHARS`;
* `render_off_loop` renders in a worker thread, so a template that runs to its bounds delays
  only its own request, never the event loop.
"""

from __future__ import annotations

import asyncio
import operator
import re
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from jinja2 import Template, TemplateError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_SECONDS",
    "MAX_STEPS",
    "BoundedEnvironment",
    "RenderLimit",
    "check",
    "needs_thread",
    "render",
    "render_off_loop",
]

MAX_STEPS = 200_000
MAX_SECONDS = 0.5
MAX_OUTPUT_CHARS = 1_000_000
MAX_RANGE = 10_000
MAX_REPEAT_CHARS = 100_000


class RenderLimit(TemplateError):
    pass


def _bounded_range(*args: Any) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise RenderLimit(f"range() of more than {MAX_RANGE} items")
    return r


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _bounded_range

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            if isinstance(right, int | float) and abs(right) > 64:
                raise RenderLimit("exponent too large")
        elif operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(n, int) and len(seq) * n > MAX_REPEAT_CHARS:
                    raise RenderLimit(f"repetition of more than {MAX_REPEAT_CHARS} items")
        return super().call_binop(context, operator, left, right)


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
    """Compile `source` now (a `TemplateError` if it cannot be), refuse what has no loader, and
    refuse an expression of constants that fails (it would fail on every request)."""
    tree = env.parse(source)
    for node in tree.find_all(_UNSUPPORTED):
        raise TemplateError(f"'{type(node).__name__.lower()}' is not supported in scenario templates")
    for expr in tree.find_all((nodes.BinExpr, nodes.UnaryExpr, nodes.Call)):
        zero = isinstance(expr, nodes.BinExpr) and isinstance(expr.right, nodes.Const) and expr.right.value == 0
        if zero and isinstance(expr, nodes.Div | nodes.FloorDiv):
            raise TemplateError(f"line {expr.lineno}: a division by zero always fails")
        try:
            _constant(env, expr)
        except _NotConstant:
            continue
        except RenderLimit as e:
            raise TemplateError(f"line {expr.lineno}: {e}") from e
        except Exception as e:  # the constants' own arithmetic: 1/0, -'a', 10 % 0
            raise TemplateError(f"line {expr.lineno}: an expression that always fails: {type(e).__name__}: {e}") from e


class _Budget:
    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def tracer(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != "<template>":
            return None
        return self.local

    def local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise RenderLimit(f"the template ran more than {MAX_STEPS} steps")
            if not self.steps % 1000 and time.monotonic() > self.deadline:
                raise RenderLimit(f"the template ran longer than {MAX_SECONDS:g} s")
        return self.local


def render(template: Template, context: dict[str, Any]) -> str:
    """Render under the bounds above; a bound exceeded raises `RenderLimit`."""
    budget = _Budget()
    previous = sys.gettrace()
    sys.settrace(budget.tracer)
    try:
        pieces: list[str] = []
        size = 0
        for piece in template.generate(context):
            size += len(piece)
            if size > MAX_OUTPUT_CHARS:
                raise RenderLimit(f"the template rendered more than {MAX_OUTPUT_CHARS} characters")
            pieces.append(piece)
        return "".join(pieces)
    finally:
        sys.settrace(previous)


def needs_thread(source: str) -> bool:
    """False for a template that does next to no work (plain text, or one `{{ name }}` or
    `{{ name.attr }}`): rendering it on the event loop is cheaper than a thread hop."""
    if "{" not in source:
        return False
    return _TRIVIAL.fullmatch(source) is None


_TRIVIAL = re.compile(r"[^{]*\{\{\s*[A-Za-z_][\w.]*\s*\}\}[^{]*")


async def render_off_loop(template: Template, context: dict[str, Any]) -> str:
    """`render` in a worker thread (the trace that bounds it is per thread)."""
    return await asyncio.to_thread(render, template, context)
