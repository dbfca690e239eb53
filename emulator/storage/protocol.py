"""The Store seam: every piece of state a second server process would need to share.

One `Store` has five parts, each a protocol: `responses` (stored responses and their items),
`conversations` (the Conversations API), `sessions` (Agents API documents), `scenarios` (the
scenario documents added at run time, per scope) and `journal` (the request journal, bounded).
`memory.py` and `sqlite.py` implement them; a database shared by several processes would too.

Every call takes and returns data (JSON values, frozen records): nothing a caller gets back is
the store's own object, so editing it changes nothing stored, and no call relies on in-process
state another process could not see. The journal is the exception by design: it keeps request
bodies, so it lives in the process's memory only, whatever the store (see `JournalLog`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Conversations",
    "Counts",
    "EventLog",
    "JournalLog",
    "Leases",
    "Records",
    "Responses",
    "ScenarioChanges",
    "ScenarioKey",
    "Scenarios",
    "Store",
    "StoredConversation",
    "StoredResponse",
    "StoredScenario",
    "StoreBusy",
    "StoreUnavailable",
    "Turn",
    "TurnRefused",
    "head_columns",
    "visible",
]


def visible(made_in: str | None, scope: str | None) -> bool:
    """Whether what was made in scope `made_in` (a response, a conversation, an Agents API session)
    is seen by a request in `scope`: one made in a scope is seen in that scope only, one made in
    none in every scope. What is not seen is as what does not exist (a 404)."""
    return made_in is None or made_in == scope


def head_columns(head: dict[str, Any] | None) -> tuple[str | None, str | None, bool]:
    """What `Records` keeps of a head apart from it: its `scope`, its `agent_id` and whether it
    is `running` (a record put without a head: none of them, not running)."""
    if head is None:
        return None, None, False
    scope, agent_id = head.get("scope"), head.get("agent_id")
    return (
        scope if isinstance(scope, str) else None,
        agent_id if isinstance(agent_id, str) else None,
        head.get("running") is True,
    )


class StoreUnavailable(RuntimeError):
    """The store could not be opened: its database does not answer, or cannot be used."""


class StoreUnreached(StoreUnavailable):
    """The database does not answer and no connection to it was had: nothing was sent, so the
    work may be tried again as it was."""


class StoreBusy(StoreUnavailable):
    """The database answers, but none of the connections a statement may take came free in time
    (they all wait on statements, a lock held on a table, say): a 503 that says so, not that the
    database does not answer."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    previous_response_id: str | None
    scope: str | None = None
    """The caller's scope it was made in (`x-ptc-emulator-scope`): its items are referenced
    (`item_reference`) from that scope only."""


@dataclass(frozen=True, slots=True)
class Turn:
    """A finished response's turn in its conversation: the items appended to it with the response
    (`Responses.put_with_turn`), as `Conversations.append` appends them."""

    conversation_id: str
    items: list[dict[str, Any]]
    expected: int | None = None
    """The version its history was read at: appended only if the items are still at it."""


class TurnRefused(Exception):
    """Another writer changed the conversation's items since `Turn.expected`: nothing was written."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id} changed since it was read")
        self.conversation_id = conversation_id


@dataclass(frozen=True, slots=True)
class StoredConversation:
    id: str
    created_at: int
    metadata: dict[str, str]
    scope: str | None = None
    """The caller's scope it was made in: seen in that scope only (`visible`)."""

    def body(self) -> dict[str, Any]:
        return {"id": self.id, "object": "conversation", "created_at": self.created_at, "metadata": self.metadata}


@dataclass(frozen=True, slots=True)
class StoredScenario:
    scope: str | None
    name: str
    document: dict[str, Any] | str
    """What the admin API was sent: a scenario as JSON, or the text of a scenario file."""


ScenarioKey = tuple[str | None, str]
"""A scenario's (scope, name)."""


@dataclass(frozen=True, slots=True)
class ScenarioChanges:
    """What `Scenarios.changes` read, from one snapshot."""

    version: int
    """The scenarios' version then (`Scenarios.version`)."""
    rows: list[tuple[str | None, str, int]]
    """Every scenario's scope, name and revision (the version its last put made), in `list`'s order."""
    read: dict[ScenarioKey, StoredScenario]
    """The scenarios asked for (`since`, `keys`), read whole."""


