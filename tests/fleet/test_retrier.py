"""``Retrier(fleet=...)``: every protection object it uses becomes fleet-wide (real redis)."""

from __future__ import annotations

import pytest

from retrymw import CircuitBreaker, PerTarget, Retrier, RetryBudget, RetryPolicy
from retrymw.fleet import RedisFleet
from retrymw.testing import FakeClock

from .conftest import RedisServer


def test_a_retriers_budget_and_breakers_join_the_fleet(redis_server: RedisServer) -> None:
    with (
        RedisFleet(redis_server.url, namespace="retrier", start=False) as first,
        RedisFleet(redis_server.url, namespace="retrier", start=False) as second,
    ):
        budgets = [RetryBudget(), RetryBudget()]
        retriers = [
            Retrier(
                RetryPolicy(retry_on=ConnectionError, attempts=3),
                budget=budget,
                breaker=PerTarget(CircuitBreaker(name="db", failure_threshold=1000)),
                clock=FakeClock(),
                instruments=(),
                fleet=fleet,
            )
            for budget, fleet in zip(budgets, (first, second), strict=True)
        ]
        attempts = 0

        def down() -> None:
            nonlocal attempts
            attempts += 1
            raise ConnectionError("down")

        for _ in range(2):
            assert first.sync()
            assert second.sync()
        for _ in range(20):  # an outage seen by both processes
            for retrier, fleet in zip(retriers, (first, second), strict=True):
                with pytest.raises(ConnectionError):
                    retrier.call_sync(down)
                fleet.sync()
        # 40 calls: one fleet floor of 10 tokens plus each member's first local token.
        assert 40 + 10 <= attempts <= 40 + 10 + 2
        assert sum(b.statistics().acquired for b in budgets) == attempts - 40
        assert first.statistics().targets == 2  # the budget and the operation's breaker
        assert first.statistics().members == 2
