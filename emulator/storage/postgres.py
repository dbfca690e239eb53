"""The Store in a PostgreSQL database (`--store postgresql://...`): shared by any number of
server processes (replicas), each with its own pool of connections (`pgpool.py`, with PostgreSQL's
dialect of the shared statements, `sql.py`).

Every write is one transaction. What one replica alone decides with its lock, the database
decides here: a paused program's one continuation by the primary key of its row in
`continuations` (two replicas continuing one paused program: the first to commit is kept, the
other is refused, as `put_continuation` says); a conversation's items are appended under
its row's lock, its version checked in the same `UPDATE`. The schema is the server's own
(`pgschema.py`), migrated when the store opens.

The journal is shared too (`pgjournal.py`), in tables the database never logs; so are the
leases and the counts (below) and the event log (`pgevents.py`), which one process keeps in memory.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from psycopg_pool import PoolTimeout

from ptc_emulator.emulator.storage.pgevents import PostgresEvents
from ptc_emulator.emulator.storage.pgjournal import PostgresJournal
from ptc_emulator.emulator.storage.pgpool import Lane, Pool
from ptc_emulator.emulator.storage.pgschema import migrate
from ptc_emulator.emulator.storage.protocol import Counts, EventLog, JournalLog, Leases, StoreUnavailable
from ptc_emulator.emulator.storage.sql import SqlParts

__all__ = ["PING_WAIT_S", "PostgresStore", "open_at", "open_postgres"]

PING_WAIT_S = 1.0
"""How long the health check waits for a pooled connection: with the database away it answers 503
within this and a connection attempt's failure (a refused or closed socket fails at once); its
uses' deadline too."""
PING_SERVER_SHARE = 0.8
"""The health check's count runs under a server-side statement and lock timeout of this share of
`PING_WAIT_S`, below its deadline (as the pooled connections' `SERVER_S` is below `DEADLINE_S`): a
count held by a lock is ended by the server, which answered, so the database is not taken for
away. (At the deadline itself, the watchdog sometimes cut it first under load, and the next
requests were given the away wait and deadline.)"""


class PostgresLeases:
    def __init__(self, db: Lane | Pool) -> None:
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


class PostgresCounts:
    """Counts in the `counts` table: one upsert counts and checks the limit (it locks the row, so
    two replicas counting one key at once count twice, in turn). Keys untouched for a day are
    swept now and then."""

    SWEEP_EVERY = 1024

    def __init__(self, db: Lane | Pool) -> None:
        self._db = db
        self._taken = 0

    def take(self, key: str, limit: int) -> int | None:
        if limit < 1:
            return None
        row = self._db.one(
            "INSERT INTO counts (key, n) VALUES (%s, 1) ON CONFLICT (key) DO UPDATE SET n = counts.n + 1, "
            "at = now() WHERE counts.n < %s RETURNING n",
            (key, limit),
        )
        self._taken += 1
        if self._taken % self.SWEEP_EVERY == 0:
            self._db.changed("DELETE FROM counts WHERE at < now() - interval '1 day'")
        return int(row[0]) - 1 if row is not None else None

    def forget(self, prefix: str, containing: str = "") -> int:
        return self._db.changed(
            "DELETE FROM counts WHERE left(key, %s) = %s AND strpos(key, %s) > 0", (len(prefix), prefix, containing)
        )


class PostgresStore(SqlParts):
    """Every part in the database at `url`; the schema migrated as it opens."""

    kind: str = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 8) -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            migrate(connection)
        self._db = Pool(url, pool_size)
        super().__init__(self._db, self._db.lane)
        self.journal: JournalLog = PostgresJournal(self._db.lane("journal"))
        self.leases: Leases = PostgresLeases(self._db.lane("leases"))
        self.counts: Counts = PostgresCounts(self._db.lane("counts"))
        self._events = PostgresEvents(self._db.lane("events"), url)
        self.events: EventLog | None = self._events
        self.shared = True

    def ping(self) -> bool:
        """Whether the database answers, found out within `PING_WAIT_S` for a connection (and the
        time a broken one takes to fail): the health check of a load balancer."""
        try:
            with self._db.connection(wait_s=PING_WAIT_S, deadline_s=PING_WAIT_S) as db:
                return bool(db.execute(b"SELECT 1").fetchone() == (1,))
        except (StoreUnavailable, psycopg.Error):
            return False

    def stored_count(self) -> int | None:
        """How many responses the store holds, or None when the database does not answer within
        `PING_WAIT_S`: the ping and the count in one connection, under a statement and lock
        timeout below that deadline (`PING_SERVER_SHARE`). (The count ran under `DEADLINE_S` after
        the ping: a database that answered the ping while a lock held the table made health wait
        15 s.)"""
        limit = f"{round(PING_WAIT_S * PING_SERVER_SHARE * 1000)}ms"
        try:
            with self._db.connection(wait_s=PING_WAIT_S, deadline_s=PING_WAIT_S) as db, db.transaction():
                db.execute(
                    b"SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)",
                    (limit, limit),
                )
                (n,) = db.execute(b"SELECT COUNT(*) FROM responses").fetchone() or (0,)
                return int(n)
        except (StoreUnavailable, psycopg.Error):
            return None

    def close(self) -> None:
        self._events.close()
        self._db.pool.close()
        self._db.watchdog.close()


def open_postgres(url: str) -> PostgresStore:
    """The store at `url`; `StoreUnavailable` if the database does not answer or is too new."""
    try:
        return PostgresStore(url)
    except (psycopg.Error, PoolTimeout) as e:
        raise StoreUnavailable(f"the database does not answer: {e}") from e


def open_at(where: str, data_dir: Path | None) -> PostgresStore:
    """`--store postgresql://...` (the data directory is not used)."""
    return open_postgres(where)
