"""What replicas on one database must agree on before they serve: one secret.

A program resumes on any replica from what another signed, so a replica signing with another
secret would refuse every program that crosses it, and every replica would refuse its. The
replicas running on a database hold one lease together (`storage.Leases`, key `SECRET_LEASE`),
owned by a fingerprint of their secret (an HMAC of a fixed text: it tells nothing of the secret):
each claims it as it starts and renews it while it runs. A replica whose fingerprint differs
finds the lease held and refuses to start, naming why (`join`). Refusing, rather than starting
and reporting itself unhealthy: such a replica can serve nothing right, and a load balancer that
found it healthy a moment before would send it traffic; a process that exits is what a process
manager and a deployment's logs show at once.

Changing the secret: stop every replica, wait `--lease-seconds` (the lease expires), start them
all with the new one.
"""

from __future__ import annotations

import asyncio
import logging

from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.storage import Leases, StoreUnavailable

__all__ = ["SECRET_LEASE", "OneSecret", "SecretMismatch"]

log = logging.getLogger("ptc_emulator")

SECRET_LEASE = "replicas:secret"


class SecretMismatch(StoreUnavailable):
    """The replicas running on the database sign with another secret."""


def fingerprint(signer: Signer) -> str:
    return "secret:" + signer.token("replicas", "one secret for every replica", length=32)


class OneSecret:
    """This replica's share of the secret's lease."""

    def __init__(self, leases: Leases, signer: Signer, lease_s: float) -> None:
        self.leases = leases
        self.owner = fingerprint(signer)
        self.lease_s = lease_s
        self.problem: str | None = None
        """Why this replica cannot serve, once a renewal found the lease held by another secret."""

    def join(self) -> None:
        """Claim the lease, or raise `SecretMismatch`."""
        if not self.leases.claim(SECRET_LEASE, self.owner, self.lease_s):
            raise SecretMismatch(MISMATCH)

    async def keep(self) -> None:
        """Renew the lease while the replica runs (a third of its time, as the other leases)."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                held = await asyncio.to_thread(self.leases.claim, SECRET_LEASE, self.owner, self.lease_s)
            except StoreUnavailable:
                continue  # the database is away: health says so; renewed when it is back
            if not held and self.problem is None:
                log.error("ptc-emulator: %s", MISMATCH)
            self.problem = None if held else MISMATCH


MISMATCH = (
    "the replicas running on this database sign with another secret: give every replica the same "
    "--secret (or PTC_EMULATOR_SECRET); to change it, stop them all and wait --lease-seconds"
)
