"""Server-sent events on the wire: framing, and a response that notices a client leaving.

Each event is one frame, `event: <type>\\ndata: <json>\\n\\n`; the JSON is on one line (json.dumps
escapes newlines inside strings), so no frame ever needs several `data:` lines. A keep-alive is a
comment frame, `: keep-alive\\n\\n`, which SSE parsers skip.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ptc_emulator.emulator import jsonreply

__all__ = ["KEEP_ALIVE", "EventStreamResponse", "frame", "framed", "long_frame"]

KEEP_ALIVE = b": keep-alive\n\n"

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(event: dict[str, Any]) -> bytes:
    """One event as an SSE frame."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


async def framed(event: dict[str, Any]) -> bytes:
    """`frame(event)`; a long event (`response.completed` of a reply of megabytes) made in a worker
    thread, a piece at a time (`jsonreply`): `frame` held the event loop 20-40 ms for 7 MB. The
    stream awaits it before its next frame, so the frames keep their order."""
    if not jsonreply.long(event):
        return frame(event)
    return await asyncio.to_thread(long_frame, event)


def long_frame(event: dict[str, Any]) -> bytes:
    """`frame(event)`, a piece at a time (in a worker thread)."""
    pieces = (text.encode() for text in jsonreply.texts(event, ensure_ascii=False))
    return b"".join([f"event: {event['type']}\ndata: ".encode(), *pieces, b"\n\n"])


class EventStreamResponse(StreamingResponse):
    """A `text/event-stream` response that stops as soon as the client disconnects.

    Starlette listens for the disconnect only under ASGI spec versions before 2.4 (later ones
    report it when a write fails, which could be a keep-alive interval away); this response
    always listens, so the work behind a stream is cancelled at once. `on_close` runs however
    the stream ends (finished, client gone, server shutting down).
    """

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        on_close: Callable[[], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, media_type="text/event-stream", headers={**HEADERS, **(headers or {})})
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the client went away mid-write
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            if self._on_close is not None:
                self._on_close()
            aclose = getattr(self._content, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
