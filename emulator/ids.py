"""Ids for what the emulator makes: `resp_…`, `call_…`, `prog_…`."""

from __future__ import annotations

import random
import secrets

__all__ = ["new_id"]

_ids = random.Random(secrets.randbits(256))


def new_id(prefix: str) -> str:
    """`resp_…`, `call_…`: 48 hex digits, unique, from a generator seeded once from the OS.

    Ids name things; they guard nothing (what must not be forged is signed, see `signing.py`),
    so they need no system call each."""
    return f"{prefix}_{_ids.getrandbits(192):048x}"
