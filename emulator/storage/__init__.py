"""Storage: the one seam every piece of shared state goes through (see `protocol.py`).

Nothing outside this package imports its modules: the names below are the seam (checked by
import-linter).

`open_store(where, data_dir)` makes a `Store` of one of the kinds registered in `STORES`:
`memory` (nothing written, `memory.py`), `sqlite` (the file `responses.sqlite3` in `data_dir`,
`sqlite.py`) or a `postgresql://...` URL (a database any number of server processes share,
`postgres.py`). The SQL stores share their statements (`sql.py`), each in its own dialect.

Adding a store: one module of this package with a function `open_at(where, data_dir) -> Store`
(for a SQL database: its `sql.Dialect`, its connection handling and its schema, the parts from
`sql.SqlParts`), and one `register_store(StoreKind(...))` line below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ptc_emulator.emulator.storage.memory import MemoryJournal
from ptc_emulator.emulator.storage.pgschema import SchemaTooNew
from ptc_emulator.emulator.storage.protocol import (
    Conversations,
    Counts,
    EventLog,
    JournalLog,
    Leases,
    Records,
    Responses,
    ScenarioChanges,
    Scenarios,
    Store,
    StoreBusy,
    StoredConversation,
    StoredResponse,
    StoredScenario,
    StoreUnavailable,
    StoreUnreached,
    Turn,
    TurnRefused,
    visible,
)
from ptc_emulator.emulator.storage.responses import ConnectionStore, ResponseStore, view
from ptc_emulator.emulator.storage.sqlite import FILENAME, DataDirHeld

__all__ = [
    "FILENAME",
    "STORES",
    "ConnectionStore",
    "Conversations",
    "Counts",
    "DataDirHeld",
    "EventLog",
    "JournalLog",
    "Leases",
    "MemoryJournal",
    "ResponseStore",
    "Records",
    "Responses",
    "ScenarioChanges",
    "Scenarios",
    "SchemaTooNew",
    "Store",
    "StoredConversation",
    "StoredResponse",
    "StoredScenario",
    "StoreBusy",
    "StoreKind",
    "StoreUnavailable",
    "StoreUnreached",
    "Turn",
    "TurnRefused",
    "is_postgres_url",
    "open_store",
    "ping",
    "register_store",
    "store_kind",
    "view",
    "visible",
]


@dataclass(frozen=True)
class StoreKind:
    """One kind of store `open_store` (and `serve --store`) opens."""

    name: str
    """What `--store` says (`sqlite`); for a store at a URL, its kind (`postgresql`)."""
    module: str
    """The module that opens it (`open_at(where, data_dir)`): one of this package (`sqlite`), or
    any by its full name. Imported when a store of the kind is first opened, so a database's
    driver loads in the servers that use it only."""
    schemes: tuple[str, ...] = ()
    """For a store at a URL: the schemes it is opened by (`postgresql`, `postgres`)."""

    def opens(self, where: str) -> bool:
        if self.schemes:
            return where.startswith(tuple(f"{scheme}://" for scheme in self.schemes))
        return where == self.name

    @property
    def spelled(self) -> str:
        return f"a {self.schemes[0]}:// URL" if self.schemes else repr(self.name)


STORES: dict[str, StoreKind] = {}
"""Every kind of store `open_store` opens, by name."""


def register_store(kind: StoreKind) -> StoreKind:
    """Add a kind of store to the choices (its name must be new)."""
    if kind.name in STORES:
        raise ValueError(f"a store named {kind.name!r} is registered already")
    STORES[kind.name] = kind
    return kind


register_store(StoreKind("sqlite", "sqlite"))
register_store(StoreKind("memory", "memory"))
register_store(StoreKind("postgresql", "postgres", schemes=("postgresql", "postgres")))


def store_kind(where: str) -> StoreKind:
    """The registered kind that opens `where`; a `ValueError` naming the choices if none does."""
    for kind in STORES.values():
        if kind.opens(where):
            return kind
    choices = [kind.spelled for kind in STORES.values()]
    raise ValueError(f"unknown store {where!r}: {', '.join(choices[:-1])} or {choices[-1]}")


def open_store(kind: str, data_dir: Path | None = None) -> Store:
    """A store of the registered kind that opens `kind` (`memory`, `sqlite`, a `postgresql://`
    URL): the `sqlite` store in `data_dir` (made if missing), the store in the PostgreSQL
    database at the URL (its schema made or migrated first)."""
    found = store_kind(kind)
    module = found.module if "." in found.module else f"{__name__}.{found.module}"
    store: Store = importlib.import_module(module).open_at(kind, data_dir)
    return store


def is_postgres_url(kind: str) -> bool:
    return STORES["postgresql"].opens(kind)


def ping(store: Store) -> bool:
    """Whether the store's database answers (a store in this process always does)."""
    check = getattr(store, "ping", None)
    return bool(check()) if callable(check) else True
