"""Issue 13's goals as seeded simulator runs with the real objects (virtual time).

Every situation runs with the setups of `retrymw.simulate.SETUPS`; docs/protection.md shows the
whole table (`compare`) and recommends a setup per situation. Where a goal is not met for
every parameter, the test pins what holds and its docstring says so.
"""

from __future__ import annotations

from dataclasses import replace
from random import Random
from typing import Any

import pytest

from retrymw import (
    AdaptiveThrottle,
    CircuitBreaker,
    CircuitOpenError,
    LoadShedError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryPolicy,
)
from retrymw.simulate import SETUPS, Scenario, SimulationResult, simulate, situations, with_setup
from retrymw.testing import FakeClock
from tests.calls import call_as

SITUATIONS = {scenario.name: scenario for scenario in situations()}
EVERY_SETUP = [pytest.param(name, id=name) for name in SETUPS]
THROTTLED = [pytest.param(name, id=name) for name in ("+ budget + throttle", "retries + throttle")]


def run(situation: str, setup: str, **changes: Any) -> SimulationResult:
    """One situation of `situations()` with one setup (and field changes), seed 0."""
    return simulate(with_setup(replace(SITUATIONS[situation], **changes), setup))


@pytest.mark.parametrize("setup", EVERY_SETUP)
@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({}, id="one-dead-backend-of-2"),
        pytest.param({"backends": 1, "failure": 0.5}, id="iid-p0.5"),
    ],
)
def test_no_setup_turns_a_partial_failure_into_a_total_one(
    setup: str, changes: dict[str, Any]
) -> None:
    """With every setup, the default breaker included, success stays >= no retries' 0.50."""
    assert run("partial failure 1 of 2", setup, **changes).success_rate >= 0.50


def test_the_recommended_setup_for_a_partial_failure_keeps_most_calls() -> None:
    """Retries with a throttle (the docs' recommendation behind a balancer): success >= 0.85."""
    assert run("partial failure 1 of 2", "retries + throttle").success_rate >= 0.85
    iid = run("partial failure 1 of 2", "retries + throttle", backends=1, failure=0.5)
    assert iid.success_rate >= 0.85


@pytest.mark.parametrize("setup", THROTTLED)
@pytest.mark.parametrize(("p", "goal"), [(0.1, 0.999), (0.2, 0.99)], ids=["p0.1", "p0.2"])
def test_a_throttle_leaves_a_brownout_alone(setup: str, p: float, goal: float) -> None:
    """At p = 0.1 / 0.2 success stays >= 0.999 / 0.99 and the throttle rejects <= 1%."""
    result = run(f"brownout p={p}", setup)
    assert result.success_rate >= goal
    assert result.shed <= 0.01 * result.calls


@pytest.mark.parametrize("rate", [2, 10, 100, 1000], ids=lambda rate: f"{rate}/s")
def test_a_total_outage_costs_at_most_ten_percent_more_attempts(rate: int) -> None:
    """The default budget bounds amplification to <= 1.10 at 2 to 1 000 calls/s; so do the
    setups that add a breaker or a throttle to it."""
    for setup in ("+ budget", "+ budget + breaker", "+ budget + throttle"):
        result = simulate(with_setup(Scenario("outage", rate=rate, duration=90, warmup=30), setup))
        assert result.amplification <= 1.10, setup


@pytest.mark.parametrize("setup", THROTTLED)
@pytest.mark.parametrize("rate", [2, 10, 100, 1000], ids=lambda rate: f"{rate}/s")
def test_a_throttle_sheds_most_of_a_total_outage(setup: str, rate: int) -> None:
    """Of the calls arriving from 10 s into a total outage a throttle refuses >= 85%, at 2 to
    1 000 calls/s (at 2 calls/s it refused 79% while only answered attempts counted in the
    confidence factor R / (R + 1): the 10 s window then held a handful of them)."""
    scenario = Scenario("outage", rate=rate, duration=90, warmup=30)
    result = simulate(with_setup(scenario, setup))
    assert result.shed_from_10s >= 0.85
    assert result.amplification <= 1.10


@pytest.mark.parametrize("setup", EVERY_SETUP)
def test_success_is_back_within_ten_seconds_of_recovery(setup: str) -> None:
    """After a 30 s outage every second of calls succeeds at >= 0.99 within 10 s."""
    result = run("recovery", setup)
    assert result.recovered_in is not None
    assert result.recovered_in <= 10.0


