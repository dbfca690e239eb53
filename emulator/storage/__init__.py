"""Storage: the one seam every piece of shared state goes through (see `protocol.py`).

Nothing outside this package imports its modules: the names below are the seam (checked by
import-linter).

`open_store(kind, data_dir)` makes a `Store`: `memory` (nothing written), `sqlite` (the file
`responses.sqlite3` in `data_dir`) or a `postgresql://...` URL (a database any number of server
processes share: `postgres.py`).
"""

from __future__ import annotations

from pathlib import Path

from ptc_emulator.emulator.storage.memory import MemoryJournal, MemoryStore
from ptc_emulator.emulator.storage.pgschema import SchemaTooNew
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
    EventLog,
    JournalLog,
    Leases,
    Records,
    Responses,
    Scenarios,
    Store,
    StoredConversation,
    StoredResponse,
    StoredScenario,
    StoreUnavailable,
)
from ptc_emulator.emulator.storage.responses import ConnectionStore, ResponseStore, view
from ptc_emulator.emulator.storage.sqlite import SqliteStore

__all__ = [
    "FILENAME",
    "ConnectionStore",
    "Conversations",
    "EventLog",
    "JournalLog",
    "Leases",
    "MemoryJournal",
    "ResponseStore",
    "Records",
    "Responses",
    "Scenarios",
    "SchemaTooNew",
    "Store",
    "StoredConversation",
    "StoredResponse",
    "StoredScenario",
    "StoreUnavailable",
    "is_postgres_url",
    "open_store",
    "ping",
    "view",
]

FILENAME = "responses.sqlite3"
"""The SQLite store's file in the data directory."""


def open_store(kind: str, data_dir: Path | None = None) -> Store:
    """A `memory` store, the `sqlite` store in `data_dir` (made if missing), or the store in the
    PostgreSQL database at a `postgresql://` URL (its schema made or migrated first)."""
    if is_postgres_url(kind):
        # Imported here: psycopg is loaded by the servers that use it only.
        from ptc_emulator.emulator.storage.postgres import open_postgres

        return open_postgres(kind)
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        if data_dir is None:
            raise ValueError("a sqlite store needs a data directory")
        return SqliteStore(data_dir / FILENAME)
    raise ValueError(f"unknown store {kind!r}: 'memory', 'sqlite' or a postgresql:// URL")


def is_postgres_url(kind: str) -> bool:
    return kind.startswith(("postgresql://", "postgres://"))


def ping(store: Store) -> bool:
    """Whether the store's database answers (a store in this process always does)."""
    check = getattr(store, "ping", None)
    return bool(check()) if callable(check) else True
