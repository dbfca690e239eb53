"""The PostgreSQL store's connections: one pool per process (`psycopg_pool`), in autocommit, with
a transaction opened where a write needs one (`sql.Connections`), and PostgreSQL's dialect.

A database that does not answer is `StoreUnavailable` (the API's 503), never a driver error: a
broken connection, a connection that cannot be made, none free in time. Once one statement found
it away, the next wait for a connection is short (`AWAY_WAIT_S`), so requests fail at once while
it is away; the pool keeps connecting meanwhile, and the first statement that goes through ends
the outage."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ptc_emulator.emulator.storage.protocol import StoreUnavailable
from ptc_emulator.emulator.storage.sql import Dialect, Tx

__all__ = ["AWAY_WAIT_S", "CONNECT_S", "POSTGRES", "WAIT_S", "Db", "Pool"]

Db = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

POSTGRES = Dialect(
    "postgresql",
    placeholder="%s",
    same="IS NOT DISTINCT FROM",
    order="ord",
    lock_row=" FOR UPDATE",
)
"""Replicas write at once: a write locks the conversation row it changes (a paused program's one
continuation is decided by a primary key; the event log's streams take advisory locks)."""


class _Tx:
    """A pooled connection inside one transaction."""

    __slots__ = ("db",)

    def __init__(self, db: Db) -> None:
        self.db = db

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self.db.execute(sql.encode(), parameters).fetchone()

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        return self.db.execute(sql.encode(), parameters).fetchall()

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        return self.db.execute(sql.encode(), parameters).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.db.cursor() as cursor:
            cursor.executemany(sql.encode(), rows)


WAIT_S = 10.0
"""How long a statement waits for a pooled connection while the database answers (the pool busy)."""
AWAY_WAIT_S = 0.5
"""How long it waits once the database was found away: a request fails at once, not after
`WAIT_S`; the pool keeps connecting in the background, and the first statement that goes
through ends the outage."""
RECONNECT_S = 8.0
CONNECT_S = 2
"""How long making a connection may take (`connect_timeout`): a database host that does not
answer at all is found away in this time."""


_GONE = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs of a database that is away: a connection exception (class 08), the server shutting
down or not yet started (`admin_shutdown`, `crash_shutdown`, `cannot_connect_now`)."""


def _away(error: Exception) -> bool:
    """Whether `error` says the database is away, not that a statement failed on a live one (a
    serialization failure or a lock timeout is an `OperationalError` too, and stays what it is)."""
    if not isinstance(error, psycopg.OperationalError):
        return True  # no connection to be had in time, or one that is closed
    return error.sqlstate is None or error.sqlstate.startswith(_GONE)


class Pool:
    dialect = POSTGRES

    def __init__(self, url: str, size: int) -> None:
        self.pool: ConnectionPool[Db] = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            open=False,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_S},
            name="ptc-emulator",
            timeout=WAIT_S,
            # Connecting again backs off (1, 2, 4 s) for this long, then gives up: the next request
            # that needs a connection starts again at 1 s, so an outage's end is found soon.
            reconnect_timeout=RECONNECT_S,
        )
        self.pool.open(wait=True, timeout=30)
        self.away = False
        """Whether the last statement found the database away."""

    @contextmanager
    def connection(self, wait_s: float | None = None) -> Iterator[Db]:
        """A pooled connection; `StoreUnavailable` when the database does not answer (a broken
        connection, none to be had), after `AWAY_WAIT_S` at most once it was found away."""
        wait = wait_s if wait_s is not None else (AWAY_WAIT_S if self.away else WAIT_S)
        try:
            with self.pool.connection(timeout=wait) as db:
                yield db
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as e:
            if not _away(e):
                raise
            self.away = True
            raise StoreUnavailable(f"the database does not answer ({type(e).__name__})") from e
        self.away = False

    @contextmanager
    def tx(self) -> Iterator[Db]:
        """One transaction, committed at the end (rolled back on an exception)."""
        with self.connection() as db, db.transaction():
            yield db

    def run(self, work: Callable[[Db], T]) -> T:
        with self.tx() as db:
            return work(db)

    def write(self, work: Callable[[Tx], T]) -> T:
        with self.tx() as db:
            return work(_Tx(db))

    def read(self, work: Callable[[Tx], T]) -> T:
        with self.tx() as db:
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot of every table
            return work(_Tx(db))

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        with self.connection() as db:
            return _Tx(db).one(sql, parameters)

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with self.connection() as db:
            return _Tx(db).rows(sql, parameters)

    def glance(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self.one(sql, parameters)  # a reader never waits for a writer here

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        with self.connection() as db:
            return _Tx(db).changed(sql, parameters)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.write(lambda tx: tx.many(sql, rows))
