"""How the house handles one item type of a tool kind outside the kind itself: how `input_items.list`
shows it, and what of it the model reads (token usage). Each kind declares its item types with these
(`kinds.py`); `ITEMS` there finds one by type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ptc_emulator.emulator.wire.base import dump

__all__ = ["ItemSurface", "compact", "compact_field", "fields", "no_text", "output_text"]


def compact(value: Any) -> str:
    """Structured text as the model reads it: compact JSON."""
    return json.dumps(value, separators=(",", ":"))


def no_text(item: Any) -> Iterable[str]:
    """An item the model reads nothing of (it counts no tokens)."""
    return ()


def fields(*names: str) -> Callable[[dict[str, Any]], Iterable[str]]:
    """The text: these string fields, in order ("" where one is missing)."""
    return lambda item: [item.get(name, "") for name in names]


def compact_field(name: str, empty: Any) -> Callable[[dict[str, Any]], Iterable[str]]:
    """The text: one structured field as compact JSON (`empty` where it is missing)."""
    return lambda item: [compact(item.get(name, empty))]


def output_text(item: dict[str, Any]) -> Iterable[str]:
    """An answer's `output`: a string as is, anything else as compact JSON."""
    output = item.get("output") or ""
    yield output if isinstance(output, str) else compact(output)


@dataclass(frozen=True, slots=True)
class ItemSurface:
    """One item type of a kind, as listing and usage see it."""

    type: str
    """The item's `type` (`shell_call`)."""
    listed_id: str | None = None
    """The id prefix of the item: `input_items.list` gives it one when it has none; for a call item,
    also the prefix of the ids the emulator makes (`ToolKind.id_prefix`)."""
    listed: tuple[tuple[str, Any], ...] = (("status", "completed"),)
    """Fields `input_items.list` fills in (in this order) where the item lacks them."""
    listed_only: tuple[str, ...] = ()
    """Of those, the ones the item's input form does not have: dropped when a listed item is read
    back as input."""
    text: Callable[[dict[str, Any]], Iterable[str]] = no_text
    """What the model reads of the item, from its JSON form (`usage.item_text`)."""
    read: Callable[[Any], Iterable[str]] | None = None
    """The same from the validated item, where that is quicker than `text` of its dump."""

    def model_text(self, item: Any) -> Iterable[str]:
        """What the model reads of a validated item (`usage.model_text`)."""
        return self.read(item) if self.read is not None else self.text(dump(item))
