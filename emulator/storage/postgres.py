"""The Store in a PostgreSQL database (`--store postgresql://...`): shared by any number of
server processes (replicas), each with its own pool of connections.

Every write is one transaction. What one replica alone decides with its lock, the database
decides here: a successor of a response is checked and put under a transaction-level advisory
lock on the response it continues (two replicas continuing one paused program at once: one
wins, the other is refused, as `put_successor` says); a conversation's items are appended under
its row's lock, its version checked in the same `UPDATE`. The schema is the server's own
(`pgschema.py`), migrated when the store opens.

The journal is shared too (`pgjournal.py`), in tables the database never logs.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from ptc_emulator.emulator.storage.memory import UNFINISHED, item_ids
from ptc_emulator.emulator.storage.pgevents import PostgresEvents
from ptc_emulator.emulator.storage.pgjournal import PostgresJournal
from ptc_emulator.emulator.storage.pgpool import Db, Pool
from ptc_emulator.emulator.storage.pgschema import migrate
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
    EventLog,
    JournalLog,
    Leases,
    Records,
    Responses,
    Scenarios,
    StoredConversation,
    StoredResponse,
    StoredScenario,
    StoreUnavailable,
)

__all__ = ["PostgresStore", "open_postgres"]


_dumps = json.dumps
_loads = json.loads


class PostgresResponses:
    def __init__(self, db: Pool) -> None:
        self._db = db

    def put(self, record: StoredResponse) -> None:
        self._db.run(lambda db: self._put(db, record, None))

    def put_successor(self, record: StoredResponse, expected: int) -> bool:
        return self._db.run(lambda db: self._put(db, record, expected))

    @staticmethod
    def _put(db: Db, record: StoredResponse, expected: int | None) -> bool:
        previous = record.previous_response_id
        if expected is not None and previous is not None:
            # Every writer of a successor of `previous` takes this lock first: the count checked
            # is the count when this transaction commits.
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (previous,))
            known = db.execute("SELECT 1 FROM responses WHERE id = %s", (record.id,)).fetchone()
            row = db.execute("SELECT COUNT(*) FROM responses WHERE previous_response_id = %s", (previous,)).fetchone()
            if known is None and row is not None and row[0] != expected:
                return False
        elif previous is not None:
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (previous,))
        db.execute("DELETE FROM items WHERE response_id = %s", (record.id,))
        db.execute(
            "INSERT INTO responses (id, previous_response_id, status, response, input_items, scope) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
            "previous_response_id = excluded.previous_response_id, status = excluded.status, "
            "response = excluded.response, input_items = excluded.input_items, scope = excluded.scope",
            (
                record.id,
                previous,
                record.response.get("status"),
                _dumps(record.response),
                _dumps(record.input_items),
                record.scope,
            ),
        )
        items = [(item_id, record.id, _dumps(item)) for item_id, item in item_ids(record)]
        if items:
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO items (id, response_id, item) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item",
                    items,
                )
        return True

    def successors(self, response_id: str) -> int:
        (n,) = self._db.one(
            "SELECT COUNT(*) FROM responses WHERE previous_response_id = %s "
            "AND (status IS NULL OR NOT (status = ANY(%s)))",
            (response_id, list(UNFINISHED)),
        )
        return int(n)

    def get(self, response_id: str) -> StoredResponse | None:
        row = self._db.one(
            "SELECT response, input_items, previous_response_id, scope FROM responses WHERE id = %s", (response_id,)
        )
        if row is None:
            return None
        return StoredResponse(response_id, _loads(row[0]), _loads(row[1]), row[2], row[3])

    def delete(self, response_id: str) -> bool:
        return self._db.changed("DELETE FROM responses WHERE id = %s", (response_id,)) > 0

    def item(self, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one("SELECT response_id, item FROM items WHERE id = %s", (item_id,))
        return (row[0], _loads(row[1])) if row else None

    def item_in(self, scope: str | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.one(
            "SELECT items.response_id, items.item FROM items JOIN responses ON responses.id = items.response_id "
            "WHERE items.id = %s AND responses.scope IS NOT DISTINCT FROM %s",
            (item_id, scope),
        )
        return (row[0], _loads(row[1])) if row else None

    def count(self) -> int:
        (n,) = self._db.one("SELECT COUNT(*) FROM responses")
        return int(n)


class PostgresConversations:
    def __init__(self, db: Pool) -> None:
        self._db = db

    @staticmethod
    def _insert(db: Db, conversation_id: str, items: list[dict[str, Any]]) -> None:
        """Under the conversation row's lock (the caller took it)."""
        if not items:
            return
        row = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM conversation_items WHERE conversation_id = %s", (conversation_id,)
        ).fetchone()
        last = int(row[0]) if row is not None else 0
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO conversation_items (conversation_id, seq, item_id, item) VALUES (%s, %s, %s, %s)",
                [(conversation_id, last + n, item["id"], _dumps(item)) for n, item in enumerate(items, 1)],
            )

    def create(self, record: StoredConversation, items: list[dict[str, Any]]) -> None:
        def work(db: Db) -> None:
            db.execute(
                "INSERT INTO conversations (id, created_at, metadata) VALUES (%s, %s, %s)",
                (record.id, record.created_at, _dumps(record.metadata)),
            )
            self._insert(db, record.id, items)

        self._db.run(work)

    def get(self, conversation_id: str) -> StoredConversation | None:
        row = self._db.one("SELECT created_at, metadata FROM conversations WHERE id = %s", (conversation_id,))
        return StoredConversation(conversation_id, int(row[0]), _loads(row[1])) if row else None

    def update(self, record: StoredConversation) -> bool:
        sql = "UPDATE conversations SET metadata = %s WHERE id = %s"
        return self._db.changed(sql, (_dumps(record.metadata), record.id)) > 0

    def delete(self, conversation_id: str) -> bool:
        return self._db.changed("DELETE FROM conversations WHERE id = %s", (conversation_id,)) > 0

    def append(self, conversation_id: str, items: list[dict[str, Any]], *, expected: int | None = None) -> bool:
        def work(db: Db) -> bool:
            # The UPDATE checks the version and locks the row: a second writer waits, then finds
            # the version moved on and changes nothing.
            row = db.execute(
                "UPDATE conversations SET version = version + 1 WHERE id = %s "
                "AND (%s::bigint IS NULL OR version = %s::bigint) RETURNING version",
                (conversation_id, expected, expected),
            ).fetchone()
            if row is None:
                return False
            self._insert(db, conversation_id, items)
            return True

        return self._db.run(work)

    def items(self, conversation_id: str) -> list[dict[str, Any]]:
        sql = "SELECT item FROM conversation_items WHERE conversation_id = %s ORDER BY seq"
        return [_loads(row[0]) for row in self._db.rows(sql, (conversation_id,))]

    def read(self, conversation_id: str) -> tuple[int, list[dict[str, Any]]] | None:
        def work(db: Db) -> tuple[int, list[dict[str, Any]]] | None:
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot of both
            row = db.execute("SELECT version FROM conversations WHERE id = %s", (conversation_id,)).fetchone()
            if row is None:
                return None
            sql = "SELECT item FROM conversation_items WHERE conversation_id = %s ORDER BY seq"
            return int(row[0]), [_loads(r[0]) for r in db.execute(sql, (conversation_id,)).fetchall()]

        return self._db.run(work)

    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        def work(db: Db) -> bool:
            if (
                db.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,)).fetchone()
                is None
            ):
                return False
            deleted = db.execute(
                "DELETE FROM conversation_items WHERE conversation_id = %s AND seq = (SELECT MIN(seq) "
                "FROM conversation_items WHERE conversation_id = %s AND item_id = %s)",
                (conversation_id, conversation_id, item_id),
            ).rowcount
            if deleted == 0:
                return False
            db.execute("UPDATE conversations SET version = version + 1 WHERE id = %s", (conversation_id,))
            return True

        return self._db.run(work)


