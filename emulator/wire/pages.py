"""Cursor pages, as every list endpoint of the API returns them: `{object: "list", data, first_id,
last_id, has_more}`, after the row whose id is `after`, newest first unless `order` is `asc`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

__all__ = ["listing", "page", "window"]


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
    places, has_more = window([row.get("id") for row in rows], after=after, limit=limit, order=order, missing=missing)
    return listing([rows[n] for n in places], has_more=has_more)


def window(
    ids: list[Any],
    *,
    after: str | None,
    limit: int,
    order: str,
    missing: Callable[[str], EmulatorError],
) -> tuple[list[int], bool]:
    """Where the page `page` makes of rows with these ids (oldest first) lies: their places, in the
    page's order, and whether more follow. Only the ids are read, so a store can decode the page
    alone (a conversation's items: `Conversations.item_page`)."""
    places = list(range(len(ids))) if order == "asc" else list(range(len(ids) - 1, -1, -1))
    if after is not None:
        if not after:
            raise messages.empty_string("after")
        held = [n for n, place in enumerate(places) if ids[place] == after]
        if not held:
            raise missing(after)
        if len(held) > 1:
            raise messages.ambiguous_page_cursor(after, len(held))
        places = places[held[0] + 1 :]
    return places[:limit], len(places) > limit


def listing(data: list[dict[str, Any]], *, has_more: bool = False) -> dict[str, Any]:
    """The list object around `data`."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0].get("id") if data else None,
        "last_id": data[-1].get("id") if data else None,
        "has_more": has_more,
    }
