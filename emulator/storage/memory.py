"""The Store in the process's memory (`--store memory`): gone with the process.

Each part keeps JSON text (or frozen records of it), as the SQLite store does, so what a caller
gets back is a copy: editing it changes nothing stored.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
    Counts,
    EventLog,
    JournalLog,
    Leases,
    Records,
    Responses,
    ScenarioChanges,
    ScenarioKey,
    Scenarios,
    StoredConversation,
    StoredResponse,
    StoredScenario,
    Turn,
    TurnRefused,
    head_columns,
    visible,
)

__all__ = [
    "MemoryConversations",
    "MemoryCounts",
    "MemoryJournal",
    "MemoryLeases",
    "MemoryRecords",
    "MemoryResponses",
    "MemoryScenarios",
    "MemoryStore",
    "FREEING",
    "UNFINISHED",
    "item_ids",
    "open_at",
]

UNFINISHED = ("queued", "in_progress")
"""The statuses of a background response still in flight."""
FREEING = ("failed", "cancelled")
"""The statuses of a continuation that leaves its paused program free to be continued again."""

_dumps = json.dumps
_loads = json.loads


def item_ids(record: StoredResponse) -> Iterator[tuple[str, dict[str, Any]]]:
    """A response's items that have an id: its request's input, then its output."""
    for item in [*record.input_items, *record.response.get("output", [])]:
        if isinstance(item.get("id"), str):
            yield item["id"], item


_Texts = tuple[str, str, list[tuple[str, str]]]
"""A record's body, input items and items with ids, as JSON text."""


def _texts(record: StoredResponse) -> _Texts:
    """A record's texts, made before the lock is taken: a long record's take their time, and
    another request's write waits for none of it (issue 38). A long record's text is made a piece
    at a time (`jsonpieces`), so a worker thread storing it lets the other threads run meanwhile;
    so is it read back."""
    items = [(item_id, _dumps(item)) for item_id, item in item_ids(record)]
    return jsonpieces.dumps(record.response), jsonpieces.dumps(record.input_items), items


class MemoryResponses:
    def __init__(self, conversations: MemoryConversations | None = None) -> None:
        self._conversations = conversations if conversations is not None else MemoryConversations()
        """The conversations beside it, which `put_with_turn` appends to."""
        self._responses: dict[str, tuple[str, str, str | None, list[str], str | None, Any]] = {}
        """Per response: its body and input items as JSON text, its previous id, its item ids, its
        scope, its status."""
        self._items: dict[str, tuple[str, str, str | None]] = {}
        self._continuations: dict[str, tuple[str, str]] = {}
        """By paused response id: the id of the response that resumed its program, and its digest."""
        self._resumed: dict[str, str] = {}
        """By continuation id: the paused response it resumed."""
        self._lock = threading.Lock()

    def put(self, record: StoredResponse) -> None:
        texts = _texts(record)
        with self._lock:
            self._put(record, texts)

    def put_continuation(self, record: StoredResponse, digest: str) -> str | None:
        texts = _texts(record)
        with self._lock:
            return self._put_continuation(record, digest, texts)

    def _put_continuation(self, record: StoredResponse, digest: str | None, texts: _Texts) -> str | None:
        """Under the lock: `put` (with `digest`, as the pause's one continuation)."""
        paused = record.previous_response_id
        if digest is not None and paused is not None and record.id not in self._responses:
            kept = self._taken(paused)
            if kept is not None:
                return kept[0]
            self._continuations[paused] = (record.id, digest)
            self._resumed[record.id] = paused
        self._put(record, texts)
        return None

    def put_with_turn(self, record: StoredResponse, turn: Turn, digest: str | None = None) -> str | None:
        texts = _texts(record)

        def keep() -> str | None:
            with self._lock:
                return self._put_continuation(record, digest, texts)

        return self._conversations.with_turn(turn, keep)

    def continuation(self, response_id: str) -> tuple[str, str] | None:
        with self._lock:
            return self._taken(response_id)

    def replace_unfinished(self, record: StoredResponse) -> bool:
        texts = _texts(record)
        with self._lock:
            kept = self._responses.get(record.id)
            if kept is None or kept[5] not in UNFINISHED:
                return False
            self._put(record, texts)
            return True

    def _taken(self, paused: str) -> tuple[str, str] | None:
        """The continuation that holds the pause (under the lock): none once it failed, was
        cancelled or is gone."""
        kept = self._continuations.get(paused)
        if kept is None:
            return None
        record = self._responses.get(kept[0])
        if record is None or record[5] in FREEING:
            return None
        return kept

    def _put(self, record: StoredResponse, texts: _Texts) -> None:
        """Under the lock; `texts` made before it."""
        body, inputs, items = texts
        ids = [i for i, _ in items]
        status = record.response.get("status")
        kept = (body, inputs, record.previous_response_id, ids, record.scope)
        self._drop_items(record.id)  # a replaced response's items go with it, as in SQLite
        self._responses[record.id] = (*kept, status)
        for item_id, text in items:
            self._items[item_id] = (record.id, text, record.scope)

    def get(self, response_id: str) -> StoredResponse | None:
        kept = self._responses.get(response_id)
        if kept is None:
            return None
        return StoredResponse(response_id, jsonpieces.loads(kept[0]), jsonpieces.loads(kept[1]), kept[2], kept[4])

    def delete(self, response_id: str) -> bool:
        with self._lock:
            if not self._drop_items(response_id):
                return False
            del self._responses[response_id]
            paused = self._resumed.pop(response_id, None)
            if paused is not None and self._continuations.get(paused, ("",))[0] == response_id:
                del self._continuations[paused]  # the pause is free again
            return True

    def _drop_items(self, response_id: str) -> bool:
        """Unindex the items of the response with this id (under the lock); False if none."""
        kept = self._responses.get(response_id)
        if kept is None:
            return False
        for item_id in kept[3]:
            if self._items.get(item_id, ("",))[0] == response_id:
                del self._items[item_id]
        return True

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        found = self._items.get(item_id)
        return (found[0], _loads(found[1])) if found is not None else None

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        found = self._items.get(item_id)
        return (found[0], _loads(found[1])) if found is not None and found[2] == scope else None

    def count(self) -> int:
        return len(self._responses)


