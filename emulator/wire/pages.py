"""Cursor pages, as every list endpoint of the API returns them: `{object: "list", data, first_id,
last_id, has_more}`, after the row whose id is `after`, newest first unless `order` is `asc`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

__all__ = ["listing", "page"]


def page(
    rows: list[dict[str, Any]],
    *,
    after: str | None,
    limit: int,
    order: str,
    missing: Callable[[str], EmulatorError],
) -> dict[str, Any]:
    """A page of `rows` (given oldest first); `missing(after)` is the 400 when no row has the id `after`.

    `after` must mark one place: an empty one is refused as the hosted API refuses an empty string,
    and one that several rows hold (items kept before ids were held unique) says so, where reading
    on from its first row would hand a client paging on it the same page back forever."""
    rows = list(rows) if order == "asc" else list(reversed(rows))
    if after is not None:
        if not after:
            raise messages.empty_string("after")
        held = [i for i, row in enumerate(rows) if row.get("id") == after]
        if not held:
            raise missing(after)
        if len(held) > 1:
            raise messages.ambiguous_page_cursor(after, len(held))
        rows = rows[held[0] + 1 :]
    return listing(rows[:limit], has_more=len(rows) > limit)


def listing(data: list[dict[str, Any]], *, has_more: bool = False) -> dict[str, Any]:
    """The list object around `data`."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0].get("id") if data else None,
        "last_id": data[-1].get("id") if data else None,
        "has_more": has_more,
    }
