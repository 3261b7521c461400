"""Issue 13's goals as seeded simulator runs with the real objects (virtual time)."""

from __future__ import annotations

from typing import Any

import pytest

from retrymw import RetryPolicy
from retrymw.simulate import Scenario, SimulatedFailure, simulate

RETRIES = RetryPolicy(retry_on=SimulatedFailure)
NO_RETRIES = RetryPolicy(retry_on=SimulatedFailure, attempts=1)
SETUPS: dict[str, dict[str, Any]] = {
    "no retries": {"policy": NO_RETRIES, "budget": None},
    "retries alone": {"budget": None},
    "+ budget": {},
    "+ budget + breaker": {"breaker": {}},
    "+ budget + throttle": {"throttle": {}},
    "retries + throttle": {"budget": None, "throttle": {}},
}


def partial_failure(setup: str) -> float:
    """One dead backend of two, round robin (p = 0.5), 100 calls/s for 10 minutes."""
    fields = {"policy": RETRIES, **SETUPS[setup]}
    scenario = Scenario(f"partial {setup}", rate=100, duration=600, failure=0.5, **fields)
    return simulate(scenario).success_rate


@pytest.mark.parametrize("setup", [pytest.param(name, id=name) for name in SETUPS])
def test_no_setup_turns_a_partial_failure_into_a_total_one(setup: str) -> None:
    """With every setup, the default breaker included, success stays >= no retries' 0.50."""
    assert partial_failure(setup) >= 0.50


def test_the_recommended_setup_for_a_partial_failure_keeps_most_calls() -> None:
    """Retries with a throttle (the docs' recommendation behind a balancer): success >= 0.85."""
    assert partial_failure("retries + throttle") >= 0.85


@pytest.mark.parametrize("rate", [pytest.param(rate, id=f"{rate}/s") for rate in (10, 100)])
def test_a_throttle_sheds_most_of_a_total_outage(rate: int) -> None:
    """In a total outage, a throttle refuses >= 85% of the calls arriving from 10 s in."""
    scenario = Scenario("outage", rate=rate, duration=90, warmup=30, policy=RETRIES, throttle={})
    result = simulate(scenario)
    assert result.shed_from_10s >= 0.85
    assert result.amplification <= 1.10


def test_a_throttle_leaves_a_brownout_alone() -> None:
    """At p = 0.1 the throttle rejects nothing and success stays >= 0.999."""
    scenario = Scenario(
        "brownout", rate=100, duration=300, failure=0.1, policy=RETRIES, throttle={}
    )
    result = simulate(scenario)
    assert result.success_rate >= 0.999
    assert result.shed <= 0.01 * result.calls