class Responses(Protocol):
    """`store: true` responses, and their items indexed by id; every write is atomic."""

    def put(self, record: StoredResponse) -> None:
        """Add or replace the response with this id (and index its items)."""
        ...

    def put_continuation(self, record: StoredResponse, digest: str) -> str | None:
        """`put` the response that resumes the program paused in `record.previous_response_id`, as
        that pause's one continuation, decided by the store in one atomic step (a constraint: one
        continuation per paused response, whichever process writes it). None when it was put;
        when another response is that continuation already, nothing is written and its id is
        returned. A continuation that failed or was cancelled leaves the pause free again, and one
        deleted with it. `digest` names the request that made it (`continuation` tells it back).
        A response already stored under this id is replaced without the check (a background
        response finishing: it was checked when it was queued)."""
        ...

    def put_with_turn(self, record: StoredResponse, turn: Turn, digest: str | None = None) -> str | None:
        """`put` the response (with `digest`: `put_continuation`) and append `turn` to its
        conversation (`Conversations.append`, the conversations beside it), in one atomic step:
        both are written or neither is. None when they were (the response alone when the
        conversation is gone: a deleted conversation keeps nothing); the id of the continuation
        that holds the pause, and nothing written, as `put_continuation`; `TurnRefused`, and
        nothing written, when the conversation's items moved past `turn.expected`."""
        ...

    def continuation(self, response_id: str) -> tuple[str, str] | None:
        """The id and the request digest of the one response that resumed the program paused in
        this response (`put_continuation`), unless it failed or was cancelled; None if none did."""
        ...

    def replace_unfinished(self, record: StoredResponse) -> bool:
        """Replace the stored response with this id by `record` only while the stored one is still
        unfinished (queued or in progress), checked and written in one atomic step: a background
        response finishing, failing or cancelled, whichever is written first is what every
        process sees. False, and nothing written, if it finished already or is gone."""
        ...

    def get(self, response_id: str) -> StoredResponse | None: ...

    def delete(self, response_id: str) -> bool:
        """False if there was none; its items go with it."""
        ...

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        """The stored item with this id, and the id of the response that holds it."""
        ...

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        """As `item`, but only if the response that holds it was made in `scope` (None: made in
        none): an item of another scope is as one that does not exist."""
        ...

    def count(self) -> int: ...


class Conversations(Protocol):
    """Conversations and their items in order; every write is atomic."""

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None: ...

    def get(self, conversation_id: str) -> StoredConversation | None: ...

    def update(self, record: StoredConversation) -> bool:
        """Replace its metadata (its creation time stays); False if it is gone."""
        ...

    def delete(self, conversation_id: str) -> bool: ...

    def append(self, conversation_id: str, items: list[dict[str, Any]], *, expected: int | None = None) -> bool:
        """Add items at the end; False if the conversation is gone. With `expected`, only if its
        items are still at that version (see `read`), checked and added in one atomic step;
        False, and nothing added, if they are not: another writer changed them in between."""
        ...

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        """Its items, oldest first; none for a conversation that is gone."""
        ...

    def item_page(self, conversation_id: str, pick: Callable[[list[str]], list[int]]) -> list[dict[str, Any]]:
        """The items at the places `pick` chooses from their ids (oldest first), in its order: only
        those are decoded (a page of 100 of 150,000 items decoded them all, most of a second)."""
        ...

    def read(self, conversation_id: str, *, last: int | None = None) -> tuple[int, list[dict[str, Any]]] | None:
        """Its items' version and its items, read together; None if it is gone. The version is 0
        when it is created and grows with every change of its items (an append, a deletion).
        With `last`, only its newest `last` items (oldest first) are read and decoded."""
        ...

    def holds_over(self, conversation_id: str, count: int) -> bool:
        """Whether it holds more than `count` items, found without reading or decoding any (at most
        `count` + 1 of its rows are counted); False for a conversation that is gone."""
        ...

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        """Remove the first item with this id; False if there is none."""
        ...


