"""A scope carried in the URL: `/scopes/<scope>/v1/...` is `/v1/...` with the scope header set.

Agent code that builds its own client (from `OPENAI_BASE_URL`, the Agents SDK's default client, a
subprocess, a Node program) sends no custom header; a base URL it honours. The prefix is taken off
before anything else sees the path, so every route, the WebSocket endpoint and the admin API are
served under it alike, and the scope reaches the routes as the header they already read.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import StatusError
from ptc_emulator.names import SCOPE_HEADER

__all__ = ["PREFIX", "SCOPE_PATTERN", "unscope"]

PREFIX = "/scopes/"
SCOPE_PATTERN = re.compile(r"[A-Za-z0-9_.:@+=-]{1,200}")
"""What a scope in a URL may hold: the characters a test id or a worker name uses, none the URL
would escape."""

_HEADER = SCOPE_HEADER.encode("latin-1")


def unscope(scope: MutableMapping[str, Any]) -> StatusError | None:
    """Take a `/scopes/<scope>` prefix off an ASGI scope's path, setting the scope header.

    Returns the refusal when the prefix is there but unusable, else None (also when there is
    no prefix: the request is left as it came)."""
    path: str = scope.get("path", "")
    if not path.startswith(PREFIX):
        return None
    name, slash, rest = path[len(PREFIX) :].partition("/")
    if not SCOPE_PATTERN.fullmatch(name):
        return messages.invalid_scope(name)
    headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
    given = [v.decode("latin-1") for k, v in headers if k.lower() == _HEADER]
    if given and given[0] != name:
        return messages.scope_conflict(name, SCOPE_HEADER, given[0])
    if not given:
        headers.append((_HEADER, name.encode("latin-1")))
    scope["headers"] = headers
    new_path = slash + rest if slash else "/"
    scope["path"] = new_path
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        cut = len(PREFIX) + len(name.encode("latin-1"))
        scope["raw_path"] = raw[cut:] or b"/"
    return None
