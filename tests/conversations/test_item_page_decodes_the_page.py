"""A page of a conversation's items decodes only that page's items, not every stored one.

`GET /v1/conversations/{id}/items?limit=100` on a conversation of 150,000 items took about a second
and held other clients 165-250 ms: every stored item was decoded to hand back 100 (issue 38). The
test counts the stored items' texts decoded while one page is listed (the JSON decoder the stores
use, wrapped): at most the page's. Nothing is timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.storage import memory, sql
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

ITEMS = 2_000
MARK = "stored-item-mark"


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = json.loads

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(text, str) and MARK in text:
            seen.append(text)
        return real(text, *args, **kwargs)

    for module in (memory, sql):
        monkeypatch.setattr(module, "_loads", loads)
    monkeypatch.setattr(jsonpieces.json, "loads", loads)
    return seen


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize(("order", "after"), [("desc", None), ("asc", None), ("asc", 50)])
def test_a_page_of_items_decodes_only_the_page(
    make_server: Callable[..., EmulatorServer], decoded: list[str], store: str, order: str, after: int | None
) -> None:
    server = make_server(store=store)
    items: list[Any] = [{"role": "user", "content": f"{MARK} {n}"} for n in range(ITEMS - 1)]
    items.append({"role": "user", "content": program_message("text('ok')")})
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        cid = client.post("/conversations", json={}).json()["id"]
        made = client.post("/responses", json={"model": "m", "conversation": cid, "input": items, "tools": PTC_TOOLS})
        assert made.status_code == 200, made.text[:500]
        everything = client.get(f"/conversations/{cid}/items", params={"limit": 100, "order": "asc"}).json()["data"]
        params: dict[str, Any] = {"limit": 10, "order": order}
        if after is not None:
            params["after"] = everything[after]["id"]
        decoded.clear()
        listed = client.get(f"/conversations/{cid}/items", params=params)
    assert listed.status_code == 200, listed.text[:500]
    page = listed.json()
    assert len(page["data"]) == 10 and page["has_more"] is True
    if order == "asc":
        start = 0 if after is None else after + 1
        assert [item["id"] for item in page["data"]] == [item["id"] for item in everything[start : start + 10]]
    else:
        assert page["data"][0]["content"][0]["type"] == "output_text"  # the newest: the program's answer
    assert len(decoded) <= 10, f"{len(decoded)} stored items decoded for a page of 10"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_one_item_retrieved_decodes_only_that_item(
    make_server: Callable[..., EmulatorServer], decoded: list[str], store: str
) -> None:
    server = make_server(store=store)
    items: list[Any] = [{"role": "user", "content": f"{MARK} {n}"} for n in range(ITEMS - 1)]
    items.append({"role": "user", "content": program_message("text('ok')")})
    with httpx.Client(base_url=server.base_url, timeout=300) as client:
        cid = client.post("/conversations", json={}).json()["id"]
        made = client.post("/responses", json={"model": "m", "conversation": cid, "input": items, "tools": PTC_TOOLS})
        assert made.status_code == 200, made.text[:500]
        first = client.get(f"/conversations/{cid}/items", params={"limit": 5, "order": "asc"}).json()["data"][4]
        decoded.clear()
        got = client.get(f"/conversations/{cid}/items/{first['id']}")
        missing = client.get(f"/conversations/{cid}/items/msg_missing")
    assert got.status_code == 200, got.text[:500]
    assert got.json() == first
    assert missing.status_code == 404, missing.text[:500]
    assert len(decoded) <= 1, f"{len(decoded)} stored items decoded to retrieve one"
