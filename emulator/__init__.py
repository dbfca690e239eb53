"""The engine, by room: everything the emulator decides, and no HTTP.

    wire/            what the API spells: items, request bodies, tool declarations, stream events
    history/         the history a request continues, and recognising it again
    rules/           the conversation rules: the hosted API's 400s
    tools/           the tool kinds' registry, the toolset, tool search, the MCP client
    model/           what plays a response: the `Model` seam, the PTC runtime every model uses,
                     the scripted model and the model upstream
    responses/       the Responses engine: a create in, a Response out
    conversations/   the Conversations API over storage
    agents/          the Agents API, played on the Responses engine
    storage/         the `Store` seam and its memory, SQLite and PostgreSQL implementations
    journal/         the request journal and its figures
    errors.py        the one exception tree, a class per recurring code
    messages.py      the catalogue: every message the emulator answers with, written once
    caches.py        every cache's registry, which `POST /_emulator/reset` clears
    ids.py, signing.py, jsontext.py: small shared parts

Each room says what it holds, and exports its face, in its own `__init__`. The rooms import one
another without a cycle (the import contracts in pyproject.toml hold the arrows); the names below
are the rooms, imported when asked for, so importing one room does not load the engine.
"""

__all__ = [
    "agents",
    "caches",
    "conversations",
    "errors",
    "history",
    "ids",
    "journal",
    "jsontext",
    "messages",
    "model",
    "responses",
    "rules",
    "signing",
    "storage",
    "tools",
    "wire",
]
