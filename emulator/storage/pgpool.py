"""The PostgreSQL store's connections: one pool per process (`psycopg_pool`), in autocommit, with
a transaction opened where a write needs one (`sql.Connections`), and PostgreSQL's dialect.

A database that does not answer is `StoreUnavailable` (the API's 503), never a driver error: a
broken connection, a connection that cannot be made, none free in time. Once one statement found
it away, the next wait for a connection is short (`AWAY_WAIT_S`), so requests fail at once while
it is away; the pool keeps connecting meanwhile, and the first statement that goes through ends
the outage.

A database that accepts connections but answers nothing (a frozen server or host) leaves no
error to find: a statement would wait on its socket for ever, holding its request and its
thread. Each use of a connection therefore has a deadline (`DEADLINE_S`, `AWAY_DEADLINE_S` once
the database was found away); one watchdog thread cuts the socket of a use past it, and the
statement fails as over a broken connection (`StoreUnavailable`; the pool drops the connection).
It asks the server to cancel the statement too (a cancel request on a connection of its own): a
backend waiting on a lock does not notice its client is gone, and each cut left one behind until
the server refused every connection.

A database that answers ends its own statements first: every pooled connection has a server-side
`lock_timeout` and `statement_timeout` (`SERVER_S`, below `DEADLINE_S`), so a statement waiting on
another session's lock, or running too long, is rolled back by the server and fails as
`StoreBusy` (the 503 `database_busy`: not done, the database answers): a lock is not an outage."""

from __future__ import annotations

import contextlib
import itertools
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import capabilities, pq
from psycopg_pool import ConnectionPool, PoolTimeout

from ptc_emulator.emulator.storage.protocol import StoreBusy, StoreUnavailable, StoreUnreached
from ptc_emulator.emulator.storage.sql import Dialect, Tx
from ptc_emulator.emulator.waiting import NoSpare, waiting

__all__ = [
    "AWAY_DEADLINE_S",
    "AWAY_WAIT_S",
    "CONNECT_S",
    "DEADLINE_S",
    "KEPT_FREE",
    "POSTGRES",
    "SERVER_S",
    "WAIT_S",
    "Db",
    "Lane",
    "Pool",
]

Db = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

POSTGRES = Dialect(
    "postgresql",
    placeholder="%s",
    same="IS NOT DISTINCT FROM",
    order="ord",
    lock_row=" FOR UPDATE",
    head_has="(CAST(head AS jsonb) -> 'metadata' ->> CAST(? AS TEXT)) = CAST(? AS TEXT)",
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


DEADLINE_S = 15.0
"""How long one use of a connection (a statement, or a transaction's statements) may take before
its socket is cut: far past any statement of a database that answers, bounded for one that
accepts connections and answers nothing."""
AWAY_DEADLINE_S = 1.0
"""The deadline once the database was found away: a request fails at once, not after `DEADLINE_S`."""
SERVER_S = 12.0
"""The server's own limit on one statement and on its wait for a lock (`statement_timeout`,
`lock_timeout` of every pooled connection), below `DEADLINE_S` (at most 0.8 of it): a statement
that waits on another session's lock is rolled back by the server, which answered, so nothing is
left behind and the database is not taken for away."""
WATCH_EVERY_S = 0.1
"""How often the watchdog looks at the uses under way."""


class _Watchdog:
    """Cuts the socket of a connection whose use outlived its deadline (see the module docstring).

    A use is a dict entry, made and dropped under a lock; the thread starts with the first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uses: dict[int, tuple[float, Db]] = {}
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, db: Db, deadline_s: float) -> int:
        number = next(self._numbers)
        with self._lock:
            self._uses[number] = (time.monotonic() + deadline_s, db)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="ptc-pg-deadline", daemon=True)
                self._thread.start()
        return number

    def stop(self, number: int) -> bool:
        """End a use: whether it ended in time (False: its socket was cut)."""
        with self._lock:
            return self._uses.pop(number, None) is not None

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_EVERY_S):
            now = time.monotonic()
            with self._lock:  # popped under the lock: a use that ends meanwhile knows it was cut
                due = [self._uses.pop(number)[1] for number, (at, _) in list(self._uses.items()) if at <= now]
            for db in due:
                _cancel_and_cut(db)


def _cancel_and_cut(db: Db) -> None:
    """Cut the connection's socket, and ask the server to cancel its statement (a cancel request
    on a connection of its own, sent from a thread of its own: a frozen server answers it only
    within the connection's `connect_timeout`). A backend waiting on a lock does not notice its
    client is gone: cut alone, it stayed in the lock wait, holding one of the server's
    connections; cancelled, it ends its statement, finds the socket closed, and exits."""
    try:
        asking: Any = db.pgconn.cancel_conn() if capabilities.has_cancel_safe() else db.pgconn.get_cancel()
    except (psycopg.Error, OSError):
        asking = None
    _cut(db)
    if asking is not None:
        threading.Thread(target=_cancel, args=(asking,), name="ptc-pg-cancel", daemon=True).start()


def _cancel(asking: Any) -> None:
    with contextlib.suppress(Exception):
        if hasattr(asking, "start"):
            try:
                _cancel_polled(asking, time.monotonic() + CONNECT_S)
            finally:
                asking.finish()
        else:
            asking.cancel()


def _cancel_polled(asking: Any, deadline: float) -> None:
    """Send libpq's cancel request without blocking, the waits for its socket made here, which
    let the process's other threads run. (libpq's blocking cancel held the interpreter's lock for
    its whole wait: with the database frozen, every thread of the process, the event loop
    included, stood still for `connect_timeout` at each cancel the watchdog sent.)"""
    asking.start()
    with selectors.DefaultSelector() as waiting:
        while True:
            status = asking.poll()
            if status in (pq.PollingStatus.OK, pq.PollingStatus.FAILED):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return  # the server did not take it in time; the socket is cut anyway
            event = selectors.EVENT_READ if status == pq.PollingStatus.READING else selectors.EVENT_WRITE
            waiting.register(asking.socket, event)
            try:
                waiting.select(left)
            finally:
                waiting.unregister(asking.socket)


def _cut(db: Db) -> None:
    """Shut the connection's socket down (through a duplicate of its descriptor, which alone is
    closed here): the statement waiting on it reads the end of the connection and fails."""
    with contextlib.suppress(OSError, psycopg.Error):
        duplicate = socket.socket(fileno=os.dup(db.fileno()))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


_GONE = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs of a database that is away: a connection exception (class 08), the server shutting
down or not yet started (`admin_shutdown`, `crash_shutdown`, `cannot_connect_now`)."""


