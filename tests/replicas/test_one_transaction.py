"""A pair of writes is one transaction: a 503 leaves nothing behind even when taking the first
write back would fail too.

Each test makes the second write of a pair fail (a trigger that raises `lock_not_available`, as
a lock held past the server's `lock_timeout` does) and makes what would take the first write back
fail the same way (a trigger on the `DELETE` of a response or a session, on putting a session's
turn back): then, the triggers gone, what the store holds is read through the public surface.

Before: a create in a conversation stored its response, then recorded its turn, and deleted the
response if that failed; an Agents API session's create or event stored the session, then
published its events, and took the session back if that failed. With the undo failing too, the
response stayed stored outside its conversation, the session stayed made, and the event's turn
stayed in progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.replicas.test_all_or_nothing import BETA, SESSION, _busy, _settings
from tests.replicas.test_pool_lanes import PTC
from tests.support import in_process_http

REFUSE = """
CREATE FUNCTION ptc_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'held by the test' USING ERRCODE = 'lock_not_available';
END $$;
CREATE FUNCTION ptc_test_no_turn_taken_back() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_array_length((NEW.document::jsonb)->'turns') < jsonb_array_length((OLD.document::jsonb)->'turns') THEN
        RAISE EXCEPTION 'held by the test' USING ERRCODE = 'lock_not_available';
    END IF;
    RETURN NEW;
END $$;
"""


class _Failing:
    """Triggers that make writes fail, from a session of the test's own, until `drop()`."""

    def __init__(self, url: str, *triggers: tuple[str, str, str]) -> None:
        """Each trigger: its table, its event (`INSERT`, `DELETE`, `UPDATE`) and its function."""
        self._url, self._triggers = url, triggers

    def __enter__(self) -> _Failing:
        with psycopg.connect(self._url, autocommit=True) as db:
            db.execute(REFUSE)
            for n, (table, event, function) in enumerate(self._triggers):
                db.execute(
                    f"CREATE TRIGGER ptc_test_{n} BEFORE {event} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()"
                )
        return self

    def drop(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as db:
            for n, (table, _event, _function) in enumerate(self._triggers):
                db.execute(f"DROP TRIGGER IF EXISTS ptc_test_{n} ON {table}")

    def __exit__(self, *exc: object) -> None:
        self.drop()


def _ids(url: str, sql: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as reader:
        return [row[0] for row in reader.execute(sql).fetchall()]


@pytest.mark.anyio
async def test_a_create_in_a_conversation_whose_turn_and_undo_both_fail_leaves_no_response(
    postgres_url: str, tmp_path: Path
) -> None:
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        made = await http.post("/v1/conversations", json={"items": []})
        assert made.status_code == 200, made.text
        conversation = made.json()["id"]
        create = {**PTC, "conversation": conversation}
        turn_fails = ("conversation_items", "INSERT", "ptc_test_refuse")
        undo_fails = ("responses", "DELETE", "ptc_test_refuse")
        with _Failing(postgres_url, turn_fails, undo_fails) as failing:
            refused = await http.post("/v1/responses", json=create)
            failing.drop()
        left = _ids(postgres_url, "SELECT id FROM responses")
        retrievable = [(await http.get(f"/v1/responses/{left_id}")).status_code for left_id in left]
        after = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
        retried = await http.post("/v1/responses", json=create)
        items = await http.get(f"/v1/conversations/{conversation}/items", params={"limit": 100})
    _busy(refused)
    assert left == [], f"a 503 left responses stored (answered {retrievable}) outside their conversation"
    assert after.json()["data"] == [], f"a 503 left a half turn in the conversation: {after.text}"
    assert retried.status_code == 200, retried.text
    assert len([item for item in items.json()["data"] if item.get("role") == "user"]) == 1, items.text
    assert _ids(postgres_url, "SELECT id FROM responses") == [retried.json()["id"]]


@pytest.mark.anyio
async def test_a_session_create_whose_events_and_undo_both_fail_leaves_no_session(
    postgres_url: str, tmp_path: Path
) -> None:
    body = {**SESSION, "metadata": {"try": "undo"}}
    listing = {"metadata[try]": "undo"}
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        events_fail = ("stream_events", "INSERT", "ptc_test_refuse")
        undo_fails = ("records", "DELETE", "ptc_test_refuse")
        with _Failing(postgres_url, events_fail, undo_fails) as failing:
            refused = await http.post("/v1/agents/sessions", headers=BETA, json=body)
            failing.drop()
        after = await http.get("/v1/agents/sessions", headers=BETA, params=listing)
        retried = await http.post("/v1/agents/sessions", headers=BETA, json=body)
        listed = await http.get("/v1/agents/sessions", headers=BETA, params=listing)
    _busy(refused)
    assert after.json()["data"] == [], f"a 503 left a session, its turn in progress: {after.text}"
    assert retried.status_code == 200, retried.text
    assert len(listed.json()["data"]) == 1, listed.text


async def _idle(http: Any, session: str) -> dict[str, Any]:
    """The session once its turn is over (a guard on the driver, not a measure)."""
    import asyncio

    for _ in range(3000):
        seen = await http.get(f"/v1/agents/sessions/{session}", headers=BETA)
        if seen.json()["status"] != "in_progress":
            return dict(seen.json())
        await asyncio.sleep(0.01)
    raise AssertionError(f"session {session} stayed in progress")


@pytest.mark.anyio
async def test_an_event_whose_events_and_undo_both_fail_leaves_no_turn_in_progress(
    postgres_url: str, tmp_path: Path
) -> None:
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}
    event = {"events": [{"type": "agent.session.input.message", "input": [message]}]}
    async with in_process_http(_settings(postgres_url, tmp_path)) as (http, _app):
        made = await http.post("/v1/agents/sessions", headers=BETA, json=SESSION)
        assert made.status_code == 200, made.text
        session = made.json()["id"]
        await _idle(http, session)
        turns = await http.get(f"/v1/agents/sessions/{session}/turns", headers=BETA)
        events_fail = ("stream_events", "INSERT", "ptc_test_refuse")
        undo_fails = ("records", "UPDATE", "ptc_test_no_turn_taken_back")
        with _Failing(postgres_url, events_fail, undo_fails) as failing:
            refused = await http.post(f"/v1/agents/sessions/{session}/events", headers=BETA, json=event)
            failing.drop()
        seen = await http.get(f"/v1/agents/sessions/{session}", headers=BETA)
        after = await http.get(f"/v1/agents/sessions/{session}/turns", headers=BETA)
    _busy(refused)
    assert seen.json()["status"] != "in_progress", f"a 503 left the session's turn in progress: {seen.text}"
    assert len(after.json()["data"]) == len(turns.json()["data"]), f"a 503 left a turn: {after.text}"
