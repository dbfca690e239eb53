"""Cursor pages (emulator/wire/pages.py), as every list endpoint returns them, and the same
rules through the input_items endpoint of the app."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.wire.pages import listing, page

ROWS = [{"id": f"item_{n}"} for n in range(5)]  # oldest first


def missing(after: str) -> InvalidRequest:
    return messages.no_listed_after("item", after)


def ids(result: dict[str, Any]) -> list[str]:
    return [row["id"] for row in result["data"]]


@pytest.mark.parametrize(
    ("order", "after", "limit", "expected", "has_more"),
    [
        ("desc", None, 2, ["item_4", "item_3"], True),
        ("asc", None, 2, ["item_0", "item_1"], True),
        ("asc", "item_1", 2, ["item_2", "item_3"], True),
        ("asc", "item_2", 10, ["item_3", "item_4"], False),
        ("desc", "item_1", 10, ["item_0"], False),
        ("asc", "item_4", 3, [], False),
        ("desc", None, 5, ["item_4", "item_3", "item_2", "item_1", "item_0"], False),
    ],
)
def test_a_page_follows_the_cursor(
    order: str, after: str | None, limit: int, expected: list[str], has_more: bool
) -> None:
    result = page(ROWS, after=after, limit=limit, order=order, missing=missing)
    assert ids(result) == expected
    assert result["has_more"] is has_more
    assert result["object"] == "list"
    assert (result["first_id"], result["last_id"]) == ((expected[0], expected[-1]) if expected else (None, None))


def test_an_unknown_cursor_is_a_400_naming_after() -> None:
    with pytest.raises(InvalidRequest) as caught:
        page(ROWS, after="item_9", limit=2, order="asc", missing=missing)
    assert str(caught.value) == "No item with id 'item_9' in this list."
    assert caught.value.param == "after"


def test_an_empty_listing() -> None:
    assert listing([]) == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


def test_input_items_page_through_the_sdk(unit_sdk: openai.OpenAI) -> None:
    items = [{"role": "user", "content": f"message {n}"} for n in range(3)]
    response = unit_sdk.responses.create(
        model="m", input=[*items, {"role": "user", "content": "```js\ntext('x')\n```"}]
    )  # type: ignore[arg-type]
    listed = unit_sdk.responses.input_items.list(response.id, order="asc", limit=2)
    assert listed.has_more is True and len(listed.data) == 2
    every = list(unit_sdk.responses.input_items.list(response.id, order="asc", limit=2))  # the SDK follows the cursor
    assert len(every) == 4 and every[0].content[0].text == "message 0"  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.input_items.list(response.id, after="msg_nope")
    assert caught.value.param == "after"


def test_a_cursor_several_rows_hold_is_refused_saying_so() -> None:
    """Rows kept with one id twice (before ids were held unique): a page after it would have
    started after the first, so a client paging on it got the same page back forever."""
    twins = [{"id": "item_0"}, {"id": "item_1"}, {"id": "item_1"}, {"id": "item_2"}]
    with pytest.raises(InvalidRequest) as caught:
        page(twins, after="item_1", limit=1, order="asc", missing=missing)
    assert "2 items in this list have the id 'item_1'" in str(caught.value)
    assert caught.value.param == "after"


def test_an_empty_cursor_is_refused_as_an_empty_string(unit_sdk: openai.OpenAI) -> None:
    response = unit_sdk.responses.create(model="m", input="```js\ntext('x')\n```")
    with pytest.raises(openai.BadRequestError) as caught:
        unit_sdk.responses.input_items.list(response.id, after="")
    assert caught.value.code == "empty_string" and caught.value.param == "after"
