"""Contract checks: tool I/O against the schemas the request declares.

* A `function_call_output` is checked against its tool's `output_schema` (the guide: "the JSON
  object encoded in its function_call_output.output string").
* The arguments of a call (a program's, or a scenario's direct call) are checked against the
  tool's `parameters` unless the tool says `strict: false` (strict is the Responses API's
  default, and the Response echoes it as `true`).

A violation is reported (journal, warning header); in strict mode it is a 400.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from . import jsontext
from .request import FunctionTool

__all__ = ["Violation", "check_arguments", "check_output"]


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    """`output` (a tool output against output_schema) or `arguments` (against parameters)."""
    tool: str
    call_id: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def describe(self) -> str:
        if self.kind == "output":
            return (
                f"The output of function call {self.call_id} does not match the output_schema of '{self.tool}': "
                f"{self.message}"
            )
        return (
            f"The arguments of function call {self.call_id} do not match the parameters of '{self.tool}': "
            f"{self.message}"
        )


def _first_error(schema: dict[str, Any], value: Any) -> str | None:
    try:
        validator = Draft202012Validator(schema)
        error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(e.path))), None)
    except SchemaError as e:
        return f"the schema itself is invalid ({e.message})"
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
    return f"{error.message}" + (f" (at {where.lstrip('.')})" if where else "")


def _check(kind: str, tool: FunctionTool, call_id: str, schema: dict[str, Any] | None, text: str) -> Violation | None:
    if schema is None:
        return None
    try:
        value = jsontext.loads(text)
    except jsontext.TooDeep:
        return Violation(kind, tool.name, call_id, f"the {kind} nest deeper than {jsontext.MAX_DEPTH} levels")
    except json.JSONDecodeError:
        return Violation(kind, tool.name, call_id, f"the {kind} {'is' if kind == 'output' else 'are'} not JSON")
    problem = _first_error(schema, value)
    return Violation(kind, tool.name, call_id, problem) if problem else None


def check_output(tool: FunctionTool, call_id: str, output: str) -> Violation | None:
    return _check("output", tool, call_id, tool.output_schema, output)


def check_arguments(tool: FunctionTool, call_id: str, arguments: str) -> Violation | None:
    return None if tool.strict is False else _check("arguments", tool, call_id, tool.parameters, arguments)
