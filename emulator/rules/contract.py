"""Contract checks: tool I/O against the schemas the request declares.

* A `function_call_output` is checked against its tool's `output_schema` (the guide: "the JSON
  object encoded in its function_call_output.output string").
* The arguments of a call (a program's, or a scenario's direct call) are checked against the
  tool's `parameters` unless the tool says `strict: false` (strict is the Responses API's
  default, and the Response echoes it as `true`).

* The input of a custom tool call (a program's, or a scenario's direct call) is checked against
  the tool's `format`: a `regex` grammar with RE2 (linear time, as the hosted API's engine), a
  `lark` grammar with the `lark` parser. A grammar that does not compile is a 400 up front.

A violation is reported (journal, warning header); in strict mode it is a 400.
"""

from __future__ import annotations

import enum
import functools
import itertools
import json
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Protocol, TypeAlias

import re2

from ptc_emulator.emulator import collector, jsonpieces, jsonreply, jsontext, messages
from ptc_emulator.emulator.caches import PROCESS, Cache, Memo
from ptc_emulator.emulator.patterns import (
    PatternError,
    PatternTooCostly,
    compile_grammar,
    compile_pattern,
    match_budget,
)
from ptc_emulator.emulator.rules import larkgrammar
from ptc_emulator.emulator.rules.metaschema import formats, meta_problem
from ptc_emulator.emulator.wire.items import (
    CallItem,
    ConfigurationUpdateItem,
    CustomToolCall,
    FunctionCall,
    SchemaTextFormat,
)
from ptc_emulator.emulator.wire.request import Conversational, text_format
from ptc_emulator.emulator.wire.tools import CustomTool, FunctionTool, GrammarFormat, NamespaceTool, ToolSearchTool

__all__ = [
    "MAX_REQUEST_SCHEMA_VALUES",
    "MAX_SCHEMA_IDENTIFIERS",
    "MAX_SCHEMA_PATTERNS",
    "MAX_SCHEMA_VALUES",
    "OFF_LOOP_CHARS",
    "OFF_LOOP_SCHEMA_VALUES",
    "Violation",
    "check_arguments",
    "check_call",
    "check_input",
    "parses_lark",
    "check_output",
    "check_text_formats",
    "check_tools",
    "holds_large_schemas",
    "holds_lark_grammars",
    "import_checkers",
    "schema_problem",
    "schema_values",
    "schema_weight",
]