class Records(Protocol):
    """JSON documents under a kind and an id (agents, agent sessions)."""

    def put(
        self,
        kind: str,
        record_id: str,
        document: dict[str, Any],
        head: dict[str, Any] | None = None,
        *,
        expected: int | None = None,
    ) -> bool:
        """Add or replace; a replaced document keeps its place in `all`. `head` is a small summary
        of the document the caller makes (what a list filters on), kept beside it and written
        with it in one step: `heads` reads those alone, never the documents. Its `scope`,
        `agent_id` (strings or None) and `running` (true or not) are kept apart as well, for
        `running` and `page` to choose records by without reading a head.
        Every put grows the record's version (`read`). With `expected`, only a record still at that
        version is replaced, checked and written in one atomic step: False, and nothing written,
        when another put moved it on or it is gone (a deleted record is never put back). True
        otherwise."""
        ...

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None: ...

    def read(self, kind: str, record_id: str) -> tuple[int, dict[str, Any]] | None:
        """The record's version and its document, read together; None if it is gone. The version
        is 1 once it is first put and grows by one with every put (not with `put_head`); a record
        an earlier version stored is at 0."""
        ...

    def delete(self, kind: str, record_id: str) -> bool: ...

    def all(self, kind: str) -> list[dict[str, Any]]:
        """Every document of a kind, in the order each was first put."""
        ...

    def heads(self, kind: str) -> list[tuple[str, dict[str, Any] | None]]:
        """The id and the head of every record of a kind, in `all`'s order, without reading a
        document: a session's status is found without its transcript (every replica looked for
        running turns every half lease by parsing every session, 8 MiB each at most). The head
        is None for a record put without one (by an earlier version: see `put_head`)."""
        ...

    def put_head(self, kind: str, record_id: str, head: dict[str, Any]) -> bool:
        """Give a record put without a head (by an earlier version) the one made from its
        document, only while it still has none, in one step: a `put` since then wrote its own.
        False if it has one, or is gone."""
        ...

    def unheaded(self, kind: str) -> list[str]:
        """The ids of the records of a kind put without a head (by an earlier version), in
        `all`'s order: those `put_head` has yet to give one."""
        ...

    def running(self, kind: str) -> list[str]:
        """The ids of the records of a kind whose head says `running` (true), in `all`'s order,
        read without a head or a document: every replica asks every half lease, and the heads
        of every session (metadata and all, 9 KiB each at most) stalled idle replicas once
        there were tens of thousands."""
        ...

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
        """A page of the ids of the records of a kind, and whether more follow: those whose
        head's scope is seen in `scope` (`visible`), whose `agent_id` is the one given (None:
        any), whose head's `metadata` holds every pair given; in `all`'s order (`asc`) or the
        reverse (`desc`), from the record after `after` (None: from the first), `limit` of them
        at most. Chosen by the store itself: only the heads of candidates are looked at when
        `metadata` is given, none otherwise. None if `after` is not one of the records chosen."""
        ...


class Scenarios(Protocol):
    """The scenario documents added at run time, by (scope, name)."""

    def put(self, scenario: StoredScenario) -> None:
        """Add or replace; a replaced scenario keeps its place in `list`."""
        ...

    def delete(self, scope: str | None, name: str) -> bool: ...

    def list(self) -> list[StoredScenario]:
        """Every scenario of every scope, in the order each was first put."""
        ...

    def clear(self, scope: str | None = None) -> int:
        """Remove the scenarios of `scope`, or all of them with None; how many went."""
        ...

    def version(self) -> int:
        """A number each write (`put`, `delete`, `clear`) makes larger, in the write's own
        transaction: read alone, one small row, it says whether anything changed since a read."""
        ...

    def changes(self, since: int, keys: Collection[ScenarioKey] = ()) -> ScenarioChanges:
        """From one snapshot: the version, every scenario's revision, and read whole the scenarios
        put after version `since` (their revision above it) and those of `keys`. A reader that
        holds what it read at version `since` reads no other document again (`since` -1: all)."""
        ...