class PostgresRecords:
    def __init__(self, db: Pool) -> None:
        self._db = db

    def put(self, kind: str, record_id: str, document: dict[str, Any]) -> None:
        # An upsert keeps the row (and its `ord`, the listing order) of an existing record.
        self._db.changed(
            "INSERT INTO records (kind, id, document) VALUES (%s, %s, %s) "
            "ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document",
            (kind, record_id, _dumps(document)),
        )

    def get(self, kind: str, record_id: str) -> dict[str, Any] | None:
        row = self._db.one("SELECT document FROM records WHERE kind = %s AND id = %s", (kind, record_id))
        return _loads(row[0]) if row else None

    def delete(self, kind: str, record_id: str) -> bool:
        return self._db.changed("DELETE FROM records WHERE kind = %s AND id = %s", (kind, record_id)) > 0

    def all(self, kind: str) -> list[dict[str, Any]]:
        rows = self._db.rows("SELECT document FROM records WHERE kind = %s ORDER BY ord", (kind,))
        return [_loads(r[0]) for r in rows]


class PostgresScenarios:
    def __init__(self, db: Pool) -> None:
        self._db = db

    def put(self, scenario: StoredScenario) -> None:
        self._db.changed(
            "INSERT INTO scenarios (scope_key, name, scope, document) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (scope_key, name) DO UPDATE SET document = excluded.document",
            (_dumps(scenario.scope), scenario.name, scenario.scope, _dumps(scenario.document)),
        )

    def delete(self, scope: str | None, name: str) -> bool:
        sql = "DELETE FROM scenarios WHERE scope_key = %s AND name = %s"
        return self._db.changed(sql, (_dumps(scope), name)) > 0

    def list(self) -> list[StoredScenario]:
        rows = self._db.rows("SELECT scope, name, document FROM scenarios ORDER BY ord")
        return [StoredScenario(row[0], row[1], _loads(row[2])) for row in rows]

    def clear(self, scope: str | None = None) -> int:
        if scope is None:
            return self._db.changed("DELETE FROM scenarios")
        return self._db.changed("DELETE FROM scenarios WHERE scope_key = %s", (_dumps(scope),))


