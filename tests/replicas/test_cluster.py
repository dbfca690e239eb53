"""The throwaway cluster the PostgreSQL tests share."""

from __future__ import annotations

import psycopg

from tests.replicas.cluster import Cluster


def test_each_test_gets_its_own_empty_database(postgres_cluster: Cluster, postgres_url: str) -> None:
    other = postgres_cluster.database()
    assert other != postgres_url
    with psycopg.connect(postgres_url) as db:
        db.execute("CREATE TABLE mine (n int)")
    with psycopg.connect(other) as db:
        found = db.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'mine'").fetchone()
    assert found == (0,)
