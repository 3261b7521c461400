"""A Retrier announces its policy and protection to the instruments from its creation."""

from __future__ import annotations

from random import Random

import pytest
from prometheus_client import CollectorRegistry

from retrymw import (
    AdaptiveThrottle,
    Attached,
    CircuitBreaker,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryPolicy,
)
from retrymw._core.instruments import Instrument
from retrymw.instrumentation import PrometheusInstrument
from retrymw.testing import FakeClock


class Announcements(Instrument):
    """Keeps every `Attached` event."""

    def __init__(self) -> None:
        self.seen: list[Attached] = []

    def attached(self, event: Attached, /) -> None:
        self.seen.append(event)


def test_a_fresh_breaker_reads_closed_before_any_call(clock: FakeClock) -> None:
    """Prometheus shows closed = 1 and every transition at 0 as soon as the Retrier exists."""
    registry = CollectorRegistry()
    breaker = CircuitBreaker(name="inventory", failure_threshold=1, clock=clock)
    Retrier(RetryPolicy(attempts=1), breaker=breaker, instruments=[PrometheusInstrument(registry)])
    circuit = {"retrymw_circuit": "inventory"}
    state = "retrymw_circuit_state"
    assert registry.get_sample_value(state, {**circuit, state: "closed"}) == 1
    assert registry.get_sample_value(state, {**circuit, state: "open"}) == 0
    trips = {**circuit, "retrymw_circuit_previous_state": "closed", state: "open"}
    assert registry.get_sample_value("retrymw_circuit_transitions_total", trips) == 0


def test_shared_protection_is_announced_once_with_the_policy(clock: FakeClock) -> None:
    """The policy, breaker, budget and throttle shared by every target, with target ""."""
    policy = RetryPolicy(name="checkout")
    breaker, budget = CircuitBreaker(clock=clock), RetryBudget(clock=clock)
    throttle = AdaptiveThrottle(clock=clock, rng=Random(0))
    announcements = Announcements()
    Retrier(policy, breaker=breaker, budget=budget, throttle=throttle, instruments=[announcements])
    assert [(e.policy, e.target) for e in announcements.seen] == [("checkout", "")] * 4
    assert [e.subject for e in announcements.seen] == [policy, breaker, budget, throttle]


@pytest.mark.anyio
async def test_a_per_target_instance_is_announced_when_created(clock: FakeClock) -> None:
    """Targets already there at construction, then each target created by a call."""
    budgets = PerTarget(RetryBudget(clock=clock))
    existing = budgets.for_target("before")
    announcements = Announcements()
    retrier = Retrier(
        RetryPolicy(name="p", attempts=1), budget=budgets, instruments=[announcements]
    )
    assert [(e.target, e.subject) for e in announcements.seen[1:]] == [("before", existing)]

    async def fetch() -> int:
        return 1

    await retrier.call(fetch)
    await retrier.call(fetch)  # the same target again: no new instance, no announcement
    (target,) = (name for name in budgets if name != "before")
    created = [(e.policy, e.target, e.subject) for e in announcements.seen[2:]]
    assert created == [("p", target, budgets.get(target))]


def test_retriers_built_alike_leave_one_listener_on_a_shared_per_target(
    clock: FakeClock,
) -> None:
    """config.retrier(name) per request must not grow a shared PerTarget's listeners."""
    breakers = PerTarget(CircuitBreaker(clock=clock))
    announcements = Announcements()
    for _ in range(50):
        Retrier(RetryPolicy(name="p"), breaker=breakers, instruments=[announcements])
    other = Announcements()
    Retrier(RetryPolicy(name="p"), breaker=breakers, instruments=[other])
    breakers.for_target("db")
    assert [e.target for e in announcements.seen if e.target] == ["db"]
    assert [e.target for e in other.seen if e.target] == ["db"]


def test_nothing_is_left_on_a_per_target_when_no_instrument_listens(clock: FakeClock) -> None:
    """Without an `attached` hook the Retrier adds no creation listener."""
    breakers = PerTarget(CircuitBreaker(clock=clock))
    Retrier(RetryPolicy(), breaker=breakers, instruments=())
    assert breakers._created == ()
