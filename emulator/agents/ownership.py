"""Who runs a session's turn when several server processes (replicas) share one store.

In one process the harness's own lock per session is enough. With a shared store
(`Store.shared`), a turn is run by the replica that holds the session's lease (`Store.leases`):
`hold` claims it (waiting while another replica holds it), renews it every third of its length
while the work goes on (the heartbeat), and gives it up at the end. A replica that dies stops
renewing; once the lease has expired, `watch` on any other replica finds the turn nobody holds
and takes it over, going on from the session's last stored state (a program resumes by replay).
Every change of a session is made under its lease, from the document as stored, so a tool result
sent twice, to two replicas, is applied once. A lease cannot stop a replica that stalls past it
(a paused VM renews nothing, then goes on unaware), so a session's saves are fenced as well: each
is written only while the stored session is still at the version it was read at (`Records.put`'s
`expected`, in the harness's `_save_and_publish`).

The database away for a moment ends nothing: a renewal that finds it away is tried again at the
next beat, so the turn gives its lease up when it ends (a lease that cannot be given up then,
the database still away, expires).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable

from ptc_emulator.emulator.storage import Leases, StoreUnavailable

__all__ = ["Ownership"]

log = logging.getLogger(__name__)


class Ownership:
    def __init__(self, leases: Leases, lease_s: float) -> None:
        self.leases = leases
        self.lease_s = lease_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This replica, as the lease rows name it (the host and process id, for an operator)."""

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        delay = 0.005
        while not await asyncio.to_thread(self.leases.claim, key, self.owner, self.lease_s):
            await asyncio.sleep(delay)  # another replica runs it: its turn ends, or its lease expires
            delay = min(delay * 2, 0.1, self.lease_s / 4)
        beat = asyncio.ensure_future(self._beat(key))
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            with contextlib.suppress(StoreUnavailable):  # the database away: the lease expires
                await asyncio.to_thread(self.leases.release, key, self.owner)

    async def _beat(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                renewed = await asyncio.to_thread(self.leases.claim, key, self.owner, self.lease_s)
            except StoreUnavailable:
                continue  # the database is away: renewed at the next beat
            if not renewed:
                log.warning("ptc-emulator: the lease of %s expired before it was renewed: another replica has it", key)

    async def watch(self, unfinished: Callable[[], list[str]], take: Callable[[str], None]) -> None:
        """Every half lease: the work `unfinished` names that no replica holds is `take`n."""
        while True:
            try:
                for key in await asyncio.to_thread(unfinished):
                    if await asyncio.to_thread(self.leases.holder, key) is None:
                        take(key)
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as e:  # the database away for a moment: the next round tries again
                log.warning("ptc-emulator: looking for turns to take over failed: %s", e)
            except Exception:
                log.exception("ptc-emulator: looking for turns to take over failed")
            await asyncio.sleep(self.lease_s / 2)
