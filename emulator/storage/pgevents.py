"""The event log of the PostgreSQL store: what a session's SSE stream shows, whichever replica
produced it.

`append` numbers a stream's events after its last under a transaction-level advisory lock on the
stream (so the numbers are in commit order: a reader that saw number n never later finds a
smaller one committed) and sends `NOTIFY ptc_events, '<stream>'` in the same transaction,
delivered when it commits; `signal` sends the notification alone. `listen` keeps one connection
per process in `LISTEN ptc_events` on a thread of its own, and tells each listener every
notification; when that connection breaks it is made again, and every stream is reported as
changed, since notifications sent meanwhile were lost (the rows, and what a signal was about, were
not).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from ptc_emulator.emulator.storage.pgpool import POSTGRES, Db, Lane, Pool
from ptc_emulator.emulator.storage.sql import Statements, record_write

__all__ = ["CHANNEL", "PostgresEvents"]

CHANNEL = "ptc_events"

log = logging.getLogger(__name__)


def _append(db: Db, stream: str, events: list[Any]) -> None:
    """A stream's events numbered after its last and notified, in the caller's transaction."""
    db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (stream,))
    row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM stream_events WHERE stream = %s", (stream,)).fetchone()
    last = int(row[0]) if row else 0
    with db.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO stream_events (stream, seq, event) VALUES (%s, %s, %s)",
            [(stream, last + n, json.dumps(event)) for n, event in enumerate(events, 1)],
        )
    db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, stream))


class PostgresEvents:
    def __init__(self, db: Lane | Pool, url: str) -> None:
        self._db = db
        self._url = url
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[str | None], None]] = []

    def append(self, stream: str, events: list[Any]) -> None:
        self._db.run(lambda db: _append(db, stream, events))

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
        """The document put in `records` and the events appended in one transaction (an Agents API
        session's change and its events): before, the session was stored, then its events, and
        the session taken back if they failed, which could fail too and leave a turn in progress.
        With `expected`, only while the record is still at that version: False, and neither
        written, when it moved on or is gone (a replica stalled past its lease, whose turn another
        took over, wrote its stale step over the other's)."""
        statement, row = record_write(Statements.of(POSTGRES), kind, record_id, document, head, expected)

        def work(db: Db) -> bool:
            if db.execute(statement.encode(), row).rowcount == 0 and expected is not None:
                return False
            if events:
                _append(db, stream, events)
            return True

        return self._db.run(work)

    def last(self, stream: str) -> int:
        row = self._db.one("SELECT COALESCE(MAX(seq), 0) FROM stream_events WHERE stream = %s", (stream,))
        return int(row[0]) if row else 0

    def since(self, stream: str, after: int) -> list[tuple[int, Any]]:
        rows = self._db.rows(
            "SELECT seq, event FROM stream_events WHERE stream = %s AND seq > %s ORDER BY seq", (stream, after)
        )
        return [(int(seq), json.loads(event)) for seq, event in rows]

    def signal(self, stream: str) -> None:
        self._db.one("SELECT pg_notify(%s, %s)", (CHANNEL, stream))

    def listen(self, notified: Callable[[str | None], None]) -> None:
        self._listeners.append(notified)
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._listen, args=(self._tell,), name="ptc-events", daemon=True)
        self._thread.start()

    def _tell(self, stream: str | None) -> None:
        for notified in list(self._listeners):
            try:
                notified(stream)
            except Exception:  # one listener's failure is not another's
                log.exception("ptc-emulator: a listener of the event log failed")

    def _listen(self, notified: Callable[[str | None], None]) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    if not first:
                        notified(None)  # what was sent while no connection listened
                    first = False
                    while not self._stop.is_set():
                        for note in connection.notifies(timeout=0.5):
                            notified(note.payload)
            except psycopg.Error as e:
                if self._stop.is_set():
                    return
                log.warning("ptc-emulator: listening for events across replicas broke (%s); listening again", e)
                self._stop.wait(0.2)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
