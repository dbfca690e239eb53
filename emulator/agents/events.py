"""A session's events as its subscribers (an SSE stream each) receive them.

In one process, `Fanout.publish` puts each event in each subscriber's queue. With a store
replicas share, the events go to the store's event log instead (`storage.EventLog`: rows, then a
notification on commit), and every replica's subscribers read the rows after the last one they
delivered when notified: a stream read from replica B shows what replica A produced, in order,
without polling. The rows are the truth: a notification lost (the listening connection broken
and made again) only delays the next read, which resumes from the last sequence number seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ptc_emulator.emulator.agents.session import Event
from ptc_emulator.emulator.storage import EventLog

__all__ = ["Fanout", "Subscription"]


class Subscription:
    """A live view of one session's events: the current state first, then what happens next."""

    def __init__(self, fanout: Fanout, session_id: str, snapshot: Event | None, after: int = 0) -> None:
        self.fanout = fanout
        self.session_id = session_id
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.after = after
        """Shared: the sequence number of the last event of the log delivered (or skipped as
        already in the snapshot)."""
        self.reading = asyncio.Lock()
        if snapshot is not None:
            self.queue.put_nowait(snapshot)

    async def get(self, timeout: float) -> Event | None:
        """The next event; None when the session is gone or the server stops. TimeoutError when
        nothing happened for `timeout` seconds."""
        return await asyncio.wait_for(self.queue.get(), timeout)

    def close(self) -> None:
        subscribers = self.fanout.subscribers.get(self.session_id)
        if subscribers is not None:
            subscribers.discard(self)
            if not subscribers:
                del self.fanout.subscribers[self.session_id]


class Fanout:
    def __init__(self, log: EventLog | None = None) -> None:
        self.log = log
        self.subscribers: dict[str, set[Subscription]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reads: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.log is not None:
            self.log.listen(self._notified)

    def position(self, session_id: str) -> int:
        """Shared: the log's last sequence number for the session (read it before making a
        snapshot, so that no event after the snapshot is missed; one already in it may come again)."""
        return self.log.last(session_id) if self.log is not None else 0

    def subscribe(self, session_id: str, snapshot: Event | None, after: int | None = None) -> Subscription:
        after = self.position(session_id) if after is None else after
        subscription = Subscription(self, session_id, snapshot, after)
        self.subscribers.setdefault(session_id, set()).add(subscription)
        return subscription

    def publish(self, session_id: str, events: list[Event | None]) -> None:
        """`None` ends the streams (the session is gone)."""
        if not events:
            return
        if self.log is not None:
            self.log.append(session_id, events)
            return
        if self._loop is not None and _running() is not self._loop:
            # from a worker thread (a session saved and published there): an asyncio queue is
            # the loop's alone, so the events are handed to the loop, in order
            self._loop.call_soon_threadsafe(self._deliver, session_id, events)
        else:
            self._deliver(session_id, events)

    def _deliver(self, session_id: str, events: list[Event | None]) -> None:
        for sub in self.subscribers.get(session_id, set()):
            for event in events:
                sub.queue.put_nowait(event)

    def end(self, session_id: str, *, logged: bool = False) -> None:
        """The session's streams ended (`logged`: the shared log's end appended already, by
        `log_end` in a worker thread)."""
        if not logged:
            self.log_end(session_id)
        for sub in self.subscribers.pop(session_id, set()):
            sub.queue.put_nowait(None)

    def log_end(self, session_id: str) -> None:
        """Shared: the end appended to the log, for every replica's streams of the session."""
        if self.log is not None:
            self.log.append(session_id, [None])

    def end_all(self) -> None:
        for task in self._reads:
            task.cancel()
        for subscribers in self.subscribers.values():
            for sub in subscribers:
                sub.queue.put_nowait(None)

    def _notified(self, session_id: str | None) -> None:
        """From the log's listening thread: new rows for this session (None: for any)."""
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._wake, session_id)

    def _wake(self, session_id: str | None) -> None:
        ids = list(self.subscribers) if session_id is None else [session_id]
        for sid in ids:
            for sub in list(self.subscribers.get(sid, ())):
                task = asyncio.ensure_future(self._read(sub))
                self._reads.add(task)
                task.add_done_callback(self._reads.discard)

    async def _read(self, sub: Subscription) -> None:
        log = self.log
        assert log is not None
        async with sub.reading:  # one read at a time per subscriber: each row once, in order
            rows: list[tuple[int, Any]] = await asyncio.to_thread(log.since, sub.session_id, sub.after)
            for seq, event in rows:
                sub.after = seq
                sub.queue.put_nowait(event)


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # a worker thread: no loop runs in it
        return None
