"""The PostgreSQL store's schema: versioned, created and migrated by the server itself.

`migrate(connection)` brings a database to `VERSION` in one transaction, under a transaction-level
advisory lock: two replicas starting at once on an empty database do not race (the second waits,
then finds the schema made and does nothing); a server started again does nothing either. A
database made by a newer emulator (a higher version) is refused rather than written to.

Each entry of `MIGRATIONS` is applied once, in order, and never edited after it was released: a
change of the schema is a new entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptc_emulator.emulator.storage.protocol import StoreUnavailable

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCK", "MIGRATIONS", "VERSION", "SchemaTooNew", "migrate"]

LOCK = 0x70746365  # "ptce": the advisory lock key of the schema's migrations

MIGRATIONS: tuple[str, ...] = (
    # 1: every part of the Store but the journal.
    """
    CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        previous_response_id TEXT,
        status TEXT,
        response TEXT NOT NULL,
        input_items TEXT NOT NULL,
        scope TEXT
    );
    CREATE INDEX responses_by_previous ON responses (previous_response_id);
    CREATE TABLE items (
        id TEXT PRIMARY KEY,
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
        item TEXT NOT NULL
    );
    CREATE INDEX items_by_response ON items (response_id);
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        metadata TEXT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE conversation_items (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        item_id TEXT NOT NULL,
        item TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    );
    CREATE INDEX conversation_items_by_id ON conversation_items (conversation_id, item_id);
    CREATE TABLE records (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        ord BIGSERIAL,
        document TEXT NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE TABLE scenarios (
        scope_key TEXT NOT NULL,
        name TEXT NOT NULL,
        ord BIGSERIAL,
        scope TEXT,
        document TEXT NOT NULL,
        PRIMARY KEY (scope_key, name)
    );
    """,
    # 2: the request journal, shared so every replica's inspector shows every replica's requests.
    # UNLOGGED: never written to the write-ahead log and emptied by a crash of the database, as the
    # journal of one process is gone with it; `journal_totals` is its one row of bounds.
    """
    CREATE UNLOGGED TABLE journal (
        seq BIGINT PRIMARY KEY,
        scope TEXT,
        size BIGINT NOT NULL,
        entry TEXT NOT NULL
    );
    CREATE SEQUENCE journal_seq;
    CREATE UNLOGGED TABLE journal_totals (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        entries BIGINT NOT NULL, bytes BIGINT NOT NULL);
    INSERT INTO journal_totals (entries, bytes) VALUES (0, 0);
    """,
    # 3: leases of the work that outlives a request (Agents API turns), expiring by the database's clock.
    """
    CREATE TABLE leases (
        key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    """,
    # 4: the events the replicas fan out (Agents API sessions' streams), numbered per stream.
    """
    CREATE TABLE stream_events (
        stream TEXT NOT NULL,
        seq BIGINT NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (stream, seq)
    );
    """,
    # 5: the one continuation of each paused program, decided by the primary key whichever replica
    # writes it; the key to the response is checked at commit (the pause is claimed first).
    """
    CREATE TABLE continuations (
        paused_id TEXT PRIMARY KEY,
        response_id TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
        digest TEXT NOT NULL
    );
    CREATE INDEX continuations_by_response ON continuations (response_id);
    """,
    # 6: counts shared by every replica (a scenario's fault answers `times` requests in all).
    """
    CREATE TABLE counts (
        key TEXT PRIMARY KEY,
        n BIGINT NOT NULL,
        at TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    """,
    # 7: the scope a conversation was made in (seen in that scope only, as a response is).
    """
    ALTER TABLE conversations ADD COLUMN scope TEXT;
    """,
    # 8: a record's head, a small summary of its document written with it (`Records.heads`): a
    # session's status read without its document. Rows written before have none (NULL) until
    # their next write, or until a reader makes theirs (`Records.put_head`).
    """
    ALTER TABLE records ADD COLUMN head TEXT;
    """,
    # 9: what the watch for turns to take over and a list of sessions choose records by, kept
    # apart from the head (`Records.running`, `Records.page`): the head's scope, agent and
    # whether its turn runs. Before, every replica read and parsed every session's head, its
    # metadata and all, every half lease and for every list. Rows with a head get theirs from it
    # here, once; rows without one get them with it (`Records.put_head`).
    """
    ALTER TABLE records ADD COLUMN scope TEXT, ADD COLUMN agent_id TEXT,
        ADD COLUMN running BOOLEAN NOT NULL DEFAULT FALSE;
    UPDATE records SET scope = CAST(head AS jsonb) ->> 'scope', agent_id = CAST(head AS jsonb) ->> 'agent_id',
        running = COALESCE(CAST(head AS jsonb) -> 'running' = 'true'::jsonb, FALSE)
        WHERE head IS NOT NULL;
    CREATE INDEX records_running ON records (kind) WHERE running;
    CREATE INDEX records_unheaded ON records (kind) WHERE head IS NULL;
    CREATE INDEX records_in_order ON records (kind, ord);
    """,
    # 10: a record's version, grown by every put of its document: a put made at a version
    # (`Records.put(expected=...)`) is written only while the record is still at it, so a replica
    # stalled past its lease cannot write its stale turn over the one another replica took over,
    # nor put back a session deleted meanwhile. Rows written before are at 0.
    """
    ALTER TABLE records ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
    """,
    # 11: the scenarios' version, one row every write of `scenarios` makes larger in its own
    # transaction (its lock orders the writes), and each row's revision, the version its put made:
    # a replica reads the version alone, and the rows put since it last read, not every document.
    """
    CREATE TABLE scenarios_version (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version BIGINT NOT NULL);
    INSERT INTO scenarios_version (version) VALUES (0);
    ALTER TABLE scenarios ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
    """,
)
"""`scenarios.scope_key` is the scope as JSON (`null` for none): a primary key cannot hold NULL.
`records.ord` and `scenarios.ord` are the listing order: an upsert keeps the row's. `responses.status`
is the body's status, kept beside it for the continuations."""

VERSION = len(MIGRATIONS)


class SchemaTooNew(StoreUnavailable):
    """The database was made by a newer emulator."""


def migrate(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    """Bring the database to `VERSION`; the version it was at before."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
        connection.execute("CREATE TABLE IF NOT EXISTS ptc_schema (version INTEGER NOT NULL)")
        row = connection.execute("SELECT version FROM ptc_schema").fetchone()
        before = int(row[0]) if row is not None else 0  # type: ignore[call-overload]
        if row is None:
            connection.execute("INSERT INTO ptc_schema (version) VALUES (0)")
        if before > VERSION:
            raise SchemaTooNew(
                f"the database's schema is at version {before}, newer than this emulator's {VERSION}: upgrade it"
            )
        for version in range(before + 1, VERSION + 1):
            connection.execute(MIGRATIONS[version - 1].encode())  # several statements in one
            connection.execute("UPDATE ptc_schema SET version = %s", (version,))
    return before
