"""Ids for what the emulator makes: `resp_…`, `call_…`, `prog_…`."""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """`resp_…`, `call_…`: 48 hex digits from the operating system's CSPRNG.

    A stored response is read by its id alone (the hosted API works so), so an id must not be
    guessable from the ids a client has seen: a seeded Mersenne Twister gave its state away after
    104 ids. `secrets` costs one system call per id, about a microsecond."""
    return f"{prefix}_{secrets.token_hex(24)}"