class JournalLog(Protocol):
    """The request journal's entries, bounded by count and by bytes: the oldest leave first
    (the newest always stays). Entries are kept in the process's memory only, never on disk:
    they hold request bodies, including `store: false` ones."""

    limit: int
    max_bytes: int

    @property
    def bytes(self) -> int:
        """What the kept entries weigh, as their `size`s add up."""
        ...

    def next_seq(self) -> int:
        """1, 2, 3, ...: the order entries are numbered in."""
        ...

    def append(self, scope: str | None, entry: Any, size: int) -> None: ...

    def entries(self, scope: str | None = None) -> list[Any]:
        """The kept entries of `scope` (all of them with None), oldest first."""
        ...

    def clear(self, scope: str | None = None) -> int:
        """Remove the entries of `scope`, or all; how many went."""
        ...


class Leases(Protocol):
    """Who runs the work that outlives a request (an Agents API session's turn): one owner at a
    time per key, until its lease expires unless renewed. In one process (memory, SQLite) every
    claim of a free key succeeds at once; in a database replicas share, the database decides, on
    its own clock, and a replica that dies stops renewing, so another claims the work after
    `seconds`."""

    def claim(self, key: str, owner: str, seconds: float) -> bool:
        """Take the lease of `key` for `seconds` if it is free, expired, or `owner`'s already (a
        renewal); False if another owner holds it."""
        ...

    def release(self, key: str, owner: str) -> None:
        """Give it up, if `owner` holds it."""
        ...

    def holder(self, key: str) -> str | None:
        """Who holds the lease of `key` now (None: nobody, or it expired)."""
        ...


class Counts(Protocol):
    """How often something happened, up to a limit, counted once for every process sharing the store
    (a scenario's fault answering `times` requests: `times` in all, whichever replica is asked).
    A store may forget keys untouched for long (memory: the least recent beyond many)."""

    def take(self, key: str, limit: int) -> int | None:
        """Count one more of `key` if fewer than `limit` were counted, in one atomic step: how many
        were counted before this one. None, and nothing counted, once `limit` were."""
        ...

    def forget(self, prefix: str, containing: str = "") -> int:
        """Forget every key that starts with `prefix` and holds `containing` (counted afresh from
        then on): how many went."""
        ...


class EventLog(Protocol):
    """Events of streams (an Agents API session's), for the replicas sharing a store: rows numbered
    in one order per stream, and a notification to every replica when new ones are committed."""

    def append(self, stream: str, events: list[Any]) -> None:
        """Add events (JSON values) at the end of `stream`, numbered after its last in one step."""
        ...

    def last(self, stream: str) -> int:
        """The sequence number of the stream's last event (0: none yet)."""
        ...

    def since(self, stream: str, after: int) -> list[tuple[int, Any]]:
        """The stream's events numbered after `after`, with their numbers, in order."""
        ...

    def listen(self, notified: Callable[[str | None], None]) -> None:
        """Call `notified(stream)` (from another thread) whenever a stream got new events or a
        signal, and `notified(None)` after listening was broken and made again (any stream may
        have). Every listener of the process hears every notification."""
        ...

    def put_and_append(
        self,
        kind: str,
        record_id: str,
        document: dict[str, Any],
        stream: str,
        events: list[Any],
        head: dict[str, Any] | None = None,
        *,
        expected: int | None = None,
    ) -> bool:
        """`Records.put` of the document (and its head, at `expected` if given) and `append` of the
        events (none: the put alone), in one transaction: both are written or neither is (a
        session's change and its events). False, and neither written, when the put was refused."""
        ...

    def signal(self, stream: str) -> None:
        """Notify every replica's listeners of `stream`, with no event kept (a cancel: the stored
        state says what happened, the notification only says when to look)."""
        ...


class Store(Protocol):
    """One place for all of it: `open_store` (in `__init__`) makes one."""

    kind: str
    """`memory`, `sqlite` or `postgresql`."""
    responses: Responses
    conversations: Conversations
    sessions: Records
    scenarios: Scenarios
    journal: JournalLog
    leases: Leases
    counts: Counts
    events: EventLog | None
    """Shared stores only: the event log the replicas fan events out through."""
    shared: bool
    """True when other processes share the store (a database replicas use): what this process
    keeps in memory of it may be stale, and its locks are not theirs."""

    def close(self) -> None: ...
