"""The synchroniser survives the store, and every store reply is checked (issue 28, fleet).

A `RespServer` proxy in front of a real redis-server answers the fleet's scripts with wrong
types, huge, negative or non-numeric values; the fleet must report itself degraded, decide on
its conservative local share, keep its thread alive and rejoin once the store answers right.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from retrymw import AdaptiveThrottle, CircuitBreaker, RetryBudget
from retrymw.fleet import RedisFleet
from tests.fleet.conftest import RedisServer, redis_server
from tests.fleet.faults import Tamper, mutate_numbers, proxy, wait_for
from tests.resp_server import Error, Simple

__all__ = ["redis_server"]

WRONG_TYPES = [
    pytest.param(lambda reply: b"garbage", id="string"),
    pytest.param(lambda reply: 7, id="integer"),
    pytest.param(lambda reply: None, id="nil"),
    pytest.param(lambda reply: [], id="empty-array"),
    pytest.param(lambda reply: [b"a", b"b", b"c", b"d", b"e", b"f"], id="array-of-words"),
    pytest.param(lambda reply: [[1], [2], [3], [4], [5], [6]], id="nested-arrays"),
    pytest.param(lambda reply: Simple("OK"), id="status"),
    pytest.param(lambda reply: [None] * 6, id="array-of-nils"),
    pytest.param(lambda reply: mutate_numbers(reply, lambda n: "nan"), id="nan-numbers"),
]


def _protections(fleet: RedisFleet) -> list[Any]:
    made = [RetryBudget(), CircuitBreaker(name="api"), AdaptiveThrottle(name="api")]
    for protection in made:
        fleet.attach(protection, target="api")
    return made


@pytest.mark.parametrize("answer", WRONG_TYPES)
def test_a_wrong_type_reply_never_kills_the_synchroniser(
    redis_server: RedisServer, answer: Any
) -> None:
    """Wrong-type replies: degraded while they last, then the same thread syncs again."""
    tamper = Tamper(answer)
    with (
        proxy(redis_server, tamper) as front,
        RedisFleet(front.url, namespace="supervised", sync_interval="50ms", timeout="1s") as fleet,
    ):
        kept = _protections(fleet)
        assert wait_for(lambda: fleet.statistics().syncs >= 1, 10.0)
        tamper.on.set()
        assert wait_for(lambda: fleet.statistics().degraded, 10.0), fleet.statistics()
        failures = fleet.statistics().sync_failures
        assert wait_for(lambda: fleet.statistics().sync_failures >= failures + 2, 10.0)
        assert fleet.statistics().degraded  # it says so while the replies are wrong
        tamper.on.clear()
        syncs = fleet.statistics().syncs
        assert wait_for(lambda: fleet.statistics().syncs >= syncs + 2, 10.0), fleet.statistics()
        assert not fleet.statistics().degraded
        assert tamper.tampered >= 2
        del kept


def test_an_error_reply_is_a_failed_step_too(redis_server: RedisServer) -> None:
    """An error reply to the step (a script error, OOM) is a failure, and the fleet rejoins."""
    tamper = Tamper(lambda reply: Error("OOM command not allowed"))
    with (
        proxy(redis_server, tamper) as front,
        RedisFleet(front.url, namespace="errors", sync_interval="50ms", timeout="1s") as fleet,
    ):
        kept = _protections(fleet)
        assert wait_for(lambda: fleet.statistics().syncs >= 1, 10.0)
        tamper.on.set()
        assert wait_for(lambda: fleet.statistics().degraded, 10.0)
        tamper.on.clear()
        assert wait_for(lambda: not fleet.statistics().degraded, 10.0)
        del kept


def _stepped(front_url: str) -> tuple[RedisFleet, RetryBudget]:
    fleet = RedisFleet(front_url, namespace="checked", timeout="1s", start=False)
    budget = RetryBudget()
    fleet.attach(budget, target="db")
    return fleet, budget


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda n: 10**30, id="huge"),
        pytest.param(lambda n: 2**70, id="beyond-int64"),
        pytest.param(lambda n: -3, id="negative"),
        pytest.param(lambda n: "x", id="string"),
    ],
)
def test_budget_grants_from_a_lying_store_are_refused(
    redis_server: RedisServer, change: Any
) -> None:
    """Huge, negative or non-numeric grants buy no retry beyond the local share."""
    tamper = Tamper(lambda reply: mutate_numbers(reply, change))
    with proxy(redis_server, tamper) as front:
        fleet, budget = _stepped(front.url)
        try:
            assert fleet.sync()
            tamper.on.set()
            granted = 0
            for _ in range(20):
                fleet.sync()  # never raises, whatever the reply
                granted += sum(budget.try_acquire() for _ in range(100))
            stats = fleet.statistics()
            assert stats.degraded
            assert stats.members >= 0
            # The local share: the last capacity seen (10) over the members seen (1).
            assert granted <= 10, granted
        finally:
            fleet.close()


def test_pooled_counts_from_a_lying_store_never_shed_healthy_calls(
    redis_server: RedisServer,
) -> None:
    """A reply claiming a fleet of failures (every number huge, or negative) sheds nothing."""
    changes: list[Callable[[int], int]] = [lambda n: 10**15, lambda n: -(10**6)]
    for change in changes:
        tamper = Tamper(functools.partial(mutate_numbers, change=change))
        with proxy(redis_server, tamper) as front:
            fleet = RedisFleet(front.url, namespace="pooled", timeout="1s", start=False)
            throttle = AdaptiveThrottle(name="api")
            fleet.attach(throttle)
            try:
                for _ in range(50):
                    assert throttle.allow_request()
                    throttle.record_success()
                assert fleet.sync()
                tamper.on.set()
                for _ in range(3):
                    fleet.sync()
                shed = sum(not throttle.allow_request() for _ in range(1000))
                assert shed == 0
                assert fleet.statistics().members >= 0
            finally:
                fleet.close()
