"""A create body's `input` whose first items arrive as validated models already.

The replayed-body reader (`history/replayed.py`) hands a body that extends a conversation it
validated before back with those items as their models, in a `KnownItems` list that says how
many lead; `CreateRequest` validates and JSON-checks only the items after them. This is all the
wire knows of that reader: a list type and a count.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KnownItems", "known_count"]


class KnownItems(list[Any]):
    """A parsed body's `input` whose first `known` items are validated models already."""

    known: int = 0


def known_count(items: Any) -> int:
    """How many leading items of a body's `input` are validated models already (the reader made
    them): the JSON check passed them, at the same depth, in the body they were remembered from."""
    return items.known if isinstance(items, KnownItems) else 0