class MemoryConversations:
    def __init__(self) -> None:
        self._conversations: dict[str, StoredConversation] = {}
        self._items: dict[str, list[tuple[str, str]]] = {}
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        kept = StoredConversation(record.id, record.created_at, _loads(_dumps(record.metadata)), record.scope)
        texts = [(item["id"], _dumps(item)) for item in items]
        with self._lock:
            self._conversations[record.id] = kept
            self._items[record.id] = texts
            self._versions[record.id] = 0

    def get(self, conversation_id: str) -> StoredConversation | None:
        kept = self._conversations.get(conversation_id)
        return None if kept is None else StoredConversation(kept.id, kept.created_at, dict(kept.metadata), kept.scope)

    def update(self, record: StoredConversation) -> bool:
        with self._lock:
            kept = self._conversations.get(record.id)
            if kept is None:
                return False
            self._conversations[record.id] = StoredConversation(
                kept.id, kept.created_at, dict(record.metadata), kept.scope
            )
            return True

    def delete(self, conversation_id: str) -> bool:
        with self._lock:
            self._items.pop(conversation_id, None)
            self._versions.pop(conversation_id, None)
            return self._conversations.pop(conversation_id, None) is not None

    def append(self, conversation_id: str, items: list[dict[str, Any]], *, expected: int | None = None) -> bool:
        texts = [(item["id"], _dumps(item)) for item in items]
        with self._lock:
            if conversation_id not in self._items:
                return False
            if expected is not None and self._versions[conversation_id] != expected:
                return False
            self._items[conversation_id].extend(texts)
            self._versions[conversation_id] += 1
            return True

    def with_turn(self, turn: Turn, keep: Callable[[], str | None]) -> str | None:
        """`keep()` (a response's write: a continuation's id when it refuses, having written
        nothing) and `turn` appended, under this part's lock, so both are written or neither is
        (`Responses.put_with_turn`): the turn is checked first, and appended once `keep` wrote."""
        texts = [(item["id"], _dumps(item)) for item in turn.items]
        conversation_id = turn.conversation_id
        with self._lock:
            found = conversation_id in self._items
            if found and turn.expected is not None and self._versions[conversation_id] != turn.expected:
                raise TurnRefused(conversation_id)
            taken = keep()
            if taken is None and found:  # (a conversation that is gone keeps nothing)
                self._items[conversation_id].extend(texts)
                self._versions[conversation_id] += 1
            return taken

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        with self._lock:
            texts = [text for _, text in self._items.get(conversation_id, ())]
        return jsonpieces.loads_each(texts)

    def item_page(self, conversation_id: str, pick: Callable[[list[str]], list[int]]) -> list[dict[str, Any]]:
        with self._lock:
            kept = list(self._items.get(conversation_id, ()))
        return [_loads(kept[n][1]) for n in pick([item_id for item_id, _ in kept])]

    def read(self, conversation_id: str, *, last: int | None = None) -> tuple[int, list[dict[str, Any]]] | None:
        with self._lock:
            if conversation_id not in self._items:
                return None
            kept = self._items[conversation_id]
            newest = kept if last is None else kept[max(len(kept) - last, 0) :]
            version, texts = self._versions[conversation_id], [text for _, text in newest]
        return version, jsonpieces.loads_each(texts)

    def holds_over(self, conversation_id: str, count: int) -> bool:
        with self._lock:
            return len(self._items.get(conversation_id, ())) > count

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        with self._lock:
            items = self._items.get(conversation_id, [])
            index = next((i for i, (kept_id, _) in enumerate(items) if kept_id == item_id), None)
            if index is None:
                return False
            del items[index]
            self._versions[conversation_id] += 1
            return True


