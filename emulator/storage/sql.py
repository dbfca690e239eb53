"""The SQL the SQL stores share (SQLite's `sqlite.py`, PostgreSQL's `postgres.py`), written once:
the statements of the responses, conversations, sessions and scenarios parts, and the parts
themselves over a backend's connections.

What differs between two SQL databases is said by a small `Dialect`: how a statement marks a
parameter, the null-safe equality, the column that keeps rows in the order they were first put,
and the locks (a row's, a key's) a write takes where its transaction alone does not exclude other
writers. Both databases take the same `INSERT ... ON CONFLICT ... DO UPDATE` upserts and
`CAST(? AS BIGINT)`, so the dialect has nothing to say of those. A backend is its dialect plus its
connection handling (`Connections`: one statement, one transaction that writes, one that reads a
single snapshot) plus its schema, which stays the backend's own: PostgreSQL's is a list of
released migrations never edited, SQLite's a file made if missing whose older versions gain
columns.

No ORM: the statements are few and plain, and each is read where it is used.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.storage.memory import FREEING, UNFINISHED, item_ids
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
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
)

__all__ = [
    "Connections",
    "Dialect",
    "SqlConversations",
    "SqlParts",
    "SqlRecords",
    "SqlResponses",
    "SqlScenarios",
    "Statements",
    "Tx",
    "page_statements",
    "record_write",
]

T = TypeVar("T")

_dumps = json.dumps
_loads = json.loads


@dataclass(frozen=True)
class Dialect:
    """What one SQL database spells its own way."""

    name: str
    placeholder: str
    """How a statement marks its n-th parameter: `?` (SQLite), `%s` (psycopg), or a pattern with
    `{n}` for numbered ones (`?{n}`, `${n}`)."""
    same: str
    """The null-safe equality (NULL equals NULL): `IS`, `IS NOT DISTINCT FROM`."""
    order: str
    """The column that lists rows in the order they were first put (an upsert keeps a row's):
    `rowid`, `ord`."""
    lock_row: str = ""
    """What a `SELECT` adds to lock the rows it reads until its transaction ends (` FOR UPDATE`);
    "" where a write transaction already excludes every other writer (SQLite's `BEGIN IMMEDIATE`)."""
    head_has: str = "EXISTS (SELECT 1 FROM json_each(head, '$.metadata') WHERE key = ? AND value = ?)"
    """Whether a record's head (JSON text) holds the metadata key (the first parameter) with the
    value (the second): `Records.page`'s metadata filter, read by the database itself."""

    def render(self, template: str) -> str:
        """`template` (parameters as `?`, `{same}`, `{order}`, `{lock_row}`) in this dialect."""
        text = template.replace("{same}", self.same).replace("{order}", self.order).replace("{lock_row}", self.lock_row)
        parts = text.split("?")
        if "{n}" not in self.placeholder:
            return self.placeholder.join(parts)
        numbered = [parts[0]]
        for n, part in enumerate(parts[1:], 1):
            numbered += [self.placeholder.replace("{n}", str(n)), part]
        return "".join(numbered)


class Tx(Protocol):
    """A connection inside one transaction (and, for `Connections`' own calls, outside one)."""

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """The first row, or None."""
        ...

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]: ...

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        """How many rows the statement changed."""
        ...

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """The statement once per row of parameters."""
        ...


class Connections(Tx, Protocol):
    """A backend's connection handling: its statements one at a time (`one`, `rows`, `changed`),
    or several in one transaction."""

    dialect: Dialect

    def write(self, work: Callable[[Tx], T]) -> T:
        """`work` in one transaction, committed when it returns (rolled back when it raises)."""
        ...

    def read(self, work: Callable[[Tx], T]) -> T:
        """`work` in one transaction that reads one snapshot of every table."""
        ...

    def glance(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """One statement's first row, read from the last commit without waiting for a write
        under way (a health check's count)."""
        ...


class Statements:
    """Every statement of the shared parts, rendered once per dialect (`of`)."""

    def __init__(self, dialect: Dialect) -> None:
        q = dialect.render
        # responses
        self.response_exists = q("SELECT 1 FROM responses WHERE id = ?")
        # A paused program's one continuation: the primary key decides between two writers (the
        # second waits for the first to commit, then finds the pause taken).
        self.claim_pause = q(
            "INSERT INTO continuations (paused_id, response_id, digest) VALUES (?, ?, ?) "
            "ON CONFLICT (paused_id) DO NOTHING"
        )
        freeing = ", ".join("?" for _ in FREEING)
        holds = f"responses.id = continuations.response_id AND (status IS NULL OR status NOT IN ({freeing}))"
        self.retake_pause = q(  # from one that failed, was cancelled or is gone
            "UPDATE continuations SET response_id = ?, digest = ? WHERE paused_id = ? "
            f"AND NOT EXISTS (SELECT 1 FROM responses WHERE {holds})"
        )
        self.continuation = q(
            "SELECT continuations.response_id, continuations.digest FROM continuations WHERE paused_id = ? "
            f"AND EXISTS (SELECT 1 FROM responses WHERE {holds})"
        )
        unfinished = ", ".join("?" for _ in UNFINISHED)
        self.replace_unfinished = q(  # locks the row: a second writer waits, then finds it finished
            "UPDATE responses SET status = ?, response = ?, input_items = ?, scope = ? "
            f"WHERE id = ? AND status IN ({unfinished})"
        )
        self.drop_items = q("DELETE FROM items WHERE response_id = ?")
        self.put_response = q(
            "INSERT INTO responses (id, previous_response_id, status, response, input_items, scope) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "previous_response_id = excluded.previous_response_id, status = excluded.status, "
            "response = excluded.response, input_items = excluded.input_items, scope = excluded.scope"
        )
        self.put_item = q(
            "INSERT INTO items (id, response_id, item) VALUES (?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item"
        )
        self.get_response = q("SELECT response, input_items, previous_response_id, scope FROM responses WHERE id = ?")
        self.delete_response = q("DELETE FROM responses WHERE id = ?")
        self.item = q("SELECT response_id, item FROM items WHERE id = ?")
        self.item_in = q(
            "SELECT items.response_id, items.item FROM items JOIN responses ON responses.id = items.response_id "
            "WHERE items.id = ? AND responses.scope {same} ?"
        )
        self.count_responses = q("SELECT COUNT(*) FROM responses")
        # conversations
        self.last_seq = q("SELECT COALESCE(MAX(seq), 0) FROM conversation_items WHERE conversation_id = ?")
        self.add_item = q("INSERT INTO conversation_items (conversation_id, seq, item_id, item) VALUES (?, ?, ?, ?)")
        self.create_conversation = q("INSERT INTO conversations (id, created_at, metadata, scope) VALUES (?, ?, ?, ?)")
        self.get_conversation = q("SELECT created_at, metadata, scope FROM conversations WHERE id = ?")
        self.update_conversation = q("UPDATE conversations SET metadata = ? WHERE id = ?")
        self.delete_conversation = q("DELETE FROM conversations WHERE id = ?")
        self.lock_conversation = q("SELECT 1 FROM conversations WHERE id = ?{lock_row}")
        self.next_version = q(
            # Checks the version and locks the row in one statement: a second writer waits, then
            # finds the version moved on and changes nothing.
            "UPDATE conversations SET version = version + 1 WHERE id = ? "
            "AND (CAST(? AS BIGINT) IS NULL OR version = CAST(? AS BIGINT))"
        )
        self.bump_version = q("UPDATE conversations SET version = version + 1 WHERE id = ?")
        self.version = q("SELECT version FROM conversations WHERE id = ?")
        self.conversation_exists = q("SELECT 1 FROM conversations WHERE id = ?")
        self.conversation_items = q("SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY seq")
        self.newest_conversation_items = q(  # the newest rows by the primary key, put back in order
            "SELECT item FROM (SELECT seq, item FROM conversation_items WHERE conversation_id = ? "
            "ORDER BY seq DESC LIMIT ?) AS newest ORDER BY seq"
        )
        self.conversation_items_past = q(  # 1 if there are more than the count: at most count + 1 rows visited
            "SELECT COUNT(*) FROM (SELECT 1 FROM conversation_items WHERE conversation_id = ? LIMIT ?) AS counted"
        )
        self.conversation_item_rows = q(
            "SELECT item_id, item FROM conversation_items WHERE conversation_id = ? ORDER BY seq"
        )
        self.delete_conversation_item = q(
            "DELETE FROM conversation_items WHERE conversation_id = ? AND seq = (SELECT MIN(seq) "
            "FROM conversation_items WHERE conversation_id = ? AND item_id = ?)"
        )
        # records (agents, sessions)
        self.put_record = q(
            "INSERT INTO records (kind, id, document, head, scope, agent_id, running, version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document, head = excluded.head, "
            "scope = excluded.scope, agent_id = excluded.agent_id, running = excluded.running, "
            "version = records.version + 1"
        )
        self.replace_record = q(
            # Checks the version and locks the row in one statement: a second writer waits, then
            # finds the version moved on (or the row gone) and changes nothing.
            "UPDATE records SET document = ?, head = ?, scope = ?, agent_id = ?, running = ?, version = version + 1 "
            "WHERE kind = ? AND id = ? AND version = ?"
        )
        self.get_record = q("SELECT document FROM records WHERE kind = ? AND id = ?")
        self.read_record = q("SELECT version, document FROM records WHERE kind = ? AND id = ?")
        self.delete_record = q("DELETE FROM records WHERE kind = ? AND id = ?")
        self.records = q("SELECT document FROM records WHERE kind = ? ORDER BY {order}")
        self.record_heads = q("SELECT id, head FROM records WHERE kind = ? ORDER BY {order}")
        self.put_head = q(
            "UPDATE records SET head = ?, scope = ?, agent_id = ?, running = ? "
            "WHERE kind = ? AND id = ? AND head IS NULL"
        )
        self.unheaded = q("SELECT id FROM records WHERE kind = ? AND head IS NULL ORDER BY {order}")
        self.running = q("SELECT id FROM records WHERE kind = ? AND running ORDER BY {order}")
        # scenarios: each write makes the one version row larger first (the row's lock orders
        # the writes: a revision is never below one committed before it), and a put gives its row
        # that version as its revision.
        self.bump_scenarios = q("UPDATE scenarios_version SET version = version + 1")
        self.scenarios_version = q("SELECT version FROM scenarios_version")
        self.put_scenario = q(
            "INSERT INTO scenarios (scope_key, name, scope, document, revision) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (scope_key, name) DO UPDATE SET document = excluded.document, revision = excluded.revision"
        )
        self.delete_scenario = q("DELETE FROM scenarios WHERE scope_key = ? AND name = ?")
        self.scenarios = q("SELECT scope, name, document FROM scenarios ORDER BY {order}")
        self.scenario_revisions = q("SELECT scope, name, revision FROM scenarios ORDER BY {order}")
        self.scenarios_after = q("SELECT scope, name, document FROM scenarios WHERE revision > ? ORDER BY {order}")
        self.scenario = q("SELECT scope, name, document FROM scenarios WHERE scope_key = ? AND name = ?")
        self.clear_scenarios = q("DELETE FROM scenarios")
        self.clear_scope = q("DELETE FROM scenarios WHERE scope_key = ?")

    @staticmethod
    @functools.cache
    def of(dialect: Dialect) -> Statements:
        return Statements(dialect)


@functools.lru_cache(maxsize=256)
def page_statements(dialect: Dialect, agent: bool, pairs: int, asc: bool) -> tuple[str, str, str]:
    """`Records.page`'s statements, choosing by scope, by agent (if `agent`) and by `pairs`
    metadata pairs: the first page's, the check that the cursor is one of the records chosen,
    and a page after the cursor. Their parameters: the kind, the scope, the agent id, each pair's
    key and value, then the limit (the first page), the cursor's id (the check), or the kind,
    the cursor's id and the limit (a page after it)."""
    where = "kind = ? AND (scope IS NULL OR scope = ?)"
    if agent:
        where += " AND agent_id = ?"
    where += f" AND {dialect.head_has}" * pairs
    way, beyond = ("ASC", ">") if asc else ("DESC", "<")
    return (
        dialect.render(f"SELECT id FROM records WHERE {where} ORDER BY {{order}} {way} LIMIT ?"),
        dialect.render(f"SELECT 1 FROM records WHERE {where} AND id = ?"),
        dialect.render(
            f"SELECT id FROM records WHERE {where} AND {{order}} {beyond} "
            f"(SELECT {{order}} FROM records WHERE kind = ? AND id = ?) ORDER BY {{order}} {way} LIMIT ?"
        ),
    )


_Texts = tuple[str, str, list[tuple[str, str, str]]]
"""A record's body, input items and rows of items with ids, as JSON text."""


def _texts(record: StoredResponse) -> _Texts:
    """A long record's text is made a piece at a time (`jsonpieces`), letting other threads run."""
    items = [(item_id, record.id, _dumps(item)) for item_id, item in item_ids(record)]
    return jsonpieces.dumps(record.response), jsonpieces.dumps(record.input_items), items


class SqlResponses:
    def __init__(self, db: Connections) -> None:
        self._db = db
        self._sql = Statements.of(db.dialect)

    # A record's texts are made before its transaction begins: a long record's take their time,
    # and another request's write waits for none of it (issue 38).

    def put(self, record: StoredResponse) -> None:
        texts = _texts(record)
        self._db.write(lambda tx: self._put(tx, record, texts))

    def put_continuation(self, record: StoredResponse, digest: str) -> str | None:
        texts = _texts(record)
        return self._db.write(lambda tx: self._put_continuation(tx, record, digest, texts))

    def put_with_turn(self, record: StoredResponse, turn: Turn, digest: str | None = None) -> str | None:
        # One transaction: the response and its turn are committed together, or neither is (a
        # 503 of either write left the other behind, before, or an undo that could fail too).
        texts = _texts(record)

        def work(tx: Tx) -> str | None:
            taken = self._put_continuation(tx, record, digest, texts)
            if taken is not None:
                return taken
            if not _append(tx, self._sql, turn.conversation_id, turn.items, turn.expected):
                # Gone: it keeps nothing, and the response stays. Moved on: nothing is written.
                if turn.expected is not None and tx.one(self._sql.conversation_exists, (turn.conversation_id,)):
                    raise TurnRefused(turn.conversation_id)
            return None

        return self._db.write(work)

    def _put_continuation(self, tx: Tx, record: StoredResponse, digest: str | None, texts: _Texts) -> str | None:
        sql, paused = self._sql, record.previous_response_id
        if digest is not None and paused is not None and tx.one(sql.response_exists, (record.id,)) is None:
            # The pause's row first (its key to the response is checked at commit): a second
            # writer stops here, having written nothing.
            taken = tx.changed(sql.claim_pause, (paused, record.id, digest)) == 0
            if taken and tx.changed(sql.retake_pause, (record.id, digest, paused, *FREEING)) == 0:
                row = tx.one(sql.continuation, (paused, *FREEING))
                return str(row[0]) if row is not None else paused  # (the row that stopped it is the one kept)
        self._put(tx, record, texts)
        return None

    def replace_unfinished(self, record: StoredResponse) -> bool:
        texts = _texts(record)

        def work(tx: Tx) -> bool:
            body = (record.response.get("status"), texts[0], texts[1], record.scope)
            if tx.changed(self._sql.replace_unfinished, (*body, record.id, *UNFINISHED)) == 0:
                return False
            self._put(tx, record, texts)  # its items with it (the row is this transaction's now)
            return True

        return self._db.write(work)

    def _put(self, tx: Tx, record: StoredResponse, texts: _Texts) -> None:
        sql = self._sql
        body, inputs, items = texts
        tx.changed(sql.drop_items, (record.id,))
        tx.changed(
            sql.put_response,
            (record.id, record.previous_response_id, record.response.get("status"), body, inputs, record.scope),
        )
        if items:
            tx.many(sql.put_item, items)

    def continuation(self, response_id: str) -> tuple[str, str] | None:
        row = self._db.one(self._sql.continuation, (response_id, *FREEING))
        return (str(row[0]), str(row[1])) if row is not None else None

    def get(self, response_id: str) -> StoredResponse | None:
        row = self._db.one(self._sql.get_response, (response_id,))
        if row is None:
            return None
        return StoredResponse(response_id, jsonpieces.loads(row[0]), jsonpieces.loads(row[1]), row[2], row[3])

    def delete(self, response_id: str) -> bool:
        return self._db.changed(self._sql.delete_response, (response_id,)) > 0

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one(self._sql.item, (item_id,))
        return (row[0], _loads(row[1])) if row else None

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one(self._sql.item_in, (item_id, scope))
        return (row[0], _loads(row[1])) if row else None

    def count(self) -> int:
        (n,) = self._db.glance(self._sql.count_responses)
        return int(n)


def _insert(tx: Tx, sql: Statements, conversation_id: str, items: list[dict[str, Any]]) -> None:
    """A conversation's items added at its end, under its lock (the caller took it)."""
    if not items:
        return
    (last,) = tx.one(sql.last_seq, (conversation_id,))
    tx.many(
        sql.add_item,
        [(conversation_id, int(last) + n, item["id"], _dumps(item)) for n, item in enumerate(items, 1)],
    )


def _append(tx: Tx, sql: Statements, conversation_id: str, items: list[dict[str, Any]], expected: int | None) -> bool:
    """`Conversations.append` inside the caller's transaction."""
    if tx.changed(sql.next_version, (conversation_id, expected, expected)) == 0:
        return False  # gone, or another writer changed its items since `expected`
    _insert(tx, sql, conversation_id, items)
    return True


class SqlConversations:
    def __init__(self, db: Connections) -> None:
        self._db = db
        self._sql = Statements.of(db.dialect)

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        def work(tx: Tx) -> None:
            tx.changed(
                self._sql.create_conversation, (record.id, record.created_at, _dumps(record.metadata), record.scope)
            )
            _insert(tx, self._sql, record.id, items)

        self._db.write(work)

    def get(self, conversation_id: str) -> StoredConversation | None:
        row = self._db.one(self._sql.get_conversation, (conversation_id,))
        return StoredConversation(conversation_id, int(row[0]), _loads(row[1]), row[2]) if row else None

    def update(self, record: StoredConversation) -> bool:
        return self._db.changed(self._sql.update_conversation, (_dumps(record.metadata), record.id)) > 0

    def delete(self, conversation_id: str) -> bool:
        return self._db.changed(self._sql.delete_conversation, (conversation_id,)) > 0

    def append(self, conversation_id: str, items: list[dict[str, Any]], *, expected: int | None = None) -> bool:
        return self._db.write(lambda tx: _append(tx, self._sql, conversation_id, items, expected))

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        return jsonpieces.loads_each(
            [row[0] for row in self._db.rows(self._sql.conversation_items, (conversation_id,))]
        )

    def item_page(self, conversation_id: str, pick: Callable[[list[str]], list[int]]) -> list[dict[str, Any]]:
        rows = self._db.rows(self._sql.conversation_item_rows, (conversation_id,))
        return [_loads(rows[n][1]) for n in pick([row[0] for row in rows])]

    def read(self, conversation_id: str, *, last: int | None = None) -> tuple[int, list[dict[str, Any]]] | None:
        def work(tx: Tx) -> tuple[int, list[dict[str, Any]]] | None:
            row = tx.one(self._sql.version, (conversation_id,))
            if row is None:
                return None
            if last is None:
                rows = tx.rows(self._sql.conversation_items, (conversation_id,))
            else:
                rows = tx.rows(self._sql.newest_conversation_items, (conversation_id, last))
            return int(row[0]), jsonpieces.loads_each([r[0] for r in rows])

        return self._db.read(work)  # one snapshot of both

    def holds_over(self, conversation_id: str, count: int) -> bool:
        (counted,) = self._db.one(self._sql.conversation_items_past, (conversation_id, count + 1))
        return int(counted) > count

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        def work(tx: Tx) -> bool:
            if tx.one(self._sql.lock_conversation, (conversation_id,)) is None:
                return False
            if tx.changed(self._sql.delete_conversation_item, (conversation_id, conversation_id, item_id)) == 0:
                return False
            tx.changed(self._sql.bump_version, (conversation_id,))
            return True

        return self._db.write(work)


class SqlRecords:
    def __init__(self, db: Connections) -> None:
        self._db = db
        self._sql = Statements.of(db.dialect)

    def put(
        self,
        kind: str,
        record_id: str,
        document: dict[str, Any],
        head: dict[str, Any] | None = None,
        *,
        expected: int | None = None,
    ) -> bool:
        # An upsert keeps the row (and its place in the listing order) of an existing record.
        statement, row = record_write(self._sql, kind, record_id, document, head, expected)
        return self._db.changed(statement, row) > 0 or expected is None

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        row = self._db.one(self._sql.get_record, (kind, record_id))
        return _loads(row[0]) if row else None

    def read(self, kind: str, record_id: str) -> tuple[int, dict[str, Any]] | None:
        row = self._db.one(self._sql.read_record, (kind, record_id))
        return (int(row[0]), _loads(row[1])) if row else None

    def delete(self, kind: str, record_id: str) -> bool:
        return self._db.changed(self._sql.delete_record, (kind, record_id)) > 0

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [_loads(row[0]) for row in self._db.rows(self._sql.records, (kind,))]

    def heads(self, kind: str) -> list[tuple[str, dict[str, Any] | None]]:
        rows = self._db.rows(self._sql.record_heads, (kind,))
        return [(str(row[0]), _loads(row[1]) if row[1] is not None else None) for row in rows]

    def put_head(self, kind: str, record_id: str, head: dict[str, Any]) -> bool:
        return self._db.changed(self._sql.put_head, (_dumps(head), *head_columns(head), kind, record_id)) > 0

    def unheaded(self, kind: str) -> list[str]:
        return [str(row[0]) for row in self._db.rows(self._sql.unheaded, (kind,))]

    def running(self, kind: str) -> list[str]:
        return [str(row[0]) for row in self._db.rows(self._sql.running, (kind,))]

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
        pairs = list((metadata or {}).items())
        first, cursor, beyond = page_statements(self._db.dialect, agent_id is not None, len(pairs), order == "asc")
        chosen = (kind, scope, *([agent_id] if agent_id is not None else []), *(x for pair in pairs for x in pair))
        if after is None:
            rows = self._db.rows(first, (*chosen, limit + 1))
        else:

            def work(tx: Tx) -> list[Any] | None:
                if tx.one(cursor, (*chosen, after)) is None:
                    return None
                return tx.rows(beyond, (*chosen, kind, after, limit + 1))

            found = self._db.read(work)  # the check and the page from one snapshot
            if found is None:
                return None
            rows = found
        ids = [str(row[0]) for row in rows]
        return ids[:limit], len(ids) > limit


def record_write(
    sql: Statements,
    kind: str,
    record_id: str,
    document: dict[str, Any],
    head: dict[str, Any] | None,
    expected: int | None,
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of `Records.put`: an upsert (`put_record`), or with
    `expected` the update of the record at that version alone (`replace_record`); the head's
    scope, agent and running kept apart with it (`head_columns`)."""
    text, head_text = _dumps(document), _dumps(head) if head is not None else None
    if expected is None:
        return sql.put_record, (kind, record_id, text, head_text, *head_columns(head))
    return sql.replace_record, (text, head_text, *head_columns(head), kind, record_id, expected)


class SqlScenarios:
    def __init__(self, db: Connections) -> None:
        self._db = db
        self._sql = Statements.of(db.dialect)

    def _bumped(self, tx: Tx) -> int:
        tx.changed(self._sql.bump_scenarios)
        return int(tx.one(self._sql.scenarios_version)[0])

    def put(self, scenario: StoredScenario) -> None:
        texts = (_dumps(scenario.scope), scenario.name, scenario.scope, _dumps(scenario.document))
        self._db.write(lambda tx: tx.changed(self._sql.put_scenario, (*texts, self._bumped(tx))))

    def delete(self, scope: str | None, name: str) -> bool:
        def delete(tx: Tx) -> bool:
            self._bumped(tx)
            return tx.changed(self._sql.delete_scenario, (_dumps(scope), name)) > 0

        return self._db.write(delete)

    def list(self) -> list[StoredScenario]:
        return [StoredScenario(row[0], row[1], _loads(row[2])) for row in self._db.rows(self._sql.scenarios)]

    def clear(self, scope: str | None = None) -> int:
        def clear(tx: Tx) -> int:
            self._bumped(tx)
            if scope is None:
                return tx.changed(self._sql.clear_scenarios)
            return tx.changed(self._sql.clear_scope, (_dumps(scope),))

        return self._db.write(clear)

    def version(self) -> int:
        return int(self._db.one(self._sql.scenarios_version)[0])

    def changes(self, since: int, keys: Collection[ScenarioKey] = ()) -> ScenarioChanges:
        def read(tx: Tx) -> tuple[int, list[Any], list[Any]]:  # one snapshot
            version = int(tx.one(self._sql.scenarios_version)[0])
            rows = tx.rows(self._sql.scenario_revisions)
            texts = tx.rows(self._sql.scenarios_after, (since,))
            after = {(row[0], row[1]) for row in texts}
            for scope, name in keys:
                if (scope, name) not in after:
                    texts += tx.rows(self._sql.scenario, (_dumps(scope), name))
            return version, rows, texts

        version, rows, texts = self._db.read(read)
        read_whole = {(row[0], row[1]): StoredScenario(row[0], row[1], _loads(row[2])) for row in texts}
        return ScenarioChanges(version, [(row[0], row[1], int(row[2])) for row in rows], read_whole)


class SqlParts:
    """The four parts every SQL store keeps in its tables, over `db`; a backend adds the rest of
    a `Store` (its kind, the journal, the leases, the counts, the events, `close`)."""

    def __init__(self, db: Connections, part: Callable[[str], Connections] | None = None) -> None:
        on = part or (lambda name: db)  # `part(name)`: a part's own connections (PostgreSQL's lanes)
        self.responses: Responses = SqlResponses(on("responses"))
        self.conversations: Conversations = SqlConversations(on("conversations"))
        self.sessions: Records = SqlRecords(on("sessions"))
        self.scenarios: Scenarios = SqlScenarios(on("scenarios"))
