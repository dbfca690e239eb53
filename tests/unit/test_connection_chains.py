"""A WebSocket's own store remembers the conversations read back from its records
(`ConnectionStore.chain`): a step reads only the records after the one it continues, gets the
very item objects it got before, and a replaced or deleted record is never read from memory."""

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
    first = history.load("resp_4", local)
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
    history.load("resp_4", local)
    assert local.chain("resp_4") is not None
    assert local.delete("resp_2")
    assert local.chain("resp_4") is None
    with pytest.raises(PreviousResponseNotFound):
        history.load("resp_4", local)


def test_a_replaced_finished_record_forgets_what_was_read_from_it() -> None:
    history, local = _chain(3)
    history.load("resp_3", local)
    local.put(_record(2))  # the same id again: whatever was read from the old one is stale
    assert local.chain("resp_3") is None


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
