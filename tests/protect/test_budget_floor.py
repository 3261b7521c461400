"""The budget's floor lends at most floor_credit retries between successes (low-rate clients)."""

from __future__ import annotations

from typing import Any

import pytest

from retrymw import RetryBudget
from retrymw._core.errors import ConfigError
from retrymw.simulate import Scenario, simulate
from retrymw.testing import FakeClock


def test_a_fresh_budget_lends_its_whole_floor(clock: FakeClock) -> None:
    """Before any success nothing is known: all min_capacity tokens fund retries."""
    budget = RetryBudget(clock=clock)
    assert sum(budget.try_acquire() for _ in range(20)) == 10


def test_after_traffic_the_floor_lends_two_retries_until_the_next_success(
    clock: FakeClock,
) -> None:
    """A low-rate client (10 successes in 10 s) gets 2 floor retries, then one per success
    (with burst 0.1: only 1 token of the 10 is traffic-funded)."""
    budget = RetryBudget(clock=clock, burst=0.1)
    for _ in range(10):
        budget.record_success()
        clock.advance(1)
    assert budget.statistics().available == 10  # full, but only 1 token is traffic-funded
    assert [budget.try_acquire() for _ in range(3)] == [True, True, False]
    assert budget.statistics().floor_credit == 0
    budget.record_success()
    assert budget.statistics().floor_credit == 2
    assert [budget.try_acquire() for _ in range(3)] == [True, True, False]


def test_traffic_funded_tokens_need_no_credit(clock: FakeClock) -> None:
    """At 100 calls/s the capacity is the traffic's own: every token funds a retry."""
    budget = RetryBudget(clock=clock, floor_credit=0)
    for _ in range(2000):  # 20 s: 0.3 tokens a success fill the 600 of the capacity
        budget.record_success()
        clock.advance(0.01)
    assert sum(budget.try_acquire() for _ in range(700)) == 600


def test_clone_keeps_the_floor_credit(clock: FakeClock) -> None:
    """A clone has the same floor_credit and a fresh credit."""
    clone = RetryBudget(clock=clock, floor_credit=5).clone()
    assert clone.statistics().floor_credit == float("inf")
    for _ in range(10):
        clone.record_success()
        clock.advance(1)
    clone.try_acquire()
    assert clone.statistics().floor_credit == 4


@pytest.mark.parametrize(
    "value",
    [pytest.param(-1, id="negative"), pytest.param(1.5, id="float"), pytest.param(True, id="bool")],
)
def test_invalid_floor_credit(value: Any) -> None:
    """floor_credit must be a non-negative integer."""
    with pytest.raises(ConfigError) as caught:
        RetryBudget(floor_credit=value)
    assert caught.value.field == "floor_credit"


def test_many_low_rate_clients_are_bounded_in_an_outage() -> None:
    """1 000 clients x 1 call/s with per-client budgets, 10 s outage: amplification <= 1.25.

    It was 2.00 with a floor that could be spent whole (every call retried twice).
    """
    scenario = Scenario(
        "1000 clients x 1/s", rate=1, duration=50, warmup=30, fault=10, clients=1000
    )
    result = simulate(scenario)
    assert result.calls == 10_000
    assert result.amplification <= 1.25
    spendable = {"floor_credit": 100, "blip": None}
    whole_floor = simulate(Scenario(**{**_fields(scenario), "budget": spendable}))
    assert whole_floor.amplification == 2.0  # what the credit rule prevents


def _fields(scenario: Scenario) -> dict[str, Any]:
    return {name: getattr(scenario, name) for name in Scenario.__dataclass_fields__}
