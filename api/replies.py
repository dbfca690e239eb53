"""A JSON reply, a long one encoded in a worker thread (issue 38).

`JSONResponse` encodes on the event loop: a reply of some megabytes (a hosted `mcp` tool's
listing, a long output) held every other client 20-40 ms. `json_reply` sends the same bytes
and headers; a reply `jsonreply.long` calls long is made by `jsonreply.render` in a worker
thread, a piece at a time. A short one is encoded where it is, as before (cheaper than the hop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse, Response

from ptc_emulator.emulator import jsonreply

__all__ = ["json_reply", "rendered"]


def rendered(value: Any) -> bytes:
    """The reply's bytes (`JSONResponse`'s), made in the worker thread `json_reply` hands it to."""
    return jsonreply.render(value)


async def json_reply(value: Any, headers: Mapping[str, str] | None = None) -> Response:
    """`JSONResponse(value, headers=headers)`, encoded off the event loop when long."""
    if not jsonreply.long(value):
        return JSONResponse(value, headers=headers)
    body = await asyncio.to_thread(rendered, value)
    return Response(body, media_type=JSONResponse.media_type, headers=headers)
