"""The code function's description (prompt.md and the declarations made from the tools' schemas)
is pinned by a snapshot: a change to what the model is told shows in review.

To accept a deliberate change: `PTC_UPDATE_SNAPSHOTS=1 pytest tests/anymodel/test_prompt.py`,
and raise the version in prompt.md's first line."""

from __future__ import annotations

import os
from pathlib import Path

from ptc_emulator.emulator.model.upstream.teach import PROMPT_VERSION, code_description
from ptc_emulator.emulator.model.upstream.typescript import Signature, type_of

SNAPSHOT = Path(__file__).parent / "snapshots" / "code_function_v1.md"

SIGNATURES = [
    Signature(
        "get_inventory",
        "Return an object with sku (string) and available_units (number).",
        {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "available_units": {"type": "number"}},
            "required": ["sku", "available_units"],
        },
    ),
    Signature(
        "shipping.get_delivery_eta",
        "The delivery date of an order.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "Like A-104."},
                "speed": {"enum": ["standard", "express"]},
                "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
                "note": {"type": ["string", "null"]},
            },
            "required": ["order_id"],
        },
        None,
    ),
    Signature(
        "docs.lookup",
        "Look up a topic in the docs",
        {"type": "object", "properties": {"topic": {"type": "string"}}},
        None,
    ),
    Signature("patch_notes", "Free text.", None, None, text_argument=True),
]


def test_the_code_function_description_is_the_snapshot() -> None:
    text = code_description(SIGNATURES)
    if os.environ.get("PTC_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(text + "\n", encoding="utf-8")
    assert PROMPT_VERSION == "v1"
    assert text + "\n" == SNAPSHOT.read_text(encoding="utf-8")


def test_schema_types() -> None:
    assert type_of({"type": "array", "items": {"type": "string"}}) == "string[]"
    assert type_of({"type": "array", "items": {"enum": ["a", "b"]}}) == 'Array<"a" | "b">'
    assert type_of({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "number | null"
    assert type_of({"type": "object", "additionalProperties": {"type": "number"}}) == "Record<string, number>"
    assert type_of({"type": "object", "properties": {"a-b": {"const": 1}}}) == '{ "a-b"?: 1; }'
    assert type_of({}) == "unknown"
