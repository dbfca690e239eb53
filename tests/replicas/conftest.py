"""The PostgreSQL tests' cluster: one per test session (per xdist worker), started on first use.

`postgres_cluster` skips, saying why, where no cluster can start (no server installed; root
without a `postgres` user); in CI, which runs as root with the server installed by `make test`,
they run. `postgres_url` is a fresh empty database on it for each test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.replicas.cluster import Cluster, why_not


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    reason = why_not()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)
    with Cluster.started() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.database()
