"""Responses created with `background: true`: queued at once, finished by a task of their own.

With a store replicas share (`share`), the replica running a background response holds its
lease (`storage.Leases`), claimed before the queued response is stored and renewed while the task
runs: a replica that reads the response still unfinished while nobody holds its lease knows its
replica died (`orphaned`), and the response failed, as a server that restarts fails the
background responses it was running. A cancel that reaches another replica is stored there (the
store writes a cancel, a finish or a failure only over a response still unfinished, so the first
written is the one every replica reports) and signalled through the store's event log: the
running replica hears it at once and stops the task. Should the signal be lost (its listening
connection broken), the replica looks again when it listens again, and at every renewal.

The database going away does not end a response its replica still runs: a renewal that finds it
away is tried again at the next beat, and the response's end is written again (`keep`) until the
database is back, so the response is what the replica played, not failed as if its replica died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.storage import EventLog, Leases, StoreUnavailable

__all__ = ["CANCELS", "Background", "interrupted"]

log = logging.getLogger(__name__)

CANCELS = "response.cancelled:"
"""The event log's signals of a cancel stored by some replica: this prefix, then the response's id."""

RETRY_S = 0.5
"""How long a background response's end waits, the database away, before it is written again."""


def interrupted() -> dict[str, str]:
    """The error of a background response whose replica died before it finished."""
    return {"code": "server_error", "message": messages.background_replica_stopped()}


class Background:
    """The tasks of background responses still running, by response id."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self.leases: Leases | None = None
        self.lease_s = 30.0
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.cancelled: Callable[[str], bool] = lambda _: False
        """Shared: whether another replica stored the response as cancelled (asked when signalled,
        and at each renewal)."""
        self.events: EventLog | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def share(
        self, leases: Leases, lease_s: float, cancelled: Callable[[str], bool], events: EventLog | None = None
    ) -> None:
        """Other replicas share the store: run every background response under its lease, and stop
        one that another replica was asked to cancel as soon as `events` signals it."""
        self.leases, self.lease_s, self.cancelled, self.events = leases, lease_s, cancelled, events
        if events is not None:
            self._loop = asyncio.get_running_loop()
            events.listen(self._heard)

    async def stopped(self, response_id: str) -> None:
        """The response was stored cancelled: stop its task here, and wherever else it runs (the
        signal to the other replicas sent from a worker thread: it is a database round trip)."""
        if not self.cancel(response_id) and self.events is not None:
            await asyncio.to_thread(self.events.signal, CANCELS + response_id)

    def _heard(self, stream: str | None) -> None:
        """From the event log's listening thread: a cancel signalled (None: perhaps one was lost)."""
        if stream is not None and not (stream.startswith(CANCELS) and stream[len(CANCELS) :] in self._tasks):
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            ids = list(self._tasks) if stream is None else [stream[len(CANCELS) :]]
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._stop_cancelled(ids), loop)

    async def _stop_cancelled(self, ids: list[str]) -> None:
        for response_id in ids:
            if response_id in self._tasks and await asyncio.to_thread(self.cancelled, response_id):
                self.cancel(response_id)

    def claim(self, response_id: str) -> None:
        """Before the queued response is stored: it is never seen unfinished and unheld."""
        if self.leases is not None:
            self.leases.claim(response_id, self.owner, self.lease_s)

    def orphaned(self, response_id: str) -> bool:
        """Shared: the response's replica is gone (not this one's, and nobody renews its lease)."""
        if self.leases is None or response_id in self._tasks:
            return False
        return self.leases.holder(response_id) is None

    def start(self, response_id: str, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        async def run() -> dict[str, Any]:
            beat = asyncio.ensure_future(self._beat(response_id)) if self.leases is not None else None
            try:
                return await work()
            finally:
                self._tasks.pop(response_id, None)
                if beat is not None:
                    beat.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await beat
                if self.leases is not None:  # after the finished response was stored
                    with contextlib.suppress(StoreUnavailable):  # then it expires by itself
                        await asyncio.to_thread(self.leases.release, response_id, self.owner)

        self._tasks[response_id] = asyncio.ensure_future(run())

    async def _beat(self, response_id: str) -> None:
        assert self.leases is not None
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not await asyncio.to_thread(self.leases.claim, response_id, self.owner, self.lease_s):
                    log.warning("ptc-emulator: the lease of background response %s was lost", response_id)
                cancelled = await asyncio.to_thread(self.cancelled, response_id)
            except StoreUnavailable:
                continue  # the database is away: renewed at the next beat
            if cancelled:
                self.cancel(response_id)  # cancelled through another replica: stored so already
                return

    async def keep(self, write: Callable[[], None], *, off_loop: bool = False) -> None:
        """Write a background response's end: at once (in a worker thread when `off_loop`: a long
        conversation's record), and again every `RETRY_S` while the database does not answer, until
        it does (or the task is cancelled)."""
        try:
            if off_loop:
                await asyncio.to_thread(write)
            else:
                write()
            return
        except StoreUnavailable:
            log.warning("ptc-emulator: the database is away; a background response's end is kept once it is back")
        while True:
            await asyncio.sleep(RETRY_S)
            with contextlib.suppress(StoreUnavailable):
                await asyncio.to_thread(write)  # off the loop: each try waits for a connection
                return

    def cancel(self, response_id: str) -> bool:
        """Stop the response's task; True if it was still running."""
        task = self._tasks.pop(response_id, None)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
