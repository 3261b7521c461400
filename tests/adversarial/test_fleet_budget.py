"""A shared budget is at least as strict as a local one, and one member cannot skew the fleet.

Issue 28, fleet rows:

* one process in a cold outage after one success: its local budget lends its floor credit
  (2 retries); shared through the fleet, the same budget lent its whole floor (10), so fewer
  than 5 processes retried more with the fleet than without;
* a member reporting 10^9 successes funded 825 retries in a 3 s outage, and one reporting
  10^12 requests made honest members shed 88% of their healthy calls.

Members here are `RedisFleet` instances stepped by hand (``start=False``), each its own member
of the namespace, on a real redis-server.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable

import pytest

from retrymw import AdaptiveThrottle, RetryBudget
from retrymw._protect.throttle import AdaptiveThrottleStatistics
from retrymw.fleet import RedisFleet
from retrymw.testing import FakeClock
from tests.fleet.conftest import RedisServer, redis_server

__all__ = ["redis_server"]


def _members(server: RedisServer, count: int, namespace: str) -> list[RedisFleet]:
    return [RedisFleet(server.url, namespace=namespace, start=False) for _ in range(count)]


def _cold_outage_retries(server: RedisServer, processes: int) -> int:
    """Retries ``processes`` members' shared budget grants in an outage after one success."""
    fleets = _members(server, processes, f"cold-{uuid.uuid4().hex[:6]}")
    try:
        budgets = [RetryBudget() for _ in fleets]
        for fleet, budget in zip(fleets, budgets, strict=True):
            fleet.attach(budget, target="db")
            assert fleet.sync()
        for fleet, budget in zip(fleets, budgets, strict=True):
            budget.record_success()  # one success each, then the dependency dies
            assert fleet.sync()
        granted = 0
        for _ in range(10):
            for fleet, budget in zip(fleets, budgets, strict=True):
                granted += sum(budget.try_acquire() for _ in range(20))
                assert fleet.sync()
        return granted
    finally:
        for fleet in fleets:
            fleet.close()


def _local_retries() -> int:
    budget = RetryBudget()
    budget.record_success()
    return sum(budget.try_acquire() for _ in range(200))


@pytest.mark.parametrize("processes", [1, 2, 3, 4, 8])
def test_sharing_never_lends_more_than_the_local_floor_credit(
    redis_server: RedisServer, processes: int
) -> None:
    """N processes sharing retry at most what N per-process budgets would (2 each)."""
    local = _local_retries()
    assert local == 2
    shared = _cold_outage_retries(redis_server, processes)
    assert shared <= processes * local, (processes, shared)
    assert shared <= 10  # and never more than one floor


def _outage_grants(
    server: RedisServer, *, liar: bool, paced: list[float] | None = None
) -> tuple[int, list[float]]:
    """Retries granted to 4 honest members in an outage, beside a lying fifth or not, and how
    long each step took in real time.

    The fleet's leases refill with real time, so a run compared with another must take as long:
    ``paced`` gives each step's length to wait out (the liar's 100 000 successes a step take
    seconds on a loaded machine, and an unpaced honest run once saw 45 grants to its 137).
    """
    fleets = _members(server, 5 if liar else 4, f"skew-{uuid.uuid4().hex[:6]}")
    steps: list[float] = []
    try:
        # Budgets on a clock of their own, without the blip rule: what the lease grants.
        clock = FakeClock()
        budgets = [RetryBudget(blip=None, clock=clock) for _ in fleets]
        for fleet, budget in zip(fleets, budgets, strict=True):
            fleet.attach(budget, target="db")

        def step(work: Callable[[int, RetryBudget], int]) -> int:
            began = time.monotonic()
            done = 0
            for index, (fleet, budget) in enumerate(zip(fleets, budgets, strict=True)):
                done += work(index, budget)
                assert fleet.sync()
            if paced is not None:
                time.sleep(max(0.0, paced[len(steps)] - (time.monotonic() - began)))
            steps.append(time.monotonic() - began)
            return done

        def succeed(index: int, budget: RetryBudget) -> int:
            for _ in range(100_000 if index == 4 else 5):
                budget.record_success()
            return 0

        def retry(index: int, budget: RetryBudget) -> int:
            if index == 4:  # the outage: the liar still claims its successes
                return succeed(index, budget)
            return sum(budget.try_acquire() for _ in range(50))

        for _ in range(20):  # health: 5 successes per honest member per step
            step(succeed)
        granted = sum(step(retry) for _ in range(12))
        return granted, steps
    finally:
        for fleet in fleets:
            fleet.close()


def test_a_member_claiming_huge_successes_funds_no_storm(redis_server: RedisServer) -> None:
    """A member reporting 100 000 successes a step funds little more than an honest one."""
    skewed, steps = _outage_grants(redis_server, liar=True)
    honest, _ = _outage_grants(redis_server, liar=False, paced=steps)
    assert skewed <= 2 * honest + 10, (honest, skewed)


class _LyingThrottle(AdaptiveThrottle):  # type: ignore[misc]
    """A member whose throttle reports 10^12 requests and no accept."""

    def statistics(self) -> AdaptiveThrottleStatistics:
        stats = super().statistics()
        return dataclasses.replace(stats, requests=10**12, accepts=0, overloaded=10**12)


def test_a_member_claiming_huge_failures_sheds_no_healthy_call(redis_server: RedisServer) -> None:
    """Honest members at 50 healthy requests each shed (almost) nothing beside a liar."""
    fleets = _members(redis_server, 5, f"shed-{uuid.uuid4().hex[:6]}")
    try:
        throttles = [AdaptiveThrottle(name="api") for _ in range(4)] + [_LyingThrottle(name="api")]
        for fleet, throttle in zip(fleets, throttles, strict=True):
            fleet.attach(throttle)
        for throttle in throttles[:4]:
            for _ in range(50):
                assert throttle.allow_request()
                throttle.record_success()
        for _ in range(3):
            for fleet in fleets:
                assert fleet.sync()
        shed = sum(not throttles[0].allow_request() for _ in range(1000))
        assert shed <= 50, shed
    finally:
        for fleet in fleets:
            fleet.close()
