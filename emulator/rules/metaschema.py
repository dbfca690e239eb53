"""A tool schema's check against the draft 2020-12 meta-schema, fast and with jsonschema's own message.

jsonschema checks a schema against the meta-schema by resolving `$dynamicRef: "#meta"` at every
subschema and walking seven vocabulary meta-schemas each time: some 0.2 ms a subschema, so a schema
of 24,000 properties (within the bounds) took 7 to 9 s. Here a walk written for the meta-schema's
keywords (`_valid_part`) finds which parts of the schema are certainly valid; they are left out, and
what remains (nothing, for a valid schema) is checked by jsonschema as before, so the first error, and
with it every message, is the one jsonschema gives for the whole schema:

* each keyword of the meta-schema is checked on its own (none depends on another), and a schema's
  keywords and a map's entries are checked in the meta-schema's and the map's order, so a part
  with no error can be left out without changing which error comes first;
* the walk calls valid only what it is sure of (an integer written `1.0`, a number that is not
  finite: left to jsonschema), so what it leaves out is valid to jsonschema too;
* within `dependencies` (whose `anyOf` message repeats the whole value) a value is kept whole;
* a schema nested deeper than the wire allows (`wire.base.MAX_DEPTH`) is checked whole, as before.

The check that remains uses a validator whose `anyOf` stops at each branch's first error (jsonschema
collects all of them, for a context no message here shows): `type: ["strin"] * 45_000` took 2 s.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from typing import Any

from ptc_emulator.emulator.wire.base import MAX_DEPTH

__all__ = ["formats", "meta_problem"]

_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
"""The meta-schema's `anchorString` pattern, matched as jsonschema matches it (`re.search`)."""
_FRAGMENTLESS = re.compile(r"^[^#]*#?$")
"""The meta-schema's pattern for `$id`: no fragment but an empty one."""
_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})

_SUBSCHEMA = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "if",
        "then",
        "else",
        "not",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_STRINGS = frozenset({"$comment", "title", "description", "format", "contentEncoding", "contentMediaType"})
_BOOLEANS = frozenset({"deprecated", "readOnly", "writeOnly", "uniqueItems"})
_NUMBERS = frozenset({"maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"})
_COUNTS = frozenset(
    {"maxLength", "minLength", "maxItems", "minItems", "maxContains", "minContains", "maxProperties", "minProperties"}
)
_ARRAYS = frozenset({"enum", "examples"})
_URI_REFERENCES = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
_ANCHORS = frozenset({"$anchor", "$dynamicAnchor", "$recursiveAnchor"})

_VALID = object()
"""What `_valid_part` answers for a part with no error."""


class _Unsure(Exception):
    """The schema is checked whole by jsonschema (nested too deep for the walk)."""


@functools.cache
def formats() -> Any:
    """The format checker schemas are checked with, against the meta-schema and by their own
    validators (`contract._validator_class`): jsonschema's, without `regex` (a schema's patterns are
    compiled on RE2 instead, `emulator/patterns.py`)."""
    from jsonschema import FormatChecker

    return FormatChecker([name for name in FormatChecker.checkers if name != "regex"])


@functools.cache
def _checker() -> Any:
    """The draft 2020-12 validator class, its `anyOf` stopping at each branch's first error."""
    import attrs
    from jsonschema import Draft202012Validator, ValidationError, validators

    def any_of(validator: Any, branches: Any, instance: Any, schema: Any) -> Any:
        for index, branch in enumerate(branches):
            if next(iter(validator.descend(instance, branch, schema_path=index)), None) is None:
                return
        yield ValidationError(f"{instance!r} is not valid under any of the given schemas")

    lazy: Any = validators.extend(Draft202012Validator, {"anyOf": any_of})  # type: ignore[no-untyped-call]
    fields = [(field.name, field.alias) for field in attrs.fields(lazy) if field.init]

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's own `evolve` switches to the class its `$schema` names (each vocabulary's
        # meta-schema names draft 2020-12): this class, with its `anyOf`, is kept instead.
        for name, alias in fields:
            changes.setdefault(alias, getattr(self, name))
        return lazy(**changes)

    lazy.evolve = evolve
    return lazy


def _conforms(value: str, form: str) -> bool:
    checker = formats()
    return form not in checker.checkers or bool(checker.conforms(value, form))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _strings(value: Any) -> bool:
    """The meta-schema's `stringArray`: strings, each once."""
    return isinstance(value, list) and all(isinstance(s, str) for s in value) and len(set(value)) == len(value)


def _names(value: dict[str, Any]) -> Iterator[str]:
    yield from value


