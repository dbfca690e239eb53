"""TypeScript-style declarations of a program's tools, made from their JSON Schemas, as code-mode
projects show tools to a model: `tools.<name>(args: {...}): Promise<...>`, namespaces and MCP
servers as nested objects.

Only what a declaration needs is read (types, properties, required, enums, consts, items,
anyOf/oneOf, descriptions); anything else becomes `unknown`. The output is deterministic for a
given set of tools, so the prompt's snapshot test can pin it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Signature", "declarations", "type_of"]

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Signature:
    """One tool a program may call: its name as `tools.<name>` spells it (dots for namespaces and
    MCP servers), what it says of itself, and its schemas (None: not known)."""

    name: str
    description: str | None
    parameters: Any
    output: Any
    text_argument: bool = False
    """The tool takes one string (a custom tool), not an object."""


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else json.dumps(name)


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def type_of(schema: Any, depth: int = 0) -> str:
    """The TypeScript type of a JSON Schema (a sketch: what a model needs to call the tool)."""
    if depth > _MAX_DEPTH or not isinstance(schema, dict):
        return "unknown"
    if "const" in schema:
        return _literal(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return " | ".join(_literal(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return " | ".join(dict.fromkeys(type_of(o, depth + 1) for o in options))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(dict.fromkeys(type_of({**schema, "type": k}, depth + 1) for k in kind))
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        inner = type_of(schema.get("items"), depth + 1)
        return f"Array<{inner}>" if " " in inner else f"{inner}[]"
    if kind == "object" or "properties" in schema:
        return _object(schema, depth)
    return "unknown"


def _object(schema: dict[str, Any], depth: int) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return f"Record<string, {type_of(extra, depth + 1)}>"
        return "Record<string, unknown>" if extra is not False else "{}"
    required = set(schema.get("required") or ())
    fields = []
    for name, sub in properties.items():
        optional = "" if name in required else "?"
        note = sub.get("description") if isinstance(sub, dict) else None
        comment = f" /** {_one_line(note)} */" if isinstance(note, str) and note else ""
        fields.append(f"{_key(name)}{optional}: {type_of(sub, depth + 1)};{comment}")
    return "{ " + " ".join(fields) + " }"


def _one_line(text: str) -> str:
    return " ".join(text.replace("*/", "* /").split())


def _function(sig: Signature, leaf: str, indent: str) -> list[str]:
    lines = []
    if sig.description:
        lines.append(f"{indent}/** {_one_line(sig.description)} */")
    if sig.text_argument:
        args = "input: string"
    elif sig.parameters is None:
        args = "args?: Record<string, unknown>"
    else:
        args = f"args: {type_of(sig.parameters)}"
    result = type_of(sig.output) if sig.output is not None else "unknown"
    lines.append(f"{indent}{_key(leaf)}({args}): Promise<{result}>;")
    return lines


def declarations(signatures: list[Signature]) -> str:
    """`declare const tools: {...}` for these tools, sorted by name, namespaces nested."""
    tree: dict[str, Any] = {}
    for sig in sorted(signatures, key=lambda s: s.name):
        *path, leaf = sig.name.split(".")
        node = tree
        for part in path:
            child = node.setdefault(part, {})
            if isinstance(child, Signature):  # a function and a namespace of one name: keep the function
                break
            node = child
        else:
            node[leaf] = sig

    def render(node: dict[str, Any], indent: str) -> list[str]:
        lines: list[str] = []
        for name, value in node.items():
            if isinstance(value, Signature):
                lines.extend(_function(value, name, indent))
            else:
                lines.append(f"{indent}{_key(name)}: {{")
                lines.extend(render(value, indent + "  "))
                lines.append(f"{indent}}};")
        return lines

    body = render(tree, "  ")
    return "\n".join(["declare const tools: {", *body, "};"])