@pytest.mark.parametrize(
    ("cost", "offered"),
    [
        pytest.param(0.0, 1.2, id="free-rejections"),
        pytest.param(0.1, 1.2, id="rejection-costs-0.1"),
        pytest.param(0.25, 1.0, id="rejection-costs-0.25"),
        pytest.param(0.5, 1.0, id="rejection-costs-0.5"),
    ],
)
def test_an_overload_is_not_made_worse(cost: float, offered: float) -> None:
    """Demand 1.5x capacity for 60 s with budget + throttle (defaults): goodput >= no retries',
    offered load <= 1.2x demand, normal <= 10 s after, whatever a refusal costs.

    Past capacity the dependency serves (capacity - c O) / (1 - c) attempts a second for an
    offered load O, so with c > 0 only O below the demand beats no retries. The dependency
    refuses with 503, and the throttle's overload term (overload_k = 1.4) sheds once more than
    1 - 1/1.4 = 29% of the attempts are refused: at c = 0.25 the load settles under the demand
    (0.977x, 85.5/s against 83.5/s). Before the overload term it was 79.3/s (1.106x).
    """
    baseline = run("overload 1.5x", "no retries", rejection_cost=cost)
    result = run("overload 1.5x", "+ budget + throttle", rejection_cost=cost)
    assert result.amplification <= offered
    assert result.recovered_in is not None
    assert result.recovered_in <= 10.0
    assert result.goodput >= baseline.goodput
    for served in (baseline, result):  # the capacity law the goodput comes from
        load = 150 * served.amplification
        law = 100.0 if load <= 100 else (100 - cost * load) / (1 - cost)
        assert served.goodput == pytest.approx(law, rel=0.04)
    storm = run("overload 1.5x", "retries alone", rejection_cost=cost)
    assert storm.amplification > 2.0  # what the protection prevents


@pytest.mark.parametrize("seed", range(5))
def test_the_overload_goal_holds_on_every_seed(seed: int) -> None:
    """Seeds 0-4 at c = 0.25 with the defaults: goodput 85.5-86.3/s against no retries'
    83.2-85.3/s, offered <= 0.984x, normal after <= 6 s."""
    scenario = SITUATIONS["overload 1.5x"]
    baseline = simulate(with_setup(scenario, "no retries"), seed=seed)
    result = simulate(with_setup(scenario, "+ budget + throttle"), seed=seed)
    assert result.goodput >= baseline.goodput
    assert result.amplification <= 1.2
    assert result.recovered_in is not None
    assert result.recovered_in <= 10.0


@pytest.mark.parametrize("setup", THROTTLED)
def test_the_throttle_tells_load_from_loss(setup: str) -> None:
    """What the overload signal does. A 50% loss (a dead backend of two, failing without a
    status) is left alone: 0.03% of the calls shed. The same failure answered with 503s looks
    like an overload and is shed: 30% (success 0.39 with budget + throttle, 0.52 with retries
    + throttle). And an overload whose refusals carried no status is judged at k = 2 alone:
    79.3/s with budget + throttle (72.8/s with retries + throttle), short of no retries' 83.5/s.
    """
    loss = run("partial failure 1 of 2", setup)
    assert loss.shed <= 0.001 * loss.calls
    refused = run("partial failure 1 of 2", setup, failure_status=503)
    assert refused.shed >= 0.25 * refused.calls
    assert refused.success_rate < loss.success_rate - 0.15  # 0.59 -> 0.39, 0.89 -> 0.52
    baseline = run("overload 1.5x", "no retries")
    assert run("overload 1.5x", setup, refusal_status=None).goodput < baseline.goodput


@pytest.mark.parametrize("setup", THROTTLED)
def test_outages_and_brownouts_answered_with_503_are_still_handled(setup: str) -> None:
    """If the fault's failures carried 503: a p = 0.2 brownout is still left alone (the
    overload term binds above 29% refused), a total outage is still shed (>= 85% from 10 s in)
    and recovery still takes <= 10 s (3-4 s against 2 s)."""
    brownout = run("brownout p=0.2", setup, failure_status=503)
    assert brownout.success_rate >= 0.99
    assert brownout.shed <= 0.01 * brownout.calls
    outage = simulate(
        with_setup(Scenario("outage", rate=100, duration=90, warmup=30, failure_status=503), setup)
    )
    assert outage.shed_from_10s >= 0.85
    recovery = run("recovery", setup, failure_status=503)
    assert recovery.recovered_in is not None
    assert recovery.recovered_in <= 10.0


