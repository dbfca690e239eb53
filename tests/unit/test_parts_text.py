"""A tool output of content parts as the text a program and a template see: the JSON array of each
part's `model_dump(mode="json", exclude_none=True)`, made once per output list and kept."""

from __future__ import annotations

import json
from typing import Any

from ptc_emulator.emulator.wire.calls import CustomToolCallOutput, FunctionCallOutput

PARTS: list[dict[str, Any]] = [
    {"type": "input_text", "text": "h\u00e9llo \U0001f600", "x": None, "y": {"z": None, "w": [None, 1]}},
    {"text": "a", "type": "output_text"},
    {"type": "input_image", "detail": None, "image_url": "https://example.com/i.png", "file_id": None},
    {"type": "refusal", "refusal": "no", "extra": 1.5},
    {"type": "input_file", "file_id": "file-1", "filename": "f.txt"},
]


def test_the_text_is_each_parts_dump_in_one_array() -> None:
    for model in (FunctionCallOutput, CustomToolCallOutput):
        item = model.model_validate({"type": model.model_fields["type"].default, "call_id": "c", "output": PARTS})
        before = json.dumps([part.model_dump(mode="json", exclude_none=True) for part in item.output])
        assert item.output_text() == before
        assert item.output_text() is item.output_text()  # kept


def test_the_kept_text_follows_the_output_and_is_not_a_field() -> None:
    item = FunctionCallOutput.model_validate({"type": "function_call_output", "call_id": "c", "output": PARTS})
    twin = FunctionCallOutput.model_validate({"type": "function_call_output", "call_id": "c", "output": PARTS})
    first = item.output_text()
    assert item == twin and twin == item
    assert item.model_dump() == twin.model_dump() and item.model_dump_json() == twin.model_dump_json()
    other = item.model_copy(update={"output": [item.output[1]]})
    assert other.output_text() == '[{"type": "output_text", "text": "a", "annotations": []}]'
    assert item.output_text() == first
    assert FunctionCallOutput(call_id="c", output="plain").output_text() == "plain"