def _first_visited(value: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
    """Of a map's entries with an error (`kept`), the one jsonschema visits first, alone: it visits
    a map's entries (`additionalProperties`) in the order of a set made from a generator of its
    names, the hash order, which a map of fewer entries would not keep."""
    for name in set(_names(value)):
        if name in kept:
            return {name: kept[name]}
    return kept


def _valid_keyword(key: str, value: Any, depth: int, prune: bool) -> Any:
    """`_VALID`, or what of `value` to keep for jsonschema (the whole value when unsure)."""
    if key in _SUBSCHEMA:
        return _valid_part(value, depth + 1, prune)
    if key in _SCHEMA_MAPS:
        if not isinstance(value, dict):
            return value
        if key == "patternProperties" and "regex" in formats().checkers:
            raise _Unsure  # its names are then checked too, after its values: not followed here
        kept: dict[str, Any] = {}
        for name, child in value.items():
            part = _valid_part(child, depth + 2, prune)
            if part is not _VALID:
                kept[name] = part
        return _VALID if not kept else (_first_visited(value, kept) if prune else value)
    if key in _SCHEMA_LISTS:
        if not isinstance(value, list) or not value:
            return value
        left = [part for child in value if (part := _valid_part(child, depth + 2, prune)) is not _VALID]
        return _VALID if not left else (left if prune else value)
    if key in _STRINGS:
        return _VALID if isinstance(value, str) else value
    if key == "pattern":
        return _VALID if isinstance(value, str) and _conforms(value, "regex") else value
    if key in _BOOLEANS:
        return _VALID if isinstance(value, bool) else value
    if key in _NUMBERS:
        return _VALID if _number(value) else value
    if key in _COUNTS:
        return _VALID if _count(value) else value
    if key in _ARRAYS:
        return _VALID if isinstance(value, list) else value
    if key in _URI_REFERENCES:
        return _VALID if isinstance(value, str) and _conforms(value, "uri-reference") else value
    if key in _ANCHORS:
        return _VALID if isinstance(value, str) and _ANCHOR.search(value) else value
    if key == "$id":
        fragmentless = isinstance(value, str) and _conforms(value, "uri-reference") and _FRAGMENTLESS.search(value)
        return _VALID if fragmentless else value
    if key == "$schema":
        return _VALID if isinstance(value, str) and _conforms(value, "uri") else value
    if key == "type":
        if isinstance(value, str):
            return _VALID if value in _SIMPLE_TYPES else value
        types = (
            isinstance(value, list) and bool(value) and all(isinstance(t, str) and t in _SIMPLE_TYPES for t in value)
        )
        return _VALID if types and len(set(value)) == len(value) else value
    if key == "multipleOf":
        return _VALID if _number(value) and value > 0 else value
    if key == "required":
        return _VALID if _strings(value) else value
    if key == "dependentRequired":
        ok = isinstance(value, dict) and all(_strings(strings) for strings in value.values())
        return _VALID if ok else value
    if key == "$vocabulary":
        ok = isinstance(value, dict) and all(
            isinstance(uri, str) and _conforms(uri, "uri") and isinstance(used, bool) for uri, used in value.items()
        )
        return _VALID if ok else value
    if key == "dependencies":
        # Each value a schema or a `stringArray` (an `anyOf`, whose message repeats the value): kept whole.
        if not isinstance(value, dict):
            return value
        wrong: dict[str, Any] = {}
        for name, child in value.items():
            ok = _strings(child) if isinstance(child, list) else _valid_part(child, depth + 2, False) is _VALID
            if not ok:
                wrong[name] = child
        return _VALID if not wrong else (_first_visited(value, wrong) if prune else value)
    return _VALID  # `const`, `default` and any keyword the meta-schema does not name


def _valid_part(schema: Any, depth: int, prune: bool) -> Any:
    """`_VALID` if `schema` is certainly valid against the meta-schema; otherwise what of it to keep
    for jsonschema to find its first error in: its keywords with an error or unsure (`prune`), or
    all of it. Raises `_Unsure` past `MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise _Unsure
    if isinstance(schema, bool):
        return _VALID
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if not isinstance(key, str):
            raise _Unsure
        part = _valid_keyword(key, value, depth, prune)
        if part is not _VALID:
            kept[key] = part
    return _VALID if not kept else (kept if prune else schema)


def meta_problem(schema: Any) -> str | None:
    """The message of the first error jsonschema finds checking `schema` against the draft 2020-12
    meta-schema (what `check_schema` raises), or None. Raises RecursionError as jsonschema does."""
    try:
        left = _valid_part(schema, 0, True)
    except _Unsure:
        left = schema
    if left is _VALID:
        return None
    from jsonschema import Draft202012Validator  # a validator for each check, as check_schema makes

    checker = _checker()(Draft202012Validator.META_SCHEMA, format_checker=formats())
    error = next(iter(checker.iter_errors(left)), None)
    return None if error is None else str(error.message)
