"""Nothing grows without bound: a target evicted by `PerTarget` leaves the fleet (issue 28).

3 000 hosts through ``PerTarget(max_targets=16)`` of each kind used to leave 6 016 targets
attached and keep 9 030 Redis keys alive, each synchroniser step touching all of them.
"""

from __future__ import annotations

import gc
from typing import Any

from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, RetryBudget
from retrymw.fleet import RedisFleet
from tests.fleet.conftest import RedisServer, redis_server

__all__ = ["redis_server"]

HOSTS, CAP = 3000, 16


def test_evicted_targets_are_detached_and_their_keys_left_to_expire(
    redis_server: RedisServer,
) -> None:
    """After 3 000 hosts, the fleet holds at most the live targets of each kind."""
    with RedisFleet(redis_server.url, namespace="evict", start=False) as fleet:
        scoped: list[PerTarget[Any]] = [
            PerTarget(RetryBudget(), max_targets=CAP),
            PerTarget(CircuitBreaker(name="api"), max_targets=CAP),
            PerTarget(AdaptiveThrottle(name="api"), max_targets=CAP),
        ]
        for per_target in scoped:
            fleet.attach(per_target)
        for index in range(HOSTS):
            host = f"host-{index}.example"
            for per_target in scoped:
                per_target.for_target(host)
            if index % 100 == 0:
                assert fleet.sync()
        assert fleet.sync()
        gc.collect()
        assert fleet.statistics().targets <= 3 * CAP, fleet.statistics()
        client = redis_server.client()
        try:
            client.flushall()  # what a step keeps alive is what it writes again
            assert fleet.sync()
            kept = client.dbsize()
        finally:
            client.close()
        assert kept <= 3 * CAP + 8, kept
