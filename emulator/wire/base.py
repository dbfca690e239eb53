"""What every wire model stands on: strictness, depth-limited free-form JSON, dumping, callers and
message content parts. The items themselves are in `items.py` (and `calls.py`, the tool calls a
client answers)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from ptc_emulator.emulator import messages

__all__ = [
    "MAX_DEPTH",
    "Caller",
    "ContentPart",
    "DirectCaller",
    "InputText",
    "OpenJSON",
    "OpenModel",
    "OutputText",
    "ProgramCaller",
    "Refusal",
    "WireModel",
    "check_depth",
    "dump",
    "parts_text",
    "held_parts_text",
]


MAX_DEPTH = 64


def check_depth(value: Any) -> Any:
    """Free-form JSON (tool schemas, `text`, content-part extras) nested at most MAX_DEPTH deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(messages.json_too_deep(MAX_DEPTH))
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, dict | list))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return value


OpenJSON: TypeAlias = Annotated[dict[str, Any], AfterValidator(check_depth)]
"""A free-form JSON object, depth-limited."""


class WireModel(BaseModel):
    """Strict about types and unknown fields, as the hosted API is."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class OpenModel(BaseModel):
    """For nested shapes the emulator only carries (content parts, annotations): extra fields
    allowed, depth-limited."""

    model_config = ConfigDict(extra="allow", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        return check_depth(value)


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---- callers --------------------------------------------------------------------------------


class DirectCaller(WireModel):
    type: Literal["direct"] = "direct"


class ProgramCaller(WireModel):
    type: Literal["program"] = "program"
    caller_id: str
    """The call ID of the program item that produced this tool call."""


Caller: TypeAlias = Annotated[DirectCaller | ProgramCaller, Field(discriminator="type")]


# ---- message content --------------------------------------------------------------------------


class InputText(OpenModel):
    type: Literal["input_text"]
    text: str


class InputImage(OpenModel):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None


class InputFile(OpenModel):
    type: Literal["input_file"]


class OutputText(OpenModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[OpenJSON] = Field(default_factory=list)
    logprobs: list[OpenJSON] | None = None


class Refusal(OpenModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


ContentPart: TypeAlias = Annotated[
    InputText | InputImage | InputFile | OutputText | Refusal, Field(discriminator="type")
]


_PARTS: TypeAdapter[list[ContentPart]] = TypeAdapter(list[ContentPart])


def parts_text(output: str | list[ContentPart]) -> str:
    """A tool output as text: a string as is; content parts as a JSON array (each part as its
    `model_dump(mode="json", exclude_none=True)`, dumped for the whole list in one call)."""
    if isinstance(output, str):
        return output
    return json.dumps(_PARTS.dump_python(output, mode="json", exclude_none=True))


_HELD = "_parts_text"


def held_parts_text(item: BaseModel) -> str:
    """`parts_text` of `item.output`, made once per output list and kept on the item: a resume
    or a scenario's turn reads it again, and 700,000 parts take a second or more to dump. It is
    made ahead in a worker thread for a long list (`model.runtime.warm_texts`, a scenario's
    context), so the event loop only reads it back. Kept beside the fields, which pydantic's
    equality and dumps do not read; a new `output` list (a copy with another) is dumped anew."""
    output = item.output  # type: ignore[attr-defined]
    if isinstance(output, str):
        return output
    held = item.__dict__.get(_HELD)
    if held is not None and held[0] is output:
        return held[1]  # type: ignore[no-any-return]
    text = parts_text(output)
    item.__dict__[_HELD] = (output, text)
    return text
