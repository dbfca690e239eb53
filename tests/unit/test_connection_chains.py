"""The cursors of the conversations read back from a WebSocket's own store (`History.chains`): a
step reads only the records after the one a cursor was kept for, gets the very item objects it got
before, and a replaced or deleted record is never read from memory. The server's store's cursors
are bounded by bytes, and a continuation still reads every record of its chain."""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.emulator.errors import PreviousResponseNotFound
from ptc_emulator.emulator.history.stored import History
from ptc_emulator.emulator.storage import ConnectionStore, StoredResponse


def _record(n: int, status: str = "completed") -> StoredResponse:
    message: dict[str, Any] = {"role": "user", "content": f"step {n}"}
    reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"r{n}"}]}
    body = {"id": f"resp_{n}", "status": status, "output": [reply]}
    return StoredResponse(f"resp_{n}", body, [message], f"resp_{n - 1}" if n > 1 else None)


def _chain(steps: int) -> tuple[History, ConnectionStore]:
    local = ConnectionStore()
    for n in range(1, steps + 1):
        local.put(_record(n))
    return History(ConnectionStore()), local


def test_a_step_reads_only_the_records_after_the_one_it_continues(monkeypatch: pytest.MonkeyPatch) -> None:
    history, local = _chain(5)
    first, _ = history.continuing("resp_4", local)
    assert [getattr(i, "content", None) for i in first[::2]] == ["step 1", "step 2", "step 3", "step 4"]
    read: list[str] = []
    get = local.get

    def counted(response_id: str) -> StoredResponse | None:
        read.append(response_id)
        return get(response_id)

    monkeypatch.setattr(local, "get", counted)
    local.put(_record(6))
    after = history.load("resp_6", local)
    assert set(read) == {"resp_6", "resp_5"}  # resp_4's conversation came from memory
    assert all(a is b for a, b in zip(first, after, strict=False))  # the very objects again
    assert len(after) == 12


def test_a_deleted_record_is_not_read_from_memory() -> None:
    history, local = _chain(4)
    _, cursor = history.continuing("resp_4", local)
    assert cursor.cursor is not None and history.chains.find("resp_4", local) is cursor.cursor
    assert local.delete("resp_2")
    assert history.chains.find("resp_4", local) is None
    with pytest.raises(PreviousResponseNotFound):
        history.load("resp_4", local)


def test_a_replaced_finished_record_forgets_what_was_read_from_it() -> None:
    history, local = _chain(3)
    history.continuing("resp_3", local)
    local.put(_record(2))  # the same id again: whatever was read from the old one is stale
    assert history.chains.find("resp_3", local) is None


def test_a_stored_chain_is_read_on_from_its_cursor_and_still_checked_whole() -> None:
    store = ConnectionStore()  # as the server's store: not a connection's own
    for n in range(1, 6):
        store.put(_record(n))
    history = History(store)
    first, extension = history.continuing("resp_4")
    assert extension.base is None and extension.cursor is not None
    again, extension = history.continuing("resp_5")
    assert extension.base is not None and extension.base.items == tuple(first)
    assert all(a is b for a, b in zip(first, again, strict=False))  # the very objects again
    assert store.delete("resp_1")  # a record the cursor covers: the chain is read whole
    with pytest.raises(PreviousResponseNotFound):
        history.continuing("resp_5")


def test_the_stored_chains_cursors_are_bounded_by_bytes_and_each_socket_by_count() -> None:
    history, local = _chain(8)
    for n in range(2, 9):
        history.continuing(f"resp_{n}", local)
    assert len(history.chains) == history.chains.per_socket == 4
    server = ConnectionStore()
    for n in range(1, 9):
        server.put(_record(n))
    stored = History(server)
    _, extension = stored.continuing("resp_2")
    assert extension.cursor is not None
    stored.chains.max_bytes = 3 * extension.cursor.size
    for n in range(3, 9):
        stored.continuing(f"resp_{n}")
        assert stored.chains.bytes <= stored.chains.max_bytes
    assert 0 < len(stored.chains._server) < 7
    stored.chains.clear()
    assert len(stored.chains) == 0 and stored.chains.bytes == 0


def test_a_paused_program_keeps_one_continuation_in_the_sockets_store() -> None:
    local = ConnectionStore()
    local.put(_record(1))
    assert local.put_continuation(_record(2, status="in_progress"), "d2") is None
    assert local.put_continuation(StoredResponse("resp_x", {"status": "completed"}, [], "resp_1"), "dx") == "resp_2"
    assert local.get("resp_x") is None and local.continuation("resp_1") == ("resp_2", "d2")
    assert local.put_continuation(_record(2), "d2") is None, "the same one finishing: replaced"
    local.put(_record(2, status="cancelled"))
    assert local.continuation("resp_1") is None, "a cancelled continuation frees the pause"
    assert local.put_continuation(StoredResponse("resp_y", {"status": "completed"}, [], "resp_1"), "dy") is None
    assert local.delete("resp_y")
    assert local.continuation("resp_1") is None, "so does a deleted one"
