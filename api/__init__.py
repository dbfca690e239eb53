"""The transport: HTTP, SSE and WebSocket around the engine, and nothing that decides.

    app.py          the FastAPI application (`create_app`) and its edge: request ids, the API key,
                    the Host/Origin/content-type checks (`guards.py`), the body limit
    routes/         one module per surface
    errors.py       every error as OpenAI's envelope
    sse.py          server-sent events on the wire
    context.py      what every route needs from a request (`scopes.py`: a scope in the URL)
    journaling.py   each create journaled however it ends, one log line per HTTP request
    disconnect.py   a create whose client goes away is cancelled
    settings.py     the server's settings (`Settings`), what the CLI's flags set (`cli.py`: `main`)
    bounds.py       the one check of every number a flag takes (seconds, bytes, counts)
    proxy.py        the recording proxy in front of a real service
    inspector/      the trace inspector

The names below are loaded when first asked for: the CLI's entry point imports this package
before it knows which command runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptc_emulator.api.app import create_app
    from ptc_emulator.api.cli import main
    from ptc_emulator.api.settings import Settings

__all__ = ["Settings", "create_app", "main"]

_HOMES = {"Settings": "settings", "create_app": "app", "main": "cli"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
