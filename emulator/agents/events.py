"""A session's events as its subscribers (an SSE stream each) receive them."""

from __future__ import annotations

import asyncio
from typing import Any

from ptc_emulator.emulator.agents.session import Event

__all__ = ["Subscription"]


class Subscription:
    """A live view of one session's events: the current state first, then what happens next."""

    def __init__(self, harness: Any, session_id: str, snapshot: Event | None) -> None:
        self.harness = harness
        self.session_id = session_id
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        if snapshot is not None:
            self.queue.put_nowait(snapshot)

    async def get(self, timeout: float) -> Event | None:
        """The next event; None when the session is gone or the server stops. TimeoutError when
        nothing happened for `timeout` seconds."""
        return await asyncio.wait_for(self.queue.get(), timeout)

    def close(self) -> None:
        subscribers = self.harness._subscribers.get(self.session_id)
        if subscribers is not None:
            subscribers.discard(self)
            if not subscribers:
                del self.harness._subscribers[self.session_id]
