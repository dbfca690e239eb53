"""The PostgreSQL store's connections: one pool per process (`psycopg_pool`), in autocommit, with
a transaction opened where a write needs one (`sql.Connections`), and PostgreSQL's dialect."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ptc_emulator.emulator.storage.sql import Dialect, Tx

__all__ = ["POSTGRES", "Db", "Pool"]

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


class Pool:
    dialect = POSTGRES

    def __init__(self, url: str, size: int) -> None:
        self.pool: ConnectionPool[Db] = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            open=False,
            kwargs={"autocommit": True},
            name="ptc-emulator",
            timeout=10,  # a request (or the health check) waits this long for a connection, then fails
        )
        self.pool.open(wait=True, timeout=30)

    @contextmanager
    def tx(self) -> Iterator[Db]:
        """One transaction, committed at the end (rolled back on an exception)."""
        with self.pool.connection() as db, db.transaction():
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
        with self.pool.connection() as db:
            return _Tx(db).one(sql, parameters)

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with self.pool.connection() as db:
            return _Tx(db).rows(sql, parameters)

    def changed(self, sql: str, parameters: Sequence[Any] = ()) -> int:
        with self.pool.connection() as db:
            return _Tx(db).changed(sql, parameters)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.write(lambda tx: tx.many(sql, rows))