_ENDED_BY_SERVER = ("55P03", "57014")
"""SQLSTATEs of a statement the server ended at its own limits (`lock_not_available`: its
`lock_timeout`; `query_canceled`: its `statement_timeout`), rolled back: the database answers."""


def _away(error: Exception) -> bool:
    """Whether `error` says the database is away, not that a statement failed on a live one (a
    serialization failure or a lock timeout is an `OperationalError` too, and stays what it is)."""
    if not isinstance(error, psycopg.OperationalError):
        return True  # no connection to be had in time, or one that is closed
    return error.sqlstate is None or error.sqlstate.startswith(_GONE)


class _Uses:
    """Statements and transactions over `connection()` (the pool's, or a lane's)."""

    dialect = POSTGRES

    def connection(self, wait_s: float | None = None, deadline_s: float | None = None) -> Any:
        raise NotImplementedError

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


KEPT_FREE = 2
"""How many of the pool's connections one lane (one part of the store: its tables) leaves to the
others: a part may hold `size - KEPT_FREE` connections at once (at least one)."""


def _limit(db: Db, limit: str) -> None:
    """A new connection's server-side limits (`SERVER_S`): its session's, as it is in autocommit."""
    db.execute(
        b"SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false)", (limit, limit)
    )


class Pool(_Uses):
    def __init__(self, url: str, size: int) -> None:
        self.size = size
        limit = f"{round(min(SERVER_S, DEADLINE_S * 0.8) * 1000)}ms"
        self.pool: ConnectionPool[Db] = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            open=False,
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_S,
                "application_name": "ptc-emulator",
            },
            # Set on each new connection (a `SET`, not a startup option: a connection pooler in
            # between may refuse those).
            configure=lambda db: _limit(db, limit),
            name="ptc-emulator",
            timeout=WAIT_S,
            # Connecting again backs off (1, 2, 4 s) for this long, then gives up: the next request
            # that needs a connection starts again at 1 s, so an outage's end is found soon.
            reconnect_timeout=RECONNECT_S,
        )
        self.pool.open(wait=True, timeout=30)
        self.watchdog = _Watchdog()
        self.away = False
        """Whether the last statement found the database away."""
        self.answered_at = time.monotonic()
        """When a use of a connection last ended in time (the database answered)."""

    def wait_s(self) -> float:
        """How long a statement waits for a connection now."""
        return AWAY_WAIT_S if self.away else WAIT_S

    def lane(self, name: str) -> Lane:
        """A part's share of the pool (`Lane`)."""
        return Lane(self, name, max(1, self.size - KEPT_FREE))

    @contextmanager
    def connection(self, wait_s: float | None = None, deadline_s: float | None = None) -> Iterator[Db]:
        """A pooled connection; `StoreUnavailable` when the database does not answer (a broken
        connection, none to be had, a use past its deadline), after `AWAY_WAIT_S` at most once it
        was found away; `StoreBusy` when none was free in time while the database answers (others'
        uses ended in time meanwhile: the connections are all lent, not lost)."""
        wait = wait_s if wait_s is not None else self.wait_s()
        deadline = deadline_s if deadline_s is not None else (AWAY_DEADLINE_S if self.away else DEADLINE_S)
        cut = False
        try:
            with self.pool.connection(timeout=wait) as db:
                use = self.watchdog.start(db, deadline)
                try:
                    yield db
                finally:
                    if not self.watchdog.stop(use):
                        cut = True
                        db.close()  # cut: the pool drops it rather than lend it again
                    else:
                        self.answered_at = time.monotonic()
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as e:
            sqlstate = getattr(e, "sqlstate", None)
            if not cut and sqlstate in _ENDED_BY_SERVER:
                self.away = False  # the server ended the statement: it answers
                raise StoreBusy(f"the server ended a statement at its limit ({sqlstate}); rolled back") from e
            if not cut and not _away(e):
                raise
            if isinstance(e, PoolTimeout) and not self.away and time.monotonic() - self.answered_at < wait:
                raise StoreBusy(f"no connection free in {wait:g} s; the database answers") from e
            self.away = True
            if isinstance(e, PoolTimeout):  # no connection was lent: nothing was sent
                raise StoreUnreached(f"the database does not answer ({type(e).__name__})") from e
            raise StoreUnavailable(f"the database does not answer ({type(e).__name__})") from e
        self.away = False