class _Record:
    """A record as `MemoryRecords` keeps it: its document and head as JSON text, what it keeps of
    the head apart (`head_columns`, and its metadata's pairs), to choose it by, and its version."""

    __slots__ = ("agent_id", "document", "head", "pairs", "running", "scope", "version")

    def __init__(self, document: str, head: dict[str, Any] | None) -> None:
        self.document, self.head = document, _dumps(head) if head is not None else None
        self.version = 0
        """Grown by every put of the document (`MemoryRecords.put`), kept by `put_head`."""
        self.scope, self.agent_id, self.running = head_columns(head)
        metadata = head.get("metadata") if head is not None else None
        pairs = metadata.items() if isinstance(metadata, dict) else ()
        self.pairs = frozenset((k, v) for k, v in pairs if isinstance(v, str))


class MemoryRecords:
    def __init__(self) -> None:
        self._kinds: dict[str, dict[str, _Record]] = {}
        self._lock = threading.Lock()

    def put(
        self,
        kind: str,
        record_id: str,
        document: dict[str, Any],
        head: dict[str, Any] | None = None,
        *,
        expected: int | None = None,
    ) -> bool:
        made = _Record(_dumps(document), head)
        with self._lock:
            records = self._kinds.setdefault(kind, {})
            kept = records.get(record_id)
            version = kept.version if kept is not None else 0
            if expected is not None and (kept is None or version != expected):
                return False
            made.version = version + 1
            records[record_id] = made  # (a replaced one keeps its place)
            return True

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        kept = self._kinds.get(kind, {}).get(record_id)
        return _loads(kept.document) if kept is not None else None

    def read(self, kind: str, record_id: str) -> tuple[int, dict[str, Any]] | None:
        kept = self._kinds.get(kind, {}).get(record_id)
        return (kept.version, _loads(kept.document)) if kept is not None else None

    def delete(self, kind: str, record_id: str) -> bool:
        with self._lock:
            return self._kinds.get(kind, {}).pop(record_id, None) is not None

    def all(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            texts = [kept.document for kept in self._kinds.get(kind, {}).values()]
        return [_loads(t) for t in texts]

    def heads(self, kind: str) -> list[tuple[str, dict[str, Any] | None]]:
        with self._lock:
            kept = [(record_id, record.head) for record_id, record in self._kinds.get(kind, {}).items()]
        return [(record_id, _loads(head) if head is not None else None) for record_id, head in kept]

    def put_head(self, kind: str, record_id: str, head: dict[str, Any]) -> bool:
        with self._lock:
            records = self._kinds.get(kind, {})
            kept = records.get(record_id)
            if kept is None or kept.head is not None:
                return False
            made = _Record(kept.document, head)
            made.version = kept.version
            records[record_id] = made
            return True

    def unheaded(self, kind: str) -> list[str]:
        with self._lock:
            return [record_id for record_id, kept in self._kinds.get(kind, {}).items() if kept.head is None]

    def running(self, kind: str) -> list[str]:
        with self._lock:
            return [record_id for record_id, kept in self._kinds.get(kind, {}).items() if kept.running]

    def page(
        self,
        kind: str,
        *,
        scope: str | None,
        agent_id: str | None = None,
        metadata: dict[str, str] | None = None,
        after: str | None = None,
        limit: int,
        order: str = "desc",
    ) -> tuple[list[str], bool] | None:
        with self._lock:
            rows = list(self._kinds.get(kind, {}).items())  # the records themselves are never changed
        if order != "asc":
            rows.reverse()

        def chosen(kept: _Record) -> bool:
            if not visible(kept.scope, scope) or (agent_id is not None and kept.agent_id != agent_id):
                return False
            return not metadata or all(pair in kept.pairs for pair in metadata.items())

        found: list[str] = []
        started = after is None
        for record_id, kept in rows:
            if not started:
                if record_id == after:
                    if not chosen(kept):
                        return None
                    started = True
                continue
            if chosen(kept):
                found.append(record_id)
                if len(found) > limit:
                    return found[:limit], True
        return (found, False) if started else None


class MemoryScenarios:
    def __init__(self) -> None:
        self._scenarios: dict[ScenarioKey, tuple[int, str]] = {}
        """Each scenario's revision (the version its put made) and its document as JSON."""
        self._version = 0
        self._lock = threading.Lock()

    def put(self, scenario: StoredScenario) -> None:
        text = _dumps(scenario.document)
        with self._lock:
            self._version += 1
            self._scenarios[(scenario.scope, scenario.name)] = (self._version, text)

    def delete(self, scope: str | None, name: str) -> bool:
        with self._lock:
            self._version += 1
            return self._scenarios.pop((scope, name), None) is not None

    def list(self) -> list[StoredScenario]:
        with self._lock:
            kept = list(self._scenarios.items())
        return [StoredScenario(scope, name, _loads(text)) for (scope, name), (_, text) in kept]

    def clear(self, scope: str | None = None) -> int:
        with self._lock:
            self._version += 1
            doomed = [key for key in self._scenarios if scope is None or key[0] == scope]
            for key in doomed:
                del self._scenarios[key]
            return len(doomed)

    def version(self) -> int:
        with self._lock:
            return self._version

    def changes(self, since: int, keys: Collection[ScenarioKey] = ()) -> ScenarioChanges:
        wanted = set(keys)
        with self._lock:
            version, kept = self._version, list(self._scenarios.items())
        rows = [(scope, name, revision) for (scope, name), (revision, _) in kept]
        read = {
            key: StoredScenario(key[0], key[1], _loads(text))
            for key, (revision, text) in kept
            if revision > since or key in wanted
        }
        return ScenarioChanges(version, rows, read)


class MemoryJournal:
    """Bounded by entries and by bytes: the oldest entries leave first."""

    def __init__(self, limit: int = 10_000, max_bytes: int = 64 * 2**20) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self._bytes = 0
        self._entries: deque[tuple[str | None, Any, int]] = deque()
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return self._bytes

    def next_seq(self) -> int:
        return next(self._seq)

    def append(self, scope: str | None, entry: Any, size: int) -> None:
        with self._lock:
            self._entries.append((scope, entry, size))
            self._bytes += size
            while len(self._entries) > 1 and (len(self._entries) > self.limit or self._bytes > self.max_bytes):
                self._bytes -= self._entries.popleft()[2]

    def entries(self, scope: str | None = None) -> list[Any]:
        with self._lock:
            return [e for s, e, _ in self._entries if scope is None or s == scope]

    def clear(self, scope: str | None = None) -> int:
        with self._lock:
            before = len(self._entries)
            if scope is None:
                self._entries.clear()
            else:
                self._entries = deque(kept for kept in self._entries if kept[0] != scope)
            self._bytes = sum(kept[2] for kept in self._entries)
            return before - len(self._entries)


class MemoryLeases:
    """Leases in one process: by the monotonic clock."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def claim(self, key: str, owner: str, seconds: float) -> bool:
        now = time.monotonic()
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[0] != owner and held[1] > now:
                return False
            self._held[key] = (owner, now + seconds)
            return True

    def release(self, key: str, owner: str) -> None:
        with self._lock:
            if self._held.get(key, ("",))[0] == owner:
                del self._held[key]

    def holder(self, key: str) -> str | None:
        with self._lock:
            held = self._held.get(key)
        return held[0] if held is not None and held[1] > time.monotonic() else None


class MemoryCounts:
    """Counts in one process, bounded: the least recently counted keys are forgotten first."""

    def __init__(self, remember: int = 10_000) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._remember = remember
        self._lock = threading.Lock()

    def take(self, key: str, limit: int) -> int | None:
        with self._lock:
            seen = self._counts.get(key, 0)
            if seen >= limit:
                return None
            self._counts[key] = seen + 1
            self._counts.move_to_end(key)
            while len(self._counts) > self._remember:
                self._counts.popitem(last=False)
            return seen

    def forget(self, prefix: str, containing: str = "") -> int:
        with self._lock:
            gone = [key for key in self._counts if key.startswith(prefix) and containing in key]
            for key in gone:
                del self._counts[key]
            return len(gone)


class MemoryStore:
    """Every part in memory."""

    kind: str = "memory"

    def __init__(self) -> None:
        conversations = MemoryConversations()
        self.responses: Responses = MemoryResponses(conversations)
        self.conversations: Conversations = conversations
        self.sessions: Records = MemoryRecords()
        self.scenarios: Scenarios = MemoryScenarios()
        self.journal: JournalLog = MemoryJournal()
        self.leases: Leases = MemoryLeases()
        self.counts: Counts = MemoryCounts()
        self.events: EventLog | None = None  # one process: its harness fans events out itself
        self.shared = False

    def close(self) -> None:
        pass


def open_at(where: str, data_dir: Path | None) -> MemoryStore:
    """`--store memory`: nothing is written anywhere."""
    return MemoryStore()
