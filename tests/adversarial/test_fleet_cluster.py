"""Redis Cluster works as docs/fleet.md says: the URL of one node of a real 3-node cluster.

It used to stay degraded for good (0 syncs, every step a MOVED error): the keys of one step
spread over every node's slots, and the client spoke to one node only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from retrymw import CircuitBreaker, RetryBudget
from retrymw.fleet import RedisFleet
from tests.redis_cluster import RedisCluster, redis_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    directory: Path = tmp_path_factory.mktemp("cluster")
    with redis_cluster(directory) as running:
        yield running


NAMESPACES = ["shop", "billing", "search", "eu", "us", "apac"]


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_a_fleet_on_one_nodes_url_shares_through_the_whole_cluster(
    cluster: RedisCluster, namespace: str
) -> None:
    """Two members on two different nodes' URLs share one budget and one circuit."""
    first = RedisFleet(cluster.urls[0], namespace=namespace, timeout="2s", start=False)
    second = RedisFleet(cluster.urls[1], namespace=namespace, timeout="2s", start=False)
    try:
        earner, spender = RetryBudget(), RetryBudget()
        breakers = [CircuitBreaker(name="api", failure_threshold=2) for _ in range(2)]
        for fleet, budget, breaker in zip(
            (first, second), (earner, spender), breakers, strict=True
        ):
            fleet.attach(budget, target="db")
            fleet.attach(breaker)
        for _ in range(2):
            assert first.sync(), first.statistics()
            assert second.sync(), second.statistics()
        assert first.statistics().members == 2
        for breaker in breakers:
            for _ in range(2):
                assert breaker.allow_request()
                breaker.record_failure()
        for _ in range(2):
            assert first.sync()
            assert second.sync()
        assert first.statistics().open_circuits == 1
        stats = second.statistics()
        assert not stats.degraded
        assert stats.sync_failures == 0
    finally:
        first.close()
        second.close()
