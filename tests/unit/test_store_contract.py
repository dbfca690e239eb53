"""The Store's contract, one set of tests run against each implementation (memory, SQLite).

Every operation of every part is asserted through `storage.open_store`: what it returns, what
"not found" looks like, the order of listings, that what a call returns is a copy, and, for the
SQLite store, what survives closing and opening it again (and what does not: the journal).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.emulator.storage import (
    FILENAME,
    DataDirHeld,
    Records,
    Store,
    StoredConversation,
    StoredResponse,
    StoredScenario,
    open_store,
)

Open = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    opened: list[Store] = []

    def open_() -> Store:
        store = open_store(request.param, tmp_path / "data")
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(opener: Open) -> Store:
    return opener()


@pytest.fixture
def reopen(tmp_path: Path) -> Callable[[Store], Store]:
    """Close a SQLite store and open its file again (the PostgreSQL contract file has its own)."""

    def again(store: Store) -> Store:
        store.close()
        return open_store("sqlite", tmp_path / "data")

    return again


def response(
    response_id: str, *, output: list[str] = (), inputs: list[str] = (), previous: str | None = None
) -> StoredResponse:
    body = {"id": response_id, "object": "response", "status": "completed", "output": [message(i) for i in output]}
    return StoredResponse(response_id, body, [message(i) for i in inputs], previous)


def message(item_id: str, text: str = "hi") -> dict[str, object]:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_open_store_names_its_kind_and_refuses_others(tmp_path: Path) -> None:
    assert open_store("memory").kind == "memory"
    sqlite_store = open_store("sqlite", tmp_path)
    assert sqlite_store.kind == "sqlite" and (tmp_path / FILENAME).is_file()
    sqlite_store.close()
    with pytest.raises(ValueError, match="unknown store"):
        open_store("postgres", tmp_path)
    with pytest.raises(ValueError, match="data directory"):
        open_store("sqlite")


def test_memory_writes_nothing(tmp_path: Path) -> None:
    store = open_store("memory", tmp_path)
    store.responses.put(response("resp_1", output=["msg_1"]))
    store.close()
    assert list(tmp_path.iterdir()) == []


# ---- responses ---------------------------------------------------------------------------------


def test_responses_put_get_delete(store: Store) -> None:
    parts = store.responses
    assert parts.get("resp_1") is None and parts.count() == 0
    record = response("resp_1", output=["msg_out"], inputs=["msg_in"], previous="resp_0")
    parts.put(record)
    assert parts.get("resp_1") == record and parts.count() == 1
    assert parts.delete("resp_1") is True
    assert parts.get("resp_1") is None and parts.count() == 0
    assert parts.delete("resp_1") is False


def test_responses_put_replaces(store: Store) -> None:
    store.responses.put(response("resp_1", output=["msg_a"]))
    replaced = response("resp_1", output=["msg_b"])
    store.responses.put(replaced)
    assert store.responses.get("resp_1") == replaced and store.responses.count() == 1
    assert store.responses.item("msg_b") == ("resp_1", message("msg_b"))
    assert store.responses.item("msg_a") is None, "the replaced response's items went with it"


def test_responses_index_their_items_by_id(store: Store) -> None:
    store.responses.put(response("resp_1", output=["msg_out"], inputs=["msg_in"]))
    store.responses.put(response("resp_2", output=["msg_two"]))
    assert store.responses.item("msg_in") == ("resp_1", message("msg_in"))
    assert store.responses.item("msg_out") == ("resp_1", message("msg_out"))
    assert store.responses.item("msg_two") == ("resp_2", message("msg_two"))
    assert store.responses.item("msg_none") is None
    store.responses.delete("resp_1")
    assert store.responses.item("msg_in") is None and store.responses.item("msg_out") is None
    assert store.responses.item("msg_two") == ("resp_2", message("msg_two"))


def test_responses_return_copies(store: Store) -> None:
    record = response("resp_1", output=["msg_1"])
    store.responses.put(record)
    record.response["status"] = "edited after put"
    got = store.responses.get("resp_1")
    assert got is not None and got.response["status"] == "completed"
    got.response["output"].clear()
    got.input_items.append(message("msg_x"))
    again = store.responses.get("resp_1")
    assert again is not None and len(again.response["output"]) == 1 and again.input_items == []
    found = store.responses.item("msg_1")
    assert found is not None
    found[1]["id"] = "edited"
    assert store.responses.item("msg_1") == ("resp_1", message("msg_1"))


def test_responses_keep_their_scope_and_its_items_are_found_in_it_only(
    store: Store, reopen: Callable[[Store], Store]
) -> None:
    scoped = StoredResponse("resp_a", response("resp_a").response, [message("msg_a")], None, "test-a")
    store.responses.put(scoped)
    store.responses.put(response("resp_n", output=["msg_n"]))
    if store.kind != "memory":  # a store that outlives its process: open it again
        store = reopen(store)
    try:
        assert store.responses.get("resp_a") == scoped
        assert store.responses.item_in("test-a", "msg_a") == ("resp_a", message("msg_a"))
        assert store.responses.item_in("test-b", "msg_a") is None
        assert store.responses.item_in(None, "msg_a") is None
        assert store.responses.item_in(None, "msg_n") == ("resp_n", message("msg_n"))
        assert store.responses.item_in("test-a", "msg_n") is None
        assert store.responses.item_in("test-a", "msg_none") is None
        assert store.responses.item("msg_a") == ("resp_a", message("msg_a")), "item finds it in any scope"
    finally:
        store.close()


def test_sqlite_opens_a_file_made_before_scopes_versions_statuses_and_continuations_were_kept(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with sqlite3.connect(tmp_path / "data" / FILENAME) as db:
        db.executescript(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, previous_response_id TEXT, response TEXT NOT NULL,"
            " input_items TEXT NOT NULL);"
            "CREATE TABLE items (id TEXT PRIMARY KEY, response_id TEXT NOT NULL REFERENCES responses(id)"
            " ON DELETE CASCADE, item TEXT NOT NULL);"
            "CREATE TABLE conversations (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, metadata TEXT NOT NULL);"
        )
        db.execute("INSERT INTO conversations VALUES ('conv_old', 1, '{}')")
        db.execute("INSERT INTO responses VALUES ('resp_old', NULL, '{\"status\": \"completed\"}', '[]')")
        db.execute("INSERT INTO items VALUES ('msg_old', 'resp_old', '{\"id\": \"msg_old\"}')")
        for n, status in enumerate(["completed", "in_progress"]):
            body = f'{{"status": "{status}"}}'
            db.execute(f"INSERT INTO responses VALUES ('resp_next{n}', 'resp_old', '{body}', '[]')")
    db.close()
    store = open_store("sqlite", tmp_path / "data")
    try:
        found = store.responses.get("resp_old")
        assert found is not None and found.scope is None
        assert store.responses.item_in(None, "msg_old") == ("resp_old", {"id": "msg_old"})
        store.responses.put(StoredResponse("resp_new", {"status": "completed"}, [], None, "test-a"))
        again = store.responses.get("resp_new")
        assert again is not None and again.scope == "test-a"
        assert store.conversations.read("conv_old") == (0, [])
        assert store.conversations.append("conv_old", [message("msg_1")], expected=0) is True
        # the statuses the bodies held count: the one cut off in progress failed when the file opened
        cut = store.responses.get("resp_next1")
        assert cut is not None and cut.response["status"] == "failed"
        # the table of paused programs' continuations is made in it
        assert store.responses.continuation("resp_old") is None
        assert store.responses.put_continuation(response("resp_c", previous="resp_old"), "d") is None
        assert store.responses.continuation("resp_old") == ("resp_c", "d")
    finally:
        store.close()


# ---- conversations -----------------------------------------------------------------------------


def test_conversations_create_get_update_delete(store: Store) -> None:
    parts = store.conversations
    assert parts.get("conv_1") is None
    parts.create(StoredConversation("conv_1", 100, {"topic": "a"}), [message("msg_1")])
    assert parts.get("conv_1") == StoredConversation("conv_1", 100, {"topic": "a"})
    assert parts.update(StoredConversation("conv_1", 999, {"topic": "b"})) is True
    assert parts.get("conv_1") == StoredConversation("conv_1", 100, {"topic": "b"}), "created_at stays"
    assert parts.update(StoredConversation("conv_none", 0, {})) is False
    assert parts.delete("conv_1") is True
    assert parts.get("conv_1") is None and parts.items("conv_1") == []
    assert parts.delete("conv_1") is False


def test_conversations_keep_the_scope_they_were_made_in(store: Store) -> None:
    """The scope a conversation was made in comes back with it, and an update keeps it (the routes
    hide it from every other scope)."""
    parts = store.conversations
    parts.create(StoredConversation("conv_a", 1, {}, "scope-a"), [message("msg_1")])
    parts.create(StoredConversation("conv_none", 2, {}), [])
    assert parts.get("conv_a") == StoredConversation("conv_a", 1, {}, "scope-a")
    assert parts.get("conv_none") == StoredConversation("conv_none", 2, {}, None)
    assert parts.update(StoredConversation("conv_a", 1, {"k": "v"}, "scope-a")) is True
    assert parts.get("conv_a") == StoredConversation("conv_a", 1, {"k": "v"}, "scope-a")


def test_conversation_items_keep_their_order(store: Store) -> None:
    parts = store.conversations
    parts.create(StoredConversation("conv_1", 1, {}), [message("msg_1"), message("msg_2")])
    parts.create(StoredConversation("conv_2", 2, {}), [])
    assert parts.append("conv_1", [message("msg_3"), message("msg_4")]) is True
    assert parts.append("conv_2", [message("msg_5")]) is True
    assert [i["id"] for i in parts.items("conv_1")] == ["msg_1", "msg_2", "msg_3", "msg_4"]
    assert parts.items("conv_2") == [message("msg_5")]
    assert parts.append("conv_none", [message("msg_6")]) is False
    assert parts.items("conv_none") == []


def test_a_conversation_counts_and_reads_its_newest_items_alone(store: Store) -> None:
    parts = store.conversations
    parts.create(StoredConversation("conv_1", 1, {}), [message(f"msg_{n}") for n in range(5)])
    assert parts.append("conv_1", [message("msg_5")]) is True
    assert [parts.holds_over("conv_1", count) for count in (0, 5, 6, 100)] == [True, True, False, False]
    assert parts.holds_over("conv_none", 0) is False
    assert parts.read("conv_1", last=2) == (1, [message("msg_4"), message("msg_5")])
    assert parts.read("conv_1", last=0) == (1, [])
    assert parts.read("conv_1", last=9) == parts.read("conv_1")
    assert parts.read("conv_none", last=2) is None


def test_conversation_append_at_a_version_is_checked_and_written_at_once(
    store: Store, reopen: Callable[[Store], Store]
) -> None:
    parts = store.conversations
    assert parts.read("conv_none") is None
    parts.create(StoredConversation("conv_1", 1, {}), [message("msg_1")])
    assert parts.read("conv_1") == (0, [message("msg_1")])
    # Two writers read version 0: the first appends, the second is refused and appends nothing.
    assert parts.append("conv_1", [message("msg_a")], expected=0) is True
    assert parts.append("conv_1", [message("msg_a")], expected=0) is False
    assert parts.read("conv_1") == (1, [message("msg_1"), message("msg_a")])
    assert parts.append("conv_1", [message("msg_b")], expected=1) is True
    assert parts.append("conv_1", [message("msg_c")]) is True, "without a version, as before"
    assert parts.delete_item("conv_1", "msg_c") is True
    assert parts.delete_item("conv_1", "msg_none") is False
    version, items = parts.read("conv_1") or (None, None)
    assert version == 4 and [i["id"] for i in items or []] == ["msg_1", "msg_a", "msg_b"], "a deletion counts"
    assert parts.append("conv_1", [message("msg_d")], expected=3) is False
    assert parts.append("conv_none", [message("msg_d")], expected=0) is False
    if store.kind != "memory":  # a store that outlives its process: open it again
        store = reopen(store)
        assert store.conversations.read("conv_1") == (4, [message("msg_1"), message("msg_a"), message("msg_b")])
        store.close()


def with_status(record: StoredResponse, status: str) -> StoredResponse:
    return StoredResponse(
        record.id, {**record.response, "status": status}, record.input_items, record.previous_response_id
    )


def test_a_paused_program_keeps_one_continuation(store: Store, reopen: Callable[[Store], Store]) -> None:
    parts = store.responses
    parts.put(response("resp_paused"))
    assert parts.continuation("resp_paused") is None
    # The first continuation is put; a second is refused, nothing written, and told the first.
    first = response("resp_a", previous="resp_paused")
    assert parts.put_continuation(first, "digest-a") is None
    assert parts.put_continuation(response("resp_b", previous="resp_paused"), "digest-b") == "resp_a"
    assert parts.get("resp_b") is None and parts.count() == 2
    assert parts.continuation("resp_paused") == ("resp_a", "digest-a")
    finished = with_status(first, "incomplete")
    assert parts.put_continuation(finished, "digest-a") is None, "one already put is replaced without the check"
    assert parts.get("resp_a") == finished and parts.continuation("resp_paused") == ("resp_a", "digest-a")
    # A plain put is no continuation (a fork of a response whose program did not pause).
    parts.put(response("resp_fork", previous="resp_other"))
    assert parts.continuation("resp_other") is None
    assert parts.put_continuation(response("resp_c", previous="resp_other"), "digest-c") is None
    assert parts.put_continuation(response("resp_root"), "digest-root") is None, "nothing to continue: a put"
    # A background continuation still queued holds the pause; once it failed, the pause is free.
    queued = with_status(response("resp_q", previous="resp_bg"), "queued")
    assert parts.put_continuation(queued, "digest-q") is None
    assert parts.put_continuation(response("resp_r", previous="resp_bg"), "digest-r") == "resp_q"
    parts.put(with_status(queued, "failed"))
    assert parts.continuation("resp_bg") is None
    assert parts.put_continuation(response("resp_s", previous="resp_bg"), "digest-s") is None
    assert parts.continuation("resp_bg") == ("resp_s", "digest-s")
    if store.kind != "memory":  # a store that outlives its process: open it again
        store = reopen(store)
        parts = store.responses
    try:
        assert parts.continuation("resp_paused") == ("resp_a", "digest-a")
        assert parts.put_continuation(response("resp_d", previous="resp_paused"), "digest-d") == "resp_a"
        # Deleting the continuation frees the pause; a cancelled one does too.
        assert parts.delete("resp_a") is True
        assert parts.continuation("resp_paused") is None
        assert parts.put_continuation(response("resp_e", previous="resp_paused"), "digest-e") is None
        parts.put(with_status(response("resp_e", previous="resp_paused"), "cancelled"))
        assert parts.continuation("resp_paused") is None
        assert parts.put_continuation(response("resp_f", previous="resp_paused"), "digest-f") is None
        assert parts.continuation("resp_paused") == ("resp_f", "digest-f")
        assert parts.get("resp_e") is not None, "the cancelled one stays, as it was"
    finally:
        store.close()


def test_an_unfinished_response_is_replaced_once(store: Store) -> None:
    """A background response finishing and a cancel of it: whichever is written first stays."""
    parts = store.responses
    queued = with_status(response("resp_bg", output=["msg_q"]), "queued")
    parts.put(queued)
    cancelled = with_status(response("resp_bg", output=["msg_c"]), "cancelled")
    assert parts.replace_unfinished(cancelled) is True
    assert parts.get("resp_bg") == cancelled and parts.item("msg_c") == ("resp_bg", message("msg_c"))
    assert parts.item("msg_q") is None, "the replaced one's items went with it"
    assert parts.replace_unfinished(with_status(response("resp_bg", output=["msg_f"]), "completed")) is False
    assert parts.get("resp_bg") == cancelled and parts.item("msg_f") is None, "the finish came too late"
    assert parts.replace_unfinished(with_status(response("resp_none"), "failed")) is False
    assert parts.get("resp_none") is None, "nothing to replace: nothing written"


def test_conversation_delete_item_removes_the_first_with_that_id(store: Store) -> None:
    parts = store.conversations
    parts.create(StoredConversation("conv_1", 1, {}), [message("msg_1", "first"), message("msg_2")])
    parts.append("conv_1", [message("msg_1", "again")])
    assert parts.delete_item("conv_1", "msg_1") is True
    assert parts.items("conv_1") == [message("msg_2"), message("msg_1", "again")]
    assert parts.delete_item("conv_1", "msg_none") is False
    assert parts.delete_item("conv_none", "msg_2") is False
    assert parts.delete_item("conv_1", "msg_1") is True
    assert parts.delete_item("conv_1", "msg_1") is False
    assert parts.items("conv_1") == [message("msg_2")]


def test_conversations_return_copies(store: Store) -> None:
    metadata = {"topic": "a"}
    items = [message("msg_1")]
    store.conversations.create(StoredConversation("conv_1", 1, metadata), items)
    metadata["topic"] = "edited"
    items.append(message("msg_2"))
    got = store.conversations.get("conv_1")
    assert got is not None and got.metadata == {"topic": "a"}
    got.metadata["topic"] = "edited"
    store.conversations.items("conv_1")[0]["id"] = "edited"
    assert store.conversations.get("conv_1") == StoredConversation("conv_1", 1, {"topic": "a"})
    assert store.conversations.items("conv_1") == [message("msg_1")]


# ---- sessions (records) ------------------------------------------------------------------------


def test_records_put_get_delete_by_kind(store: Store) -> None:
    parts = store.sessions
    assert parts.get("session", "s1") is None and parts.all("session") == []
    parts.put("session", "s1", {"id": "s1", "n": 1})
    parts.put("agent", "s1", {"id": "s1", "agent": True})
    assert parts.get("session", "s1") == {"id": "s1", "n": 1}
    assert parts.get("agent", "s1") == {"id": "s1", "agent": True}
    assert parts.delete("session", "s1") is True
    assert parts.get("session", "s1") is None and parts.get("agent", "s1") is not None
    assert parts.delete("session", "s1") is False
    assert parts.delete("nothing", "s1") is False


def test_records_list_in_first_put_order(store: Store) -> None:
    parts = store.sessions
    for n in (3, 1, 2):
        parts.put("session", f"s{n}", {"id": f"s{n}", "v": 0})
    parts.put("session", "s3", {"id": "s3", "v": 1})  # replaced: keeps its place
    parts.delete("session", "s1")
    parts.put("session", "s1", {"id": "s1", "v": 2})  # put again after a delete: last
    assert parts.all("session") == [{"id": "s3", "v": 1}, {"id": "s2", "v": 0}, {"id": "s1", "v": 2}]
    assert parts.all("agent") == []


def test_records_return_copies(store: Store) -> None:
    document: dict[str, object] = {"id": "s1", "turns": []}
    store.sessions.put("session", "s1", document)
    document["turns"] = ["edited"]
    got = store.sessions.get("session", "s1")
    assert got == {"id": "s1", "turns": []}
    got["turns"].append("edited")
    store.sessions.all("session")[0]["id"] = "edited"
    assert store.sessions.get("session", "s1") == {"id": "s1", "turns": []}


def test_records_keep_a_head_beside_the_document(store: Store) -> None:
    """`heads` gives each record's head (None: put without one), in `all`'s order; `put_head`
    gives one only to a record without one; a `put` replaces both."""
    parts = store.sessions
    parts.put("session", "s1", {"id": "s1", "big": "x" * 100}, {"running": True})
    parts.put("session", "s2", {"id": "s2"})
    parts.put("agent", "a1", {"id": "a1"}, {"other": 1})
    assert parts.heads("session") == [("s1", {"running": True}), ("s2", None)]
    assert parts.put_head("session", "s1", {"running": False}) is False
    assert parts.put_head("session", "s2", {"running": False}) is True
    assert parts.put_head("session", "s2", {"running": True}) is False
    assert parts.put_head("session", "gone", {"running": True}) is False
    assert parts.heads("session") == [("s1", {"running": True}), ("s2", {"running": False})]
    parts.put("session", "s1", {"id": "s1"}, {"running": False})  # replaced: keeps its place
    parts.put("session", "s2", {"id": "s2", "v": 2})
    assert parts.heads("session") == [("s1", {"running": False}), ("s2", None)]
    assert parts.get("session", "s1") == {"id": "s1"} and parts.heads("agent") == [("a1", {"other": 1})]
    parts.delete("session", "s1")
    assert parts.heads("session") == [("s2", None)]


def _heads_to_choose(parts: Records) -> None:
    """Sessions s1..s6 (oldest first) of several scopes, agents, metadata; s2 and s5 running, s6
    put without a head."""
    for n, scope, agent, running in (
        (1, None, "a", False),
        (2, "x", "a", True),
        (3, "y", "b", False),
        (4, None, "b", False),
        (5, None, "a", True),
    ):
        head = {"scope": scope, "agent_id": agent, "metadata": {"n": str(n), "odd": str(n % 2)}, "running": running}
        parts.put("session", f"s{n}", {"id": f"s{n}"}, head)
    parts.put("session", "s6", {"id": "s6"})
    parts.put("agent", "a1", {"id": "a1"}, {"running": True})


def test_records_choose_the_running_and_page_by_their_heads(store: Store) -> None:
    """`running`, `unheaded` and `page` choose by the heads in the store: a page by scope, agent,
    metadata, in either order, after a cursor (None: a cursor not among those chosen). A record
    without a head is of no scope and no agent, with no metadata."""
    parts = store.sessions
    _heads_to_choose(parts)
    assert parts.running("session") == ["s2", "s5"] and parts.running("agent") == ["a1"]
    assert parts.unheaded("session") == ["s6"]

    def ids(**given: Any) -> tuple[list[str], bool] | None:
        return parts.page("session", **{"scope": None, "limit": 20, **given})

    assert ids() == (["s6", "s5", "s4", "s1"], False), "no scope: those made in none"
    assert ids(scope="x") == (["s6", "s5", "s4", "s2", "s1"], False)
    assert ids(scope="x", order="asc", limit=2) == (["s1", "s2"], True)
    assert ids(scope="x", order="asc", limit=2, after="s2") == (["s4", "s5"], True)
    assert ids(scope="x", limit=1, after="s4") == (["s2"], True)
    assert ids(scope="x", agent_id="a") == (["s5", "s2", "s1"], False)
    assert ids(scope="y", metadata={"odd": "1"}) == (["s5", "s3", "s1"], False)
    assert ids(scope="y", metadata={"odd": "1", "n": "3"}) == (["s3"], False)
    assert ids(scope="y", metadata={"odd": "1"}, after="s3", limit=1) == (["s1"], False)
    assert ids(scope="y", agent_id="b", metadata={"n": "2"}) == ([], False)
    assert ids(after="s2") is None, "a cursor of another scope"
    assert ids(scope="x", agent_id="b", after="s2") is None, "a cursor of another agent"
    assert ids(scope="y", metadata={"odd": "0"}, after="s3") is None, "a cursor of other metadata"
    assert ids(after="gone") is None and ids(after="a1") is None
    assert parts.put_head("session", "s6", {"scope": None, "agent_id": "c", "metadata": {}, "running": True})
    assert parts.unheaded("session") == [] and parts.running("session") == ["s2", "s5", "s6"]
    assert ids(agent_id="c") == (["s6"], False)
    parts.put("session", "s2", {"id": "s2"}, {"scope": "x", "agent_id": "a", "metadata": {}, "running": False})
    parts.delete("session", "s5")
    assert parts.running("session") == ["s6"], "a replaced head replaces what is kept of it"
    assert ids(scope="x", order="asc") == (["s1", "s2", "s4", "s6"], False), "a replaced record keeps its place"


def test_records_keep_what_they_choose_by_across_reopening(store: Store, reopen: Callable[[Store], Store]) -> None:
    _heads_to_choose(store.sessions)
    if store.kind != "memory":  # a store that outlives its process: open it again
        store = reopen(store)
    try:
        assert store.sessions.running("session") == ["s2", "s5"]
        assert store.sessions.page("session", scope="x", agent_id="a", limit=2) == (["s5", "s2"], True)
    finally:
        store.close()


def test_a_sqlite_file_of_heads_alone_gets_what_they_choose_by_from_them(tmp_path: Path) -> None:
    """A file written before the heads' scope, agent and running were kept apart (their columns
    and indexes missing) gets them from its heads when it is opened."""
    store = open_store("sqlite", tmp_path / "data")
    _heads_to_choose(store.sessions)
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / FILENAME)) as db:
        for index in ("records_running", "records_unheaded", "records_chosen"):
            db.execute(f"DROP INDEX {index}")
        for column in ("scope", "agent_id", "running"):
            db.execute(f"ALTER TABLE records DROP COLUMN {column}")
        db.commit()
    store = open_store("sqlite", tmp_path / "data")
    try:
        assert store.sessions.running("session") == ["s2", "s5"] and store.sessions.unheaded("session") == ["s6"]
        assert store.sessions.page("session", scope="x", agent_id="a", limit=20) == (["s5", "s2", "s1"], False)
        assert store.sessions.page("session", scope="y", limit=1, order="asc") == (["s1"], True)
    finally:
        store.close()


def test_records_put_at_a_version_is_checked_and_written_at_once(store: Store) -> None:
    """`read` gives a record's version with its document: 1 once put, one more with every put (not
    with `put_head`). A put at a version (`expected`) is written only while the record is still
    at it, and never puts back a record deleted meanwhile: False, and nothing written (an Agents
    API session's save by a replica stalled past its lease, after another replica wrote it)."""
    parts = store.sessions
    assert parts.read("session", "s1") is None
    assert parts.put("session", "s1", {"id": "s1", "n": 1}) is True  # (no version given: put as before)
    assert parts.read("session", "s1") == (1, {"id": "s1", "n": 1})
    assert parts.put_head("session", "s1", {"running": True}) is True
    assert parts.read("session", "s1") == (1, {"id": "s1", "n": 1})
    assert parts.put("session", "s1", {"id": "s1", "n": 2}, {"running": False}, expected=1) is True
    assert parts.read("session", "s1") == (2, {"id": "s1", "n": 2})
    # A second writer that read version 1 too (a replica stalled past its lease): refused.
    assert parts.put("session", "s1", {"id": "s1", "n": "stale"}, {"running": True}, expected=1) is False
    assert parts.read("session", "s1") == (2, {"id": "s1", "n": 2})
    assert parts.heads("session") == [("s1", {"running": False})]
    assert parts.put("session", "s1", {"id": "s1", "n": 3}) is True  # a put without a version moves it on too
    assert parts.read("session", "s1") == (3, {"id": "s1", "n": 3})
    assert parts.delete("session", "s1") is True
    assert parts.put("session", "s1", {"id": "s1", "n": "back"}, expected=3) is False  # a deleted record stays so
    assert parts.read("session", "s1") is None and parts.get("session", "s1") is None
    assert parts.all("session") == [] and parts.heads("session") == []
    assert parts.put("session", "never", {"id": "never"}, expected=0) is False
    assert parts.get("session", "never") is None


# ---- scenarios added at run time ---------------------------------------------------------------


def test_scenarios_by_scope_and_name(store: Store) -> None:
    parts = store.scenarios
    assert parts.list() == []
    first = StoredScenario(None, "greet", {"name": "greet", "turns": [{"say": "hi"}]})
    scoped = StoredScenario("test-a", "greet", "name: greet\nturns:\n  - say: hello\n")
    other = StoredScenario("test-b", "other", {"turns": []})
    for scenario in (first, scoped, other):
        parts.put(scenario)
    assert parts.list() == [first, scoped, other]
    replaced = StoredScenario("test-a", "greet", {"turns": [{"say": "again"}]})
    parts.put(replaced)
    assert parts.list() == [first, replaced, other], "a replaced scenario keeps its place"
    assert parts.delete("test-a", "greet") is True
    assert parts.delete("test-a", "greet") is False
    assert parts.delete("test-b", "greet") is False
    assert parts.list() == [first, other]


def test_scenarios_clear_one_scope_or_all(store: Store) -> None:
    parts = store.scenarios
    for scope, name in ((None, "a"), ("test-a", "a"), ("test-a", "b"), ("test-b", "a")):
        parts.put(StoredScenario(scope, name, {"turns": []}))
    assert parts.clear("test-a") == 2
    assert [(s.scope, s.name) for s in parts.list()] == [(None, "a"), ("test-b", "a")]
    assert parts.clear("test-none") == 0
    assert parts.clear() == 2
    assert parts.list() == []


def test_scenarios_version_and_changes_read_only_what_was_put_since(store: Store) -> None:
    """A replica reads the version alone, then only the rows put since the one it read (and those
    it asks for by key): never every document again."""
    parts = store.scenarios
    first, second = StoredScenario("test-a", "a", {"turns": []}), StoredScenario(None, "b", "name: b\n")
    before = parts.version()
    parts.put(first)
    parts.put(second)
    assert parts.version() > before
    everything = parts.changes(-1)
    assert everything.version == parts.version()
    assert [row[:2] for row in everything.rows] == [("test-a", "a"), (None, "b")]
    assert everything.read == {("test-a", "a"): first, (None, "b"): second}
    assert parts.changes(everything.version).read == {}, "nothing put since"
    assert parts.changes(everything.version).version == everything.version
    replaced = StoredScenario("test-a", "a", {"turns": [{"message": "again"}]})
    parts.put(replaced)
    since = parts.changes(everything.version)
    assert since.version > everything.version
    assert since.read == {("test-a", "a"): replaced}
    assert [row[:2] for row in since.rows] == [("test-a", "a"), (None, "b")], "a replaced row keeps its place"
    revisions = {row[:2]: row[2] for row in since.rows}
    assert revisions[("test-a", "a")] > revisions[(None, "b")]
    assert parts.changes(since.version, [(None, "b"), (None, "none")]).read == {(None, "b"): second}
    for write in (lambda: parts.delete(None, "b"), lambda: parts.clear("test-a")):
        version = parts.version()
        write()
        assert parts.version() > version
    assert parts.changes(-1).rows == [] and parts.changes(-1).read == {}


def test_scenarios_return_copies(store: Store) -> None:
    document: dict[str, object] = {"turns": []}
    store.scenarios.put(StoredScenario(None, "a", document))
    document["turns"] = ["edited"]
    listed = store.scenarios.list()[0].document
    assert listed == {"turns": []}
    assert isinstance(listed, dict)
    listed["turns"] = ["edited"]
    assert store.scenarios.list()[0].document == {"turns": []}


# ---- leases ------------------------------------------------------------------------------------


def test_leases_have_one_owner_until_released_or_expired(store: Store) -> None:
    leases = store.leases
    assert leases.holder("session:s1") is None
    assert leases.claim("session:s1", "replica-a", 60) is True
    assert leases.claim("session:s1", "replica-b", 60) is False, "held by another"
    assert leases.claim("session:s1", "replica-a", 60) is True, "a renewal"
    assert leases.holder("session:s1") == "replica-a"
    assert leases.claim("session:s2", "replica-b", 60) is True, "keys are apart"
    leases.release("session:s1", "replica-b")  # not its lease: nothing happens
    assert leases.holder("session:s1") == "replica-a"
    leases.release("session:s1", "replica-a")
    assert leases.holder("session:s1") is None
    assert leases.claim("session:s1", "replica-b", -1) is True, "an expired lease"
    assert leases.holder("session:s1") is None
    assert leases.claim("session:s1", "replica-a", 60) is True, "an expired lease is free"


# ---- journal -----------------------------------------------------------------------------------


def test_counts_count_up_to_their_limit(store: Store) -> None:
    counts = store.counts
    assert [counts.take("k", 2) for _ in range(3)] == [0, 1, None]
    assert counts.take("other", 1) == 0 and counts.take("other", 1) is None
    assert counts.take("k", 3) == 2, "a higher limit counts on"
    assert counts.take("zero", 0) is None


def test_counts_forgotten_by_prefix_and_part_count_afresh(store: Store) -> None:
    counts = store.counts
    for key in ("fault a x 1", "fault a y 2", "fault b x 3", "other a"):
        assert counts.take(key, 1) == 0 and counts.take(key, 1) is None
    assert counts.forget("fault a ") == 2
    assert counts.take("fault a x 1", 1) == 0 and counts.take("fault b x 3", 1) is None
    assert counts.forget("fault ", " x ") == 2, "the keys holding ' x ', whatever their prefix's rest"
    assert counts.take("fault a x 1", 1) == 0 and counts.take("fault a y 2", 1) == 0
    assert counts.forget("fault ") == 2 and counts.forget("fault ") == 0
    assert counts.take("other a", 1) is None, "a key of another prefix stays"


def test_journal_append_list_clear_by_scope(store: Store) -> None:
    log = store.journal
    seqs = [log.next_seq() for _ in range(3)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    log.append("a", "entry-1", 10)
    log.append(None, "entry-2", 20)
    log.append("a", "entry-3", 30)
    assert log.entries() == ["entry-1", "entry-2", "entry-3"] and log.bytes == 60
    assert log.entries("a") == ["entry-1", "entry-3"]
    assert log.entries("b") == []
    assert log.clear("a") == 2
    assert log.entries() == ["entry-2"] and log.bytes == 20
    assert log.clear("a") == 0
    assert log.clear() == 1
    assert log.entries() == [] and log.bytes == 0


def test_journal_keeps_its_bounds_oldest_first(store: Store) -> None:
    log = store.journal
    log.limit, log.max_bytes = 3, 100
    for n in range(5):
        log.append(None, n, 10)
    assert log.entries() == [2, 3, 4], "by count"
    log.append(None, 5, 70)
    assert log.entries() == [3, 4, 5] and log.bytes == 90
    log.append(None, 6, 15)
    assert log.entries() == [4, 5, 6] and log.bytes == 95, "by count"
    log.append(None, 7, 80)
    assert log.entries() == [6, 7] and log.bytes == 95, "by bytes"
    log.append(None, 8, 500)
    assert log.entries() == [8] and log.bytes == 500, "the newest stays, whatever it weighs"


# ---- surviving a restart (SQLite) --------------------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    return open_store("sqlite", tmp_path / "data")


def test_sqlite_keeps_everything_but_the_journal(sqlite_store: Store, reopen: Callable[[Store], Store]) -> None:
    store = sqlite_store
    record = response("resp_1", output=["msg_out"], inputs=["msg_in"])
    store.responses.put(record)
    store.conversations.create(StoredConversation("conv_1", 5, {"k": "v"}), [message("msg_1")])
    store.conversations.append("conv_1", [message("msg_2")])
    store.sessions.put("session", "s2", {"id": "s2"})
    store.sessions.put("session", "s1", {"id": "s1"})
    scenario = StoredScenario("test-a", "greet", "name: greet\n")
    store.scenarios.put(scenario)
    store.journal.append(None, "entry", 10)

    store = reopen(store)
    try:
        assert store.responses.get("resp_1") == record and store.responses.count() == 1
        assert store.responses.item("msg_in") == ("resp_1", message("msg_in"))
        assert store.conversations.get("conv_1") == StoredConversation("conv_1", 5, {"k": "v"})
        assert [i["id"] for i in store.conversations.items("conv_1")] == ["msg_1", "msg_2"]
        assert store.sessions.all("session") == [{"id": "s2"}, {"id": "s1"}]
        assert store.scenarios.list() == [scenario]
        assert store.journal.entries() == [] and store.journal.bytes == 0, "the journal is never on disk"
    finally:
        store.close()


def test_sqlite_marks_unfinished_background_responses_failed(
    sqlite_store: Store, reopen: Callable[[Store], Store]
) -> None:
    store = sqlite_store
    for response_id, status in (("resp_q", "queued"), ("resp_p", "in_progress"), ("resp_c", "completed")):
        record = response(response_id)
        store.responses.put(StoredResponse(response_id, {**record.response, "status": status}, [], None))
    store = reopen(store)
    try:
        statuses = {}
        for rid in ("resp_q", "resp_p", "resp_c"):
            found = store.responses.get(rid)
            assert found is not None
            statuses[rid] = found.response
    finally:
        store.close()
    assert statuses["resp_c"]["status"] == "completed" and "error" not in statuses["resp_c"]
    for rid in ("resp_q", "resp_p"):
        assert statuses[rid]["status"] == "failed"
        assert statuses[rid]["error"]["code"] == "server_error"


def test_a_sqlite_store_held_open_refuses_a_second_one_and_leaves_its_rows_alone(
    sqlite_store: Store, tmp_path: Path
) -> None:
    """Before, a second store on the file opened and failed the first one's running background
    responses as a dead process's. The lock is the OS's: one open descriptor per holder, so two
    stores in one process conflict as two processes do."""
    running = response("resp_run")
    sqlite_store.responses.put(StoredResponse("resp_run", {**running.response, "status": "in_progress"}, [], None))
    with pytest.raises(DataDirHeld, match=r"the data dir .*data is held by another ptc-emulator server \(process "):
        open_store("sqlite", tmp_path / "data")
    found = sqlite_store.responses.get("resp_run")
    assert found is not None and found.response["status"] == "in_progress"
    sqlite_store.close()
    again = open_store("sqlite", tmp_path / "data")  # closed: the lock went with it
    again.close()


def test_sqlite_writes_nothing_of_the_journal(sqlite_store: Store, tmp_path: Path) -> None:
    sqlite_store.journal.append(None, "JOURNAL-MARKER", 10)
    sqlite_store.responses.put(response("resp_1"))
    sqlite_store.close()
    for path in (tmp_path / "data").iterdir():
        assert b"JOURNAL-MARKER" not in path.read_bytes(), path.name
    with sqlite3.connect(tmp_path / "data" / FILENAME) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert {"responses", "items", "conversations", "conversation_items", "records", "scenarios"} <= tables
