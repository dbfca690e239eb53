"""The PostgreSQL store's connections: one pool per process (`psycopg_pool`), in autocommit, with
a transaction opened where a write needs one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

__all__ = ["Db", "Pool"]

Db = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


class Pool:
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

    def one(self, sql: Any, parameters: tuple[Any, ...] = ()) -> Any:
        with self.pool.connection() as db:
            return db.execute(sql, parameters).fetchone()

    def rows(self, sql: Any, parameters: tuple[Any, ...] = ()) -> list[Any]:
        with self.pool.connection() as db:
            return db.execute(sql, parameters).fetchall()

    def changed(self, sql: Any, parameters: tuple[Any, ...] = ()) -> int:
        with self.pool.connection() as db:
            return db.execute(sql, parameters).rowcount
