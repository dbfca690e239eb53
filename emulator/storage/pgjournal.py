"""The request journal in the PostgreSQL store: one journal for every replica, so the inspector of
any replica shows every replica's requests, numbered in one order (a database sequence).

Its tables are UNLOGGED (see `pgschema.py`): the bodies it keeps, `store: false` ones too, never
reach the write-ahead log, and a crash of the database empties it, as a process's journal is
gone with the process. The bounds hold across replicas: each append takes the one row of
`journal_totals` for update, adds its entry, and removes the oldest while the journal is over
either bound (the newest always stays).

The journal's entries are the journal package's objects: `codec` turns one into JSON text and
back (the journal sets it; plain JSON values until then).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.storage.pgpool import Db, Lane, Pool

__all__ = ["PostgresJournal"]


class PostgresJournal:
    def __init__(self, db: Lane | Pool, limit: int = 10_000, max_bytes: int = 64 * 2**20) -> None:
        self._db = db
        self.limit = limit
        self.max_bytes = max_bytes
        self.codec: tuple[Callable[[Any], str], Callable[[str], Any]] = (json.dumps, json.loads)

    @property
    def bytes(self) -> int:
        row = self._db.one("SELECT bytes FROM journal_totals")
        return int(row[0]) if row else 0

    def next_seq(self) -> int:
        row = self._db.one("SELECT nextval('journal_seq')")
        return int(row[0])

    def append(self, scope: str | None, entry: Any, size: int) -> None:
        seq = getattr(entry, "seq", None)

        def work(db: Db) -> None:
            number = seq if isinstance(seq, int) and seq > 0 else _numbered(entry, db)
            text = self.codec[0](entry)  # (with its number; before the totals' row is locked)
            totals = db.execute("SELECT entries, bytes FROM journal_totals FOR UPDATE").fetchone()
            entries, kept = (int(totals[0]), int(totals[1])) if totals else (0, 0)
            db.execute(
                "INSERT INTO journal (seq, scope, size, entry) VALUES (%s, %s, %s, %s)", (number, scope, size, text)
            )
            entries, kept = entries + 1, kept + size
            while entries > 1 and (entries > self.limit or kept > self.max_bytes):
                gone = db.execute(
                    "DELETE FROM journal WHERE seq = (SELECT MIN(seq) FROM journal) RETURNING size"
                ).fetchone()
                if gone is None:
                    break
                entries, kept = entries - 1, kept - int(gone[0])
            db.execute("UPDATE journal_totals SET entries = %s, bytes = %s", (entries, kept))

        self._db.run(work)

    def entries(self, scope: str | None = None) -> list[Any]:
        if scope is None:
            rows = self._db.rows("SELECT entry FROM journal ORDER BY seq")
        else:
            rows = self._db.rows("SELECT entry FROM journal WHERE scope = %s ORDER BY seq", (scope,))
        load = self.codec[1]
        return [load(row[0]) for row in rows]

    def clear(self, scope: str | None = None) -> int:
        def work(db: Db) -> int:
            db.execute("SELECT 1 FROM journal_totals FOR UPDATE")
            if scope is None:
                gone = db.execute("DELETE FROM journal").rowcount
            else:
                gone = db.execute("DELETE FROM journal WHERE scope = %s", (scope,)).rowcount
            db.execute(
                "UPDATE journal_totals SET entries = (SELECT COUNT(*) FROM journal), "
                "bytes = (SELECT COALESCE(SUM(size), 0) FROM journal)"
            )
            return gone

        return self._db.run(work)


def _numbered(entry: Any, db: Db) -> int:
    """The next number of the sequence, given to `entry` (an entry is numbered as it is written,
    in the order the journal's writes commit)."""
    number = int(db.execute("SELECT nextval('journal_seq')").fetchone()[0])  # type: ignore[index]
    if hasattr(entry, "seq"):
        entry.seq = number
    return number