class Lane(_Uses):
    """The uses of one part of the store (`name`: the responses, the conversations, the
    scenarios...), at most `share` connections of the pool at once: statements waiting on a lock
    of that part's tables (a schema migration's, an `ALTER`, a `VACUUM FULL`) pile up to `share`,
    and the next ones of the part wait for their turn, so the pool keeps `KEPT_FREE` connections
    for the other parts. A turn not had in the pool's wait is `StoreBusy` (the database answers;
    `StoreUnavailable` once it was found away)."""

    def __init__(self, pool: Pool, name: str, share: int) -> None:
        self.pool = pool
        self.name = name
        self.share = share
        self._turns = threading.BoundedSemaphore(share)
        self.waiting = 0
        """How many uses wait for their turn now."""
        self._counting = threading.Lock()

    def _wait_for_turn(self, wait: float) -> bool:
        """Wait up to `wait` for a turn, with a spare thread lent to the worker threads' pool
        meanwhile (`emulator.waiting`): the requests waiting on a locked part hold none of the
        threads the other parts' requests need; `NoSpare` (not waited) when none can be lent."""
        with self._counting:
            self.waiting += 1
        try:
            with waiting():
                return self._turns.acquire(timeout=wait)
        finally:
            with self._counting:
                self.waiting -= 1

    @contextmanager
    def connection(self, wait_s: float | None = None, deadline_s: float | None = None) -> Iterator[Db]:
        wait = wait_s if wait_s is not None else self.pool.wait_s()
        began = time.monotonic()
        if not self._turns.acquire(blocking=False):
            try:
                turned = self._wait_for_turn(wait)
            except NoSpare:  # (every spare thread lent: waiting would hold a worker thread)
                if self.pool.away:
                    raise StoreUnavailable(f"the database does not answer (no turn for {self.name})") from None
                raise StoreBusy(f"{self.share} connections of {self.name} busy, no spare thread to wait in") from None
            if not turned:
                if self.pool.away:
                    raise StoreUnavailable(f"the database does not answer (no turn for {self.name})")
                raise StoreBusy(f"{self.share} connections of {self.name} busy for {wait:g} s")
        try:
            left = max(wait - (time.monotonic() - began), AWAY_WAIT_S)
            with self.pool.connection(wait_s=left, deadline_s=deadline_s) as db:
                yield db
        finally:
            self._turns.release()
