"""A create in a conversation stores its response and records its turn in one transaction of the
SQLite store: when the turn cannot be written, nothing is, even where deleting the response again
would fail too.

Triggers added to the store's file from a connection of the test's own make the turn's insert
fail and a response's delete fail. Before, the response was stored, then the turn recorded, and
the response deleted again if that failed: with the delete failing too, the response stayed
stored, retrievable, outside its conversation."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import FILENAME
from tests.support import in_process_http

CREATE = {"model": "m", "input": "Run this:\n```js\ntext('x')\n```", "tools": [{"type": "programmatic_tool_calling"}]}

FAILING = """
CREATE TRIGGER test_turn_fails BEFORE INSERT ON conversation_items BEGIN SELECT RAISE(ABORT, 'held'); END;
CREATE TRIGGER test_undo_fails BEFORE DELETE ON responses BEGIN SELECT RAISE(ABORT, 'held'); END;
"""


def _sql(path: Path, script: str) -> list[str]:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.executescript(script)
        return [row[0] for row in db.execute("SELECT id FROM responses")]


@pytest.mark.anyio
async def test_a_turn_that_cannot_be_written_leaves_no_response(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, store="sqlite", bundled_fixtures=False)
    path = tmp_path / FILENAME
    async with in_process_http(settings) as (http, _app):
        made = await http.post("/v1/conversations", json={"items": []})
        assert made.status_code == 200, made.text
        conversation = made.json()["id"]
        create = {**CREATE, "conversation": conversation}
        _sql(path, FAILING)
        with pytest.raises(sqlite3.IntegrityError):  # (the in-process transport raises what the app does)
            await http.post("/v1/responses", json=create)
        left = _sql(path, "DROP TRIGGER test_turn_fails; DROP TRIGGER test_undo_fails;")
        retrievable = [(await http.get(f"/v1/responses/{left_id}")).status_code for left_id in left]
        after = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
        retried = await http.post("/v1/responses", json=create)
        items = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
    assert left == [], f"a failed turn left responses stored (answered {retrievable}) outside their conversation"
    assert after.json()["data"] == [], after.text
    assert retried.status_code == 200, retried.text
    assert len([item for item in items.json()["data"] if item.get("role") == "user"]) == 1, items.text