@pytest.mark.parametrize("setup", ["+ budget", "+ budget + breaker", "+ budget + throttle"])
def test_many_low_rate_clients_are_bounded(setup: str) -> None:
    """1 000 clients x 1 call/s, per-client protection, 10 s outage: amplification <= 1.25."""
    result = run("1000 clients x 1/s", setup)
    assert result.calls == 10_000
    assert result.amplification <= 1.25


def test_clients_in_step_do_not_herd_with_the_http_defaults() -> None:
    """1 000 clients in step on the HTTP default policy and per-client budget: the busiest
    100 ms of retries after the outage starts holds <= 3x the mean attempts per 100 ms before.

    The literal measure, all attempts, cannot go below 10x with any retry policy: at 1 call/s
    each second's 1 000 first attempts fall into one of its ten 100 ms slots (10.0 without
    retries, 10.88 with the HTTP defaults). So the goal is applied to what retries add (1.05).
    Without jitter they pile onto later rounds: 20x (the issue's 30x, first attempts included).
    Retries without a budget peak at 3.27x (four attempts since issue 29; 2.38x with three).
    """
    result = run("1000 clients in step", "+ budget")
    assert result.retry_herd_factor <= 3.0
    assert run("1000 clients in step", "retries alone").retry_herd_factor <= 3.5
    no_retries = run("1000 clients in step", "no retries")
    assert no_retries.herd_factor == 10.0  # the workload's own floor
    assert result.herd_factor < 1.2 * no_retries.herd_factor
    policy = SITUATIONS["1000 clients in step"].policy
    unjittered = run("1000 clients in step", "retries alone", policy=policy.replace(jitter=False))
    assert (unjittered.herd_factor, unjittered.retry_herd_factor) == (30.0, 20.0)


def dead_target_run(
    clock: FakeClock, breaker: CircuitBreaker, *, per_target: bool
) -> tuple[int, int]:
    """2 000 healthy targets and one dead one (every 10th call).

    Returns:
        the healthy calls refused (breaker or throttle) and the dead target's calls refused.
    """
    retrier = Retrier(
        RetryPolicy(attempts=3, backoff="fixed", initial_delay="10ms"),
        breaker=PerTarget(breaker) if per_target else breaker,
        budget=PerTarget(RetryBudget(clock=clock)),
        throttle=PerTarget(AdaptiveThrottle(clock=clock, rng=Random(0))),
        clock=clock,
        instruments=(),
    )

    def dead() -> None:
        raise ConnectionError("refused")

    refused = dead_refused = 0
    for index in range(20_000):
        clock.advance(0.001)
        if index % 10 == 0:
            try:
                call_as(retrier, dead, operation="dead")
            except ConnectionError:
                pass
            except (CircuitOpenError, LoadShedError):
                dead_refused += 1
            continue
        try:
            call_as(retrier, lambda: None, operation=f"healthy-{index % 2000}")
        except (CircuitOpenError, LoadShedError):
            refused += 1
    return refused, dead_refused


def test_one_dead_target_among_2000_refuses_no_healthy_call() -> None:
    """Per-target breaker, budget and throttle (1 024 targets kept, so healthy ones are
    evicted and re-created all along): 0 healthy calls refused, while the dead target's own
    protection refuses most of its calls.

    One breaker for every target refuses healthy calls once the dead one trips it.
    """
    clock = FakeClock()
    healthy, dead = dead_target_run(clock, CircuitBreaker(clock=clock), per_target=True)
    assert healthy == 0
    assert dead > 1000
    clock = FakeClock()
    shared = CircuitBreaker(failure_threshold=3, failure_rate_threshold=None, clock=clock)
    assert dead_target_run(clock, shared, per_target=False)[0] > 0


def test_the_readme_quotes_these_runs() -> None:
    """The README's partial-failure and overload figures are these runs' (seed 0)."""
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    partial = {
        setup: run("partial failure 1 of 2", setup).success_rate
        for setup in ("no retries", "+ budget", "retries + throttle")
    }
    overload = {
        setup: run("overload 1.5x", setup).goodput
        for setup in ("no retries", "+ budget + throttle")
    }
    assert (
        f"success {partial['+ budget']:.3f} with the budget, "
        f"{partial['retries + throttle']:.3f} with retries + throttle, "
        f"{partial['no retries']:.2f} without retries"
    ) in readme
    assert (
        f"serve {overload['+ budget + throttle']:.1f} calls/s against "
        f"{overload['no retries']:.1f} without retries"
    ) in readme
