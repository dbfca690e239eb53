"""Jinja rendering for scenario templates, bounded in time, work and output.

Templates come from whoever can add a scenario. Jinja's sandbox stops attribute tricks but not
work: nested `range(100000)` loops, `'x' * 10**9`, or a loop over a long input. Here:

* every template is compiled when its scenario is added (`check`), so a syntax error is a 400
  naming the field then; `include`, `import` and `extends` are refused (there is no loader);
* rendering counts the lines the compiled template executes and stops at `MAX_STEPS` or after
  `MAX_SECONDS`, whichever comes first (`RenderLimit`);
* `range` is capped, and string or list repetition and `**` are bounded before they run;
* the output is capped at `MAX_OUTPUT_CHARS`.
"""

from __future__ import annotations

import sys
import time
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
    "render",
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


def check(env: BoundedEnvironment, source: str) -> None:
    """Compile `source` now (a `TemplateError` if it cannot be) and refuse what has no loader."""
    tree = env.parse(source)
    for node in tree.find_all(_UNSUPPORTED):
        raise TemplateError(f"'{type(node).__name__.lower()}' is not supported in scenario templates")


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