class _Matcher(Protocol):
    def __call__(self, text: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    """`output` (a tool output against output_schema), `arguments` (against parameters) or `input`
    (a custom tool's input against its format)."""
    tool: str
    call_id: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def describe(self) -> str:
        return messages.contract_broken(self.kind, self.call_id, self.tool, self.message)


OFF_LOOP_CHARS = 65_536
"""A text this long or longer (a tool output, a call's arguments) is checked against its schema in a
worker thread: a check walks every value of it, and the event loop serves other clients meanwhile."""

_NOT_SCHEMAS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are data, not schemas: a `pattern` key inside them is no pattern."""

MAX_SCHEMA_VALUES = 50_000
"""The values one tool schema may hold (every object, array, string, number, boolean and null,
`enum`, `const`, `default` and `examples` contents included), counted before the meta-schema check:
that check and the compile take time in proportion to the schema (some 0.2 ms a subschema), and a
schema of 100,000 properties held the event loop for more than 30 s. The hosted API's strict mode
allows 5,000 properties and 1,000 enum values in all, some 20,000 values: this is a generous multiple."""

MAX_REQUEST_SCHEMA_VALUES = 100_000
"""The values all of a request's tool schemas may hold together (`parameters`, `output_schema`)."""

MAX_SCHEMA_PATTERNS = 256
"""Distinct regular expressions one schema may give (`pattern` values, `patternProperties` keys):
each key of a checked object is matched against every `patternProperties` pattern, and more of them
than the compiled-pattern cache keeps (512) were compiled again at every key (2,000 patterns against
an object of 2,000 keys took 80 s)."""

MAX_SCHEMA_IDENTIFIERS = 1_000
"""`$id`, `$anchor` and `$dynamicAnchor` keywords one schema may give: each makes a resource or an
anchor the meta-schema check and the reference registry index (20,000 `$id`s took 24 s to check)."""

OFF_LOOP_SCHEMA_VALUES = 1_000
"""A request whose tool schemas hold more values than this has them checked in a worker thread."""

PATTERN_VALUES = 250
"""What one distinct pattern of a schema counts for against `OFF_LOOP_SCHEMA_VALUES` (so a request
of four or more is checked in a worker thread): RE2's compile of one (up to `MAX_PROGRAM_SIZE`
instructions) takes up to some 8 ms (`(?i)[\\pL\\pN\\pP]{3}`, Unicode classes folded for case), and
a schema of 256 patterns of a counted repetition each, some 800 values, held the event loop for
0.4 s; at 50 each, nineteen such patterns were compiled on the loop, some 160 ms."""


_IDENTIFIERS = frozenset({"$id", "$anchor", "$dynamicAnchor"})


def _measure(document: Any, limit: int) -> tuple[int, int, int]:
    """How many values `document` holds, how many distinct patterns it gives (as `_patterns` finds
    them) and how many identifiers (`_IDENTIFIERS`), in one walk that stops once the values pass `limit`."""
    values = identifiers = 0
    patterns: set[str] = set()
    stack: list[tuple[Any, bool]] = [(document, True)]
    while stack and values <= limit:
        current, schema_like = stack.pop()
        values += 1
        if isinstance(current, (list, dict)) and values + len(stack) + len(current) > limit:
            return limit + 1, len(patterns), identifiers  # each of these is a value yet to count
        if isinstance(current, list):
            stack.extend((item, schema_like) for item in current)
        elif isinstance(current, dict):
            for key, value in current.items():
                if schema_like and key == "pattern" and isinstance(value, str):
                    patterns.add(value)
                elif schema_like and key == "patternProperties" and isinstance(value, dict):
                    patterns.update(k for k in value if isinstance(k, str))
                elif schema_like and key in _IDENTIFIERS:
                    identifiers += 1
                stack.append((value, schema_like and key not in _NOT_SCHEMAS))
    return values, len(patterns), identifiers


def _size_problem(values: int, patterns: int, identifiers: int, limit: int = MAX_SCHEMA_VALUES) -> str | None:
    """Why a schema so measured (`_measure`) is too large to check (`MAX_SCHEMA_VALUES`,
    `MAX_SCHEMA_PATTERNS`, `MAX_SCHEMA_IDENTIFIERS`), or None."""
    if values > limit:
        return messages.schema_too_large("values", limit)
    if patterns > MAX_SCHEMA_PATTERNS:
        return messages.schema_too_large("patterns", MAX_SCHEMA_PATTERNS)
    if identifiers > MAX_SCHEMA_IDENTIFIERS:
        return messages.schema_too_large("identifiers", MAX_SCHEMA_IDENTIFIERS)
    return None


def _schemas_of(request: Conversational) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """Every tool schema a request declares: (the tool's name, the param naming it, the field's
    name in messages, the schema)."""
    for index, tool in enumerate(request.tools or ()):
        members: list[tuple[str, Any]] = [(f"tools[{index}]", tool)]
        if isinstance(tool, NamespaceTool):
            members = [(f"tools[{index}].tools[{n}]", member) for n, member in enumerate(tool.tools)]
        for param, member in members:
            if isinstance(member, FunctionTool):
                if member.parameters is not None:
                    yield member.name, f"{param}.parameters", "schema", member.parameters
                if member.output_schema is not None:
                    yield member.name, f"{param}.output_schema", "output_schema", member.output_schema
        if isinstance(tool, ToolSearchTool) and tool.parameters is not None:
            yield "tool_search", f"tools[{index}].parameters", "schema", tool.parameters


def schema_values(document: Any, limit: int) -> int:
    """How many values a schema holds, counted up to just past `limit` (linear, cheap on the event loop)."""
    return _measure(document, limit)[0]


def schema_weight(document: Any, limit: int) -> int:
    """What a schema counts for against `OFF_LOOP_SCHEMA_VALUES`: its values, and `PATTERN_VALUES`
    for each distinct pattern it gives (counted up to just past `limit`)."""
    values, patterns, _ = _measure(document, limit)
    return values + PATTERN_VALUES * patterns


def holds_large_schemas(request: object) -> bool:
    """Whether a request's tool schemas and its `text.format` schema hold more than
    `OFF_LOOP_SCHEMA_VALUES` values together (checking them is then done in a worker thread).
    Stops counting there: cheap on the event loop."""
    if not isinstance(request, Conversational):
        return False
    schemas = [schema for *_, schema in _schemas_of(request)]
    found = text_format(request.text)
    if found is not None:
        schemas.append(found.schema_)
    left = OFF_LOOP_SCHEMA_VALUES
    for schema in schemas:
        left -= schema_weight(schema, left)
        if left < 0:
            return True
    return False


def _patterns(document: Any) -> Iterator[str]:
    """Every regular expression a schema gives: `pattern` values and `patternProperties` keys."""
    stack = [document]
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            for key, value in current.items():
                if key == "pattern" and isinstance(value, str):
                    yield value
                elif key == "patternProperties" and isinstance(value, dict):
                    yield from (k for k in value if isinstance(k, str))
                    stack.extend(value.values())
                elif key not in _NOT_SCHEMAS:
                    stack.append(value)


def _matches_any(patterns: Iterator[str] | dict[str, Any], key: str) -> bool:
    return any(compile_pattern(patrn).search(key) is not None for patrn in patterns)


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value that is equal for values JSON Schema finds equal (`1` and
    `1.0`; a dict's keys in any order) and apart for those it does not (`true` and `1`)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return value


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """The keys of `instance` that `schema` evaluates (what `unevaluatedProperties` leaves out):
    jsonschema's own walk over `properties`, `additionalProperties`, `unevaluatedProperties`,
    `patternProperties` (matched on RE2), `dependentSchemas`, `allOf`/`anyOf`/`oneOf`,
    `if`/`then`/`else` and references."""
    if not isinstance(schema, dict):
        return set()
    keys: set[str] = set()
    for ref in (schema.get("$ref"), schema.get("$dynamicRef")):
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            evolved = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(evolved, instance, resolved.contents)
    properties = schema.get("properties", {})
    if isinstance(properties, dict):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys |= {k for k, v in instance.items() if next(validator.descend(v, subschema), None) is None}
    if validator.is_type(schema.get("patternProperties"), "object"):
        _charge_matches(len(schema["patternProperties"]), len(instance))
        keys |= {k for k in instance if _matches_any(schema["patternProperties"], k)}
    if validator.is_type(schema.get("dependentSchemas"), "object"):
        for key, subschema in schema["dependentSchemas"].items():
            if key in instance:
                keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, ()):
            if next(validator.descend(instance, subschema), None) is None:
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def import_checkers() -> None:
    """Import what checking schemas and grammars uses (jsonschema, referencing, lark: about 0.3 s)
    and build the validator class. The server calls it in a worker thread as it starts, so that
    the first request with a schema or a grammar does not import them on the event loop, holding
    every other client meanwhile."""
    import jsonschema.exceptions  # noqa: F401
    import lark  # noqa: F401
    import referencing.exceptions  # noqa: F401
    import referencing.jsonschema  # noqa: F401

    _validator_class()
    _compile_grammar("lark", 'start: "a"')  # lark builds its own grammar's parser once: not counted in a budget


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with every user-given pattern run by RE2 (`emulator/patterns.py`): a tool's
    schema is anyone's input, and Python's backtracking engine takes exponential time on patterns
    such as `^(a|a)+$`. jsonschema matches patterns with `re` in `pattern`, `patternProperties`,
    `additionalProperties` (the keys `patternProperties` covers) and `unevaluatedProperties` (the
    keys it evaluated), and compiles them with `re` for the meta-schema's `regex` format (in the
    meta-schema check, `metaschema.py`, with the class's `FORMAT_CHECKER`): each is replaced here,
    the `regex` format left out as `_schema_problem` compiles every pattern on RE2 after the meta-schema check. A
    subschema's `$schema` does not switch to another draft's class (whose keywords match with
    `re`): every subschema is checked as draft 2020-12, as the whole schema is."""
    import attrs
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and compile_pattern(patrn).search(instance) is None:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, properties: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        _charge_matches(len(properties), len(instance))
        for patrn, subschema in properties.items():
            compiled = compile_pattern(patrn)
            for key, value in instance.items():
                if compiled.search(key) is not None:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        if patterns:
            _charge_matches(len(patterns), len(instance))
        extras = {k for k in instance if k not in properties and not (patterns and _matches_any(patterns, k))}
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:
            listed = ", ".join(repr(extra) for extra in sorted(extras, key=str))
            if patterns:
                verb = "does" if len(extras) == 1 else "do"
                regexes = ", ".join(repr(patrn) for patrn in sorted(patterns))
                yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
            else:
                verb = "was" if len(extras) == 1 else "were"
                yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")

    def unevaluated_properties(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_keys(validator, instance, schema)
        extras = [
            key
            for key in instance
            if key not in evaluated
            and next(validator.descend(instance[key], unevaluated, path=key, schema_path=key), None) is not None
        ]
        if extras and unevaluated is False:
            listed = ", ".join(repr(k) for k in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Unevaluated properties are not allowed ({listed} {verb} unexpected)")
        elif extras:
            listed = ", ".join(repr(k) for k in extras)
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Unevaluated properties are not valid under the given schema ({listed} {verb} unevaluated and invalid)"
            )

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # jsonschema compares every pair of items that do not sort (objects): 20,000 objects
        # took minutes. Their canonical forms are hashed instead: linear in the array's size.
        if unique and validator.is_type(instance, "array"):
            seen: set[Any] = set()
            for item in instance:
                key = _canonical(item)
                if key in seen:
                    yield ValidationError(f"{instance!r} has non-unique elements")
                    return
                seen.add(key)

    multiple_of_itself = Draft202012Validator.VALIDATORS["multipleOf"]
    enum_itself = Draft202012Validator.VALIDATORS["enum"]
    const_itself = Draft202012Validator.VALIDATORS["const"]

    def enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # Comparing with each entry costs as much as the entries hold: counted in the visits
        # (`_charge`), so an enum of 1,000 arrays of 1,000 items is not compared at every item.
        _charge(jsontext.values(enums) // _VISITS_PER_NODE)
        yield from enum_itself(validator, enums, instance, schema)

    def const(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[Any]:
        _charge(jsontext.values(expected) // _VISITS_PER_NODE)
        yield from const_itself(validator, expected, instance, schema)

    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # jsonschema divides an integer by a float divisor as floats: an integer past a float's
        # range (10**400) raised OverflowError, a 500. Such a quotient is found exactly instead.
        try:
            yield from multiple_of_itself(validator, divisor, instance, schema)
        except (OverflowError, ValueError):
            try:
                failed = (Fraction(instance) / Fraction(divisor)).denominator != 1
            except (OverflowError, ValueError, ZeroDivisionError):  # inf or nan: a multiple of nothing
                failed = True
            if failed:
                yield ValidationError(f"{instance!r} is not a multiple of {divisor}")

    keywords = {
        "uniqueItems": unique_items,
        "multipleOf": multiple_of,
        "enum": enum,
        "const": const,
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "unevaluatedProperties": unevaluated_properties,
    }
    validator_class: Any = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, keywords, format_checker=formats()
    )
    fields = [(field.name, field.alias) for field in attrs.fields(validator_class) if field.init]

    def evolve(self: Any, **changes: Any) -> Any:
        left = getattr(_visits, "left", None)
        if left is not None:  # each subschema visited (`descend`, `$ref`, `if`) evolves a validator
            if left <= 0:
                raise _TooCostly
            _visits.left = left - 1
        for name, alias in fields:
            changes.setdefault(alias, getattr(self, name))
        return validator_class(**changes)

    validator_class.evolve = evolve
    return validator_class


def _schema_problem(schema: _Schema, *, sized: bool = False) -> str | None:
    """Why the schema is not a JSON Schema (draft 2020-12, its patterns compiling on RE2), or
    None; found once per schema. `sized`: the caller has measured it already and found it within
    the bounds (`schema_problem`), so it is not counted again."""
    from jsonschema.exceptions import SchemaError

    if schema.problem is None:
        too_large = None if sized else _size_problem(*_measure(schema.document, MAX_SCHEMA_VALUES))
        if too_large is not None:
            schema.problem = too_large
            return too_large
        try:
            problem = meta_problem(schema.document)  # `metaschema.py`: jsonschema's first error, found fast
            if problem is not None:
                raise SchemaError(problem)
            for patrn in _patterns(schema.document):
                try:
                    compile_pattern(patrn)
                except PatternError as e:
                    raise SchemaError(f"{patrn!r} is not a pattern this server runs: {e}") from e
            schema.problem = ""
        except SchemaError as e:
            schema.problem = e.message
        except RecursionError:
            schema.problem = "the schema nests too deep"
    return schema.problem or None


class _TooCostly(Exception):
    """A check that visited more subschemas than `_visits` allowed."""


_visits = threading.local()
"""Subschema visits the running check has left (`_first_error`)."""
_MAX_VISITS = 10_000
_VISITS_PER_NODE = 16
_MAX_ERRORS = 16
"""Errors a check computes at most: the one reported is the first by path among them (a value
with 60,000 wrong items is not made into 60,000 messages)."""


def _charge(visits: int) -> None:
    """Count `visits` against the running check's budget (`_visits`): work that is no subschema
    visit but costs as much (comparing with an enum's entries, matching keys against patterns)."""
    left = getattr(_visits, "left", None)
    if left is not None and visits > 0:
        if left < visits:
            raise _TooCostly
        _visits.left = left - visits


def _charge_matches(patterns: int, keys: int) -> None:
    """Matching `keys` keys against `patterns` patterns: a visit per 16 matches."""
    _charge(patterns * keys // _VISITS_PER_NODE)


def _crawled(document: Any) -> Any:
    """A registry holding the schema with every `$id` and `$anchor` in it already found: jsonschema
    otherwise walks the whole schema again at each `$ref` to an anchor (a schema of 10,000 anchors
    took 0.1 s a reference)."""
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(document)
    return Registry().with_resource(resource.id() or "", resource).crawl()


def _first_error(schema: _Schema, value: Any) -> str | None:
    from referencing.exceptions import Unresolvable

    problem = _schema_problem(schema)
    if problem is not None:
        return messages.schema_invalid(problem)
    try:
        if schema.validator is None:
            schema.validator = _validator_class()(schema.document, registry=_crawled(schema.document))
        # Validation without any pattern can still be exponential: a chain of `anyOf` of two `$ref`s
        # to the next link visits 2**n subschemas on a value that fails, all on the event loop. The
        # visits are bounded: a number, and a few per value the instance holds.
        budget = _MAX_VISITS + _VISITS_PER_NODE * jsontext.values(value)
        _visits.left = budget
        try:
            errors = itertools.islice(schema.validator.iter_errors(value), _MAX_ERRORS)
            error = next(iter(sorted(errors, key=lambda e: list(e.path))), None)
        finally:
            _visits.left = None
    except _TooCostly:
        return messages.schema_too_costly(budget)
    except PatternTooCostly as e:  # a pattern too large a program for the string: `emulator/patterns.py`
        return messages.schema_pattern_too_costly(e.pattern, e.instructions, e.length, e.budget)
    except Unresolvable as e:  # a `$ref` to nowhere: no schema to check against
        return messages.schema_invalid(str(e))
    except RecursionError:  # `{"$ref": "#"}`: a reference that leads back to itself, never to a check
        return messages.schema_loops()
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
    return f"{error.message}" + (f" (at {where.lstrip('.')})" if where else "")


class _Unparsed(enum.Enum):
    NOT_JSON = "not JSON"
    TOO_DEEP = "too deep"


_Verdict: TypeAlias = str | None | _Unparsed
"""What checking a text against a schema found: the first error's message, None (valid), or why
the text was not checked."""


@dataclass(slots=True)
class _Schema:
    serial: int
    """A number no other schema in this process gets (it names the schema in `_Verdicts`)."""
    document: dict[str, Any]
    validator: Any = None
    """Its `Draft202012Validator`, made on first use."""
    problem: str | None = None
    """Why it is not a valid schema ("" when it is), found on first use (`_schema_problem`)."""


class _Schemas(Cache):
    """Each schema once, keyed by its JSON text, with its validator built on first use.

    The text keeps the schema's key order (the order its keywords are checked in, which decides
    which error comes first), so only the very same schema shares a validator; the validator
    checks a copy of it (the text parsed again) that nothing else holds. Bounded by entries and by
    the texts' bytes; the least recently used leave first. A schema that its text does not give back
    exactly (parsed again, it is not equal to the schema) is never shared."""

    def __init__(self, max_entries: int = 256, max_bytes: int = 8 * 2**20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, _Schema] = OrderedDict()
        self._serials = itertools.count()
        self._lock = threading.Lock()

    def get(self, schema: dict[str, Any]) -> _Schema:
        # The text made and read a piece at a time (the same text and value as `json.dumps` and
        # `json.loads`): one call over 3,500 integers of 4,000 digits held the interpreter, every
        # other client's turn too, some 0.8 s to write and 0.3 s to read.
        try:
            key = "".join(jsonreply.texts(schema, separators=(",", ":")))
        except (TypeError, ValueError):  # not JSON-shaped: checked as it is, never shared
            return _Schema(next(self._serials), schema)
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found.document == schema:
                self._entries.move_to_end(key)
                return found
        copy = jsonpieces.loads(key)  # (outside the lock: it lets the other threads run)
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found.document == schema:
                self._entries.move_to_end(key)
                return found
            made = _Schema(next(self._serials), copy)
            if found is not None or made.document != schema:
                # The text says less than the schema (a key that is not a string, a tuple): checked
                # as it is, never shared.
                return _Schema(made.serial, schema)
            if len(key) <= self.max_bytes:
                self._entries[key] = made
                self.bytes += len(key)
                while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                    dropped, _ = self._entries.popitem(last=False)
                    self.bytes -= len(dropped)
            return made

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


class _Verdicts(Cache):
    """Verdicts by (the schema's serial number, the pattern budget where it is checked, the exact
    text checked).

    A verdict is a pure function of the schema and the text, so a hit is what checking again would
    find; a text that differs by one byte is another key, checked afresh. Bounded by entries and
    by the texts' bytes; the least recently used leave first."""

    def __init__(self, max_entries: int = 4096, max_bytes: int = 4 * 2**20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[int, int, str], tuple[_Verdict, int]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, schema: dict[str, Any], text: str) -> _Verdict:
        known = _schemas.get(schema)
        key = (known.serial, match_budget(), text)  # a pattern too costly on the loop may run off it
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found[0]
        verdict = _examine(known, text)
        size = 128 + len(text) + (len(verdict) if isinstance(verdict, str) else 0)
        if size <= self.max_bytes:
            with self._lock:
                if key not in self._entries:
                    self._entries[key] = (verdict, size)
                    self.bytes += size
                while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                    self.bytes -= self._entries.popitem(last=False)[1][1]
        return verdict

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def _examine(schema: _Schema, text: str) -> _Verdict:
    try:
        value = jsontext.loads(text)
    except jsontext.TooDeep:
        return _Unparsed.TOO_DEEP
    except json.JSONDecodeError:
        return _Unparsed.NOT_JSON
    return _first_error(schema, value)


_schemas = PROCESS.add("output schemas", _Schemas())
_verdicts = PROCESS.add("output verdicts", _Verdicts())


def _check(kind: str, tool: FunctionTool, call_id: str, schema: dict[str, Any] | None, text: str) -> Violation | None:
    if schema is None:
        return None
    problem = _verdicts.check(schema, text)
    if problem is _Unparsed.TOO_DEEP:
        return Violation(kind, tool.name, call_id, messages.nested_too_deep(kind, jsontext.MAX_DEPTH))
    if problem is _Unparsed.NOT_JSON:
        return Violation(kind, tool.name, call_id, messages.not_json(kind))
    return Violation(kind, tool.name, call_id, problem) if problem else None


def check_output(tool: FunctionTool, call_id: str, output: str) -> Violation | None:
    return _check("output", tool, call_id, tool.output_schema, output)


def check_arguments(tool: FunctionTool, call_id: str, arguments: str) -> Violation | None:
    return None if tool.strict is False else _check("arguments", tool, call_id, tool.parameters, arguments)


def check_call(tool: object, call: CallItem) -> Violation | None:
    """A call item against its tool's declared contract (parameters, or a custom tool's format)."""
    if isinstance(tool, FunctionTool) and isinstance(call, FunctionCall):
        return check_arguments(tool, call.call_id, call.arguments)
    if isinstance(tool, CustomTool) and isinstance(call, CustomToolCall):
        return check_input(tool, call.call_id, call.input)
    return None


def parses_lark(tool: object) -> bool:
    """Whether a call to `tool` is checked by a lark grammar's parse (pure Python: best off the loop)."""
    return isinstance(tool, CustomTool) and isinstance(tool.format, GrammarFormat) and tool.format.syntax == "lark"


def check_input(tool: CustomTool, call_id: str, text: str) -> Violation | None:
    if not isinstance(tool.format, GrammarFormat):
        return None
    try:
        matcher = _grammar(tool.format.syntax, tool.format.definition)
    except ValueError as e:  # checked as the tool was declared; a long grammar is compiled again here
        return Violation("input", tool.name, call_id, str(e))
    problem = matcher(text)
    return Violation("input", tool.name, call_id, problem) if problem else None


_Measured: TypeAlias = tuple[int, int, int]
"""What `_measure` found of a schema: its values, distinct patterns and identifiers."""


def schema_problem(document: dict[str, Any], measured: _Measured | None = None) -> str | None:
    """Why `document` is not a JSON Schema, or None (found once per schema, as checking against it needs).
    A schema past the size bounds is refused before it is copied into the cache. `measured`: what
    `_measure` found of it already (`check_tools` counts every schema of a request first), so the
    schema is walked for its size once, not again here and again in `_schema_problem`."""
    too_large = _size_problem(*(measured or _measure(document, MAX_SCHEMA_VALUES)))
    if too_large is not None:
        return too_large
    return _schema_problem(_schemas.get(document), sized=True)


def _check_function_schemas(tool: FunctionTool, param: str, measured: dict[int, _Measured]) -> None:
    for field, schema in (("parameters", tool.parameters), ("output_schema", tool.output_schema)):
        if schema is None:
            continue
        problem = schema_problem(schema, measured.get(id(schema)))
        if problem is None and field == "parameters" and tool.strict is True:
            problem = _strict_problem(schema)
        if problem is not None:
            raise messages.invalid_function_schema(
                tool.name, problem, f"{param}.{field}", "schema" if field == "parameters" else field
            )


def _check_format_schema(found: SchemaTextFormat, param: str) -> None:
    """A json_schema text format's `schema`: a JSON Schema within the size bounds (`schema_problem`),
    strict-compliant when the format says `strict: true`, as a function's `parameters` are."""
    problem = schema_problem(found.schema_)
    if problem is None and found.strict is True:
        problem = _strict_problem(found.schema_)
    if problem is not None:
        raise messages.invalid_format_schema(found.name, problem, param)


def check_text_formats(request: Conversational) -> None:
    """The json_schema formats a request gives: its `text.format`, and a configuration_update's
    `text.format` among its input items, each checked by `_check_format_schema` (a 400
    `invalid_json_schema` otherwise, as the hosted API refuses a response_format's schema)."""
    found = text_format(request.text)
    if found is not None:
        _check_format_schema(found, "text.format.schema")
    if isinstance(request.input, list):
        for index, item in enumerate(request.input):
            if isinstance(item, ConfigurationUpdateItem) and item.text is not None:
                update = item.text.format
                if isinstance(update, SchemaTextFormat):
                    _check_format_schema(update, f"input[{index}].text.format.schema")


_STRICT_CHILDREN = ("properties", "$defs", "definitions")
_STRICT_BRANCHES = ("anyOf", "allOf", "oneOf", "prefixItems")


def _strict_problem(schema: Any, context: tuple[str, ...] = ()) -> str | None:
    """Why a function's `parameters` cannot be used with `strict: true`, as the hosted API words
    it, or None: every object schema (the root, its properties', items', definitions' and
    branches') says `additionalProperties: false` and lists every property in `required`; the
    root is `type: "object"`."""
    if not context and not (isinstance(schema, dict) and schema.get("type") in ("object", ["object"])):
        kind = schema.get("type") if isinstance(schema, dict) else None
        return messages.strict_schema_not_object("None" if kind is None else str(kind))
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return messages.strict_schema_allows_more(context)
        properties = schema.get("properties")
        required = schema.get("required")
        if isinstance(properties, dict):
            listed = (
                set(required) if isinstance(required, list) and all(isinstance(r, str) for r in required) else set()
            )
            for key in properties:
                if key not in listed:
                    return messages.strict_schema_misses_required(context, key)
    for keyword in _STRICT_CHILDREN:
        children = schema.get(keyword)
        if isinstance(children, dict):
            for name, child in children.items():
                if (found := _strict_problem(child, (*context, keyword, name))) is not None:
                    return found
    for keyword in _STRICT_BRANCHES:
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for n, branch in enumerate(branches):
                if (found := _strict_problem(branch, (*context, keyword, str(n)))) is not None:
                    return found
    for keyword in ("items", "additionalProperties", "not", "if", "then", "else"):
        if (found := _strict_problem(schema.get(keyword), (*context, keyword))) is not None:
            return found
    return None


def check_tools(request: Conversational) -> None:
    """Every tool schema is a JSON Schema (function tools' `parameters` and `output_schema`, in
    namespaces too, a tool_search's `parameters`) and a custom tool's grammar compiles: a 400
    otherwise, as the hosted API refuses them, before anything is checked against them. A schema
    too large to check (`MAX_SCHEMA_VALUES`, `MAX_SCHEMA_PATTERNS`), or schemas that together hold
    more than `MAX_REQUEST_SCHEMA_VALUES` values, are refused first, by a count that is linear in
    them; a function's `parameters` given with `strict: true` must be strict-compliant."""
    left = MAX_REQUEST_SCHEMA_VALUES
    measured: dict[int, _Measured] = {}  # by the schema's identity: the request holds each meanwhile
    for name, param, field, schema in _schemas_of(request):
        values, patterns, identifiers = measured[id(schema)] = _measure(schema, MAX_SCHEMA_VALUES)
        problem = _size_problem(values, patterns, identifiers)
        left -= values
        if problem is None and left < 0:
            problem = messages.schema_too_large("request", MAX_REQUEST_SCHEMA_VALUES)
        if problem is not None:
            raise messages.invalid_function_schema(name, problem, param, field)
    for index, tool in enumerate(request.tools or ()):
        if isinstance(tool, FunctionTool):
            _check_function_schemas(tool, f"tools[{index}]", measured)
        elif isinstance(tool, NamespaceTool):
            for member_index, member in enumerate(tool.tools):
                if isinstance(member, FunctionTool):
                    _check_function_schemas(member, f"tools[{index}].tools[{member_index}]", measured)
        elif isinstance(tool, ToolSearchTool) and tool.parameters is not None:
            problem = schema_problem(tool.parameters, measured.get(id(tool.parameters)))
            if problem is not None:
                raise messages.invalid_function_schema("tool_search", problem, f"tools[{index}].parameters")
        if isinstance(tool, CustomTool) and isinstance(tool.format, GrammarFormat):
            try:
                _grammar(tool.format.syntax, tool.format.definition)
            except ValueError as e:
                raise messages.invalid_grammar(
                    tool.format.syntax, tool.name, str(e), f"tools[{index}].format.definition"
                ) from e


_CACHED_GRAMMAR_CHARS = 16_384
"""A grammar up to this long is compiled once (at most 256 are kept); a longer one on every use."""


def _grammar(syntax: str, definition: str) -> _Matcher:
    """A matcher for the grammar: the text's first mismatch, or None. Raises ValueError if it does
    not compile (or is too costly to: `LARK_COMPILE_BUDGET`); that answer is kept as a compiled
    grammar is, so a grammar refused once is not compiled again up to its budget."""
    compiled = _cached_grammar(syntax, definition) if len(definition) <= _CACHED_GRAMMAR_CHARS else None
    if compiled is None:
        compiled = _compiled_or_why(syntax, definition)
    if isinstance(compiled, str):
        raise ValueError(compiled)
    return compiled


def _compiled_or_why(syntax: str, definition: str) -> _Matcher | str:
    """The grammar's matcher, or why it does not compile (`_compile_grammar`)."""
    try:
        return _compile_grammar(syntax, definition)
    except ValueError as e:
        return str(e)


def holds_lark_grammars(request: object) -> bool:
    """Whether a request declares a custom tool with a grammar: compiling a lark one is pure Python
    and takes up to `LARK_COMPILE_BUDGET` calls (seconds), a regex one is RE2's compile, up to its
    memory bound (a definition of 100,000 alternatives, or a counted repetition of a Unicode class,
    held the event loop for 0.15 to 0.45 s), so the request is read in a worker thread."""
    if not isinstance(request, Conversational):
        return False
    return any(isinstance(tool, CustomTool) and isinstance(tool.format, GrammarFormat) for tool in request.tools or ())


LARK_COMPILE_BUDGET = 2_000_000
"""Python calls compiling one lark grammar may make (a few seconds at most, in a worker thread):
lark expands a grammar's repetitions and optional items into rules, so a grammar of a few
characters can take minutes and gigabytes (`start: (("a"~30)~30)~30`, 23 characters, ran for more
than a minute; thirty `"a"?` in one rule are 2**30 alternatives). A JSON grammar takes some 80,000
calls, a chain of 200 rules of two alternatives each 1.6 million."""


LARK_CALL_BUDGET = 2_000_000
"""Python calls one lark parse may make (about a second): an ambiguous grammar's Earley parse grows
with the cube of the input and beyond (`x: "a" | x x` took 6.7 s on 200 characters), and lark is
pure Python, so no other bound holds it."""


class _TooManyCalls(Exception):
    pass


def _within_calls(parse: Callable[[str], object], text: str, budget: int) -> object:
    """`parse(text)`, ended by `_TooManyCalls` at its `budget`-th Python call (counted by a trace
    function on this thread alone, which sees only calls: no line events)."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > budget:
            raise _TooManyCalls

    before = sys.gettrace()
    sys.settrace(count)
    try:
        return parse(text)
    finally:
        sys.settrace(before)


def _compile_grammar(syntax: str, definition: str) -> _Matcher:
    if syntax == "regex":
        try:
            pattern = compile_grammar(definition)
        except (re2.error, PatternError) as e:  # `PatternError`: too costly to compile (`emulator/patterns.py`)
            # RE2's reason is bytes: shown as text, not as a bytes repr (`b'invalid perl operator: (?<='`).
            reason = e.args[0] if e.args else ""
            raise ValueError(reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(e)) from e

        def regex(text: str) -> str | None:
            try:
                if pattern.fullmatch(text) is None:
                    return messages.regex_mismatch(definition)
            except PatternTooCostly as e:  # `emulator/patterns.py`: the program's size times the text's bytes
                return messages.regex_too_costly(definition, e.instructions, e.length, e.budget)
            return None

        return regex
    # Imported here, not at the module's import (`ptc-emulator --help` stays quick); the server
    # imports it in a worker thread as it starts (`import_checkers`).
    from lark import Lark, LarkError

    def compile_lark(text: str) -> tuple[Any, larkgrammar.Terminals]:
        refused = larkgrammar.static_problem(text)  # imports, and the expanded size: before lark expands
        if refused is not None:
            raise ValueError(refused)
        parser = Lark(text, start="start")
        return parser, larkgrammar.use_re2(parser)

    try:
        with collector.held_off():  # (the objects lark makes would start full collections: see `lark` below)
            compiled: Any = _within_calls(compile_lark, definition, LARK_COMPILE_BUDGET)
    except _TooManyCalls as e:
        raise ValueError(messages.lark_grammar_too_costly(LARK_COMPILE_BUDGET)) from e
    except (LarkError, TypeError) as e:
        cause: BaseException | None = e
        while cause is not None:  # lark wraps what a rule's processing raised ("Error trying to process rule")
            if isinstance(cause, _TooManyCalls):
                raise ValueError(messages.lark_grammar_too_costly(LARK_COMPILE_BUDGET)) from e
            cause = cause.__cause__ or cause.__context__
        raise ValueError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from e
    parser, terminals = compiled

    def lark(text: str) -> str | None:
        terminals.begin(text)
        try:
            # Full collections held off: lark's Earley parse makes objects by the hundred thousand
            # (alive until it ends), which started full passes that walked them all holding the
            # interpreter, every other client waiting 0.15-0.3 s, the parse itself in a worker thread.
            with collector.held_off():
                _within_calls(parser.parse, text, LARK_CALL_BUDGET)
        except LarkError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return messages.lark_mismatch(first)
        except _TooManyCalls:
            return messages.lark_too_costly(len(text), LARK_CALL_BUDGET)
        except larkgrammar.ScanTooCostly as e:
            return messages.lark_scan_too_costly(len(text), e.budget)
        return None

    return lark


_cached_grammar = functools.lru_cache(maxsize=256)(_compiled_or_why)
PROCESS.add("compiled grammars", Memo(_cached_grammar))