class PostgresLeases:
    def __init__(self, db: Pool) -> None:
        self._db = db

    def claim(self, key: str, owner: str, seconds: float) -> bool:
        row = self._db.one(
            "INSERT INTO leases (key, owner, expires_at) VALUES (%s, %s, now() + make_interval(secs => %s)) "
            "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
            "WHERE leases.owner = excluded.owner OR leases.expires_at <= now() RETURNING owner",
            (key, owner, seconds),
        )
        return row is not None

    def release(self, key: str, owner: str) -> None:
        self._db.changed("DELETE FROM leases WHERE key = %s AND owner = %s", (key, owner))

    def holder(self, key: str) -> str | None:
        row = self._db.one("SELECT owner FROM leases WHERE key = %s AND expires_at > now()", (key,))
        return str(row[0]) if row else None


class PostgresStore:
    """Every part in the database at `url` but the journal; the schema migrated as it opens."""

    kind: str = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 8) -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            migrate(connection)
        self._db = Pool(url, pool_size)
        self.responses: Responses = PostgresResponses(self._db)
        self.conversations: Conversations = PostgresConversations(self._db)
        self.sessions: Records = PostgresRecords(self._db)
        self.scenarios: Scenarios = PostgresScenarios(self._db)
        self.journal: JournalLog = PostgresJournal(self._db)
        self.leases: Leases = PostgresLeases(self._db)
        self._events = PostgresEvents(self._db, url)
        self.events: EventLog | None = self._events
        self.shared = True

    def ping(self) -> bool:
        """Whether the database answers."""
        try:
            return bool(self._db.one("SELECT 1") == (1,))
        except psycopg.Error:
            return False

    def close(self) -> None:
        self._events.close()
        self._db.pool.close()


def open_postgres(url: str) -> PostgresStore:
    """The store at `url`; `StoreUnavailable` if the database does not answer or is too new."""
    try:
        return PostgresStore(url)
    except (psycopg.Error, PoolTimeout) as e:
        raise StoreUnavailable(f"the database does not answer: {e}") from e
